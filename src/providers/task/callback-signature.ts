/**
 * The signature of a task service's callback (CONTRACT §11, §15):
 * `Onejob-Signature`, in two forms.
 *
 * - **v4**: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>">`
 *   with the provider's `callbackSecret`. It names the attempt and the time:
 *   accepted when `t` is within {@link CALLBACK_WINDOW_SECONDS} of onejob's
 *   clock either way, and once (the caller records it, `Store.useCallbackSignature`).
 * - **v3**: `sha256=<hex HMAC-SHA256 of the body>`. It names neither, so it
 *   is accepted only when the body's task `id` is the attempt's recorded
 *   `provider_request_id` (the route checks that).
 *
 * Signing and checking are here, once: the route checks with them, the fake
 * task service signs with them (`docs/reconciliation.md` shows the same in
 * Node, Python and Go).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far `t` may be from onejob's clock, either way. */
export const CALLBACK_WINDOW_SECONDS = 300;

/** A well-formed `Onejob-Signature` value. */
export type CallbackSignature =
  | { readonly version: 'v4'; readonly t: number; readonly hex: string }
  | { readonly version: 'v3'; readonly hex: string };

const V3 = /^sha256=([0-9a-fA-F]{64})$/;
const V4 = /^t=(\d{1,12}),\s*v1=([0-9a-fA-F]{64})$/;

/**
 * The signature a header value carries, or null when it is neither form.
 *
 * @example parseCallbackSignature('t=1765152000,v1=ab…') // { version: 'v4', t: 1765152000, hex: 'ab…' }
 */
export function parseCallbackSignature(value: string): CallbackSignature | null {
  const given = value.trim();
  const v4 = V4.exec(given);
  if (v4) return { version: 'v4', t: Number(v4[1]), hex: v4[2]!.toLowerCase() };
  const v3 = V3.exec(given);
  return v3 ? { version: 'v3', hex: v3[1]!.toLowerCase() } : null;
}

/**
 * The v4 `Onejob-Signature` of a callback about `attemptId` with `body`,
 * signed at `t` (unix seconds; default now).
 *
 * @example signCallback('{"id":"t1","status":"succeeded"}', 'whsec_…', 'att_1', 1765152000) // 't=1765152000,v1=…'
 */
export function signCallback(body: string | Buffer, secret: string, attemptId: string, t = Math.floor(Date.now() / 1000)): string {
  return `t=${t},v1=${v4Hex(body, secret, attemptId, t)}`;
}

/**
 * The v3 `Onejob-Signature` (body only): accepted only for an attempt whose
 * recorded `provider_request_id` is the body's task id.
 *
 * @example signCallbackV3('{"id":"t1","status":"succeeded"}', 'whsec_…') // 'sha256=…'
 */
export function signCallbackV3(body: string | Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * Whether `signature` is the HMAC of `body` (v3) or of `t.attemptId.body`
 * (v4) under `secret`, compared in constant time. The window and the
 * once-only rule of v4 are the caller's (they need a clock and the store).
 */
export function callbackSignatureMatches(signature: CallbackSignature, body: Buffer, secret: string, attemptId: string): boolean {
  const expected = signature.version === 'v4' ? v4Hex(body, secret, attemptId, signature.t) : createHmac('sha256', secret).update(body).digest('hex');
  const a = Buffer.from(signature.hex, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether a v4 signature's `t` is within the window of `nowMs` (onejob's clock), either way. */
export function withinCallbackWindow(t: number, nowMs: number): boolean {
  return Math.abs(nowMs / 1000 - t) <= CALLBACK_WINDOW_SECONDS;
}

function v4Hex(body: string | Buffer, secret: string, attemptId: string, t: number): string {
  return createHmac('sha256', secret).update(`${t}.${attemptId}.`).update(body).digest('hex');
}
