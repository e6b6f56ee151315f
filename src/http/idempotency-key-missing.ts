/**
 * The one `400 idempotency_key_missing` every create route answers
 * (`POST /v1/jobs` and the gateway endpoints): the code stays the
 * contract's (CONTRACT §3); the message is product text for the first
 * request a newcomer sends without a key, so it says how to send one with
 * each client and that keyless mode exists, with the docs' address.
 */

import { OnejobError } from '../core/errors.ts';

/** Where the ways to send a key are written down (shipped in the package's `docs/`). */
export const SENDING_A_KEY_DOCS = 'docs/client.md#sending-an-idempotency-key';

/** The detail of `idempotency_key_missing`. */
export const IDEMPOTENCY_KEY_MISSING_MESSAGE =
  'the Idempotency-Key header is required: one key (1–255 visible ASCII characters) per intent, sent again unchanged on every retry of it. ' +
  "OpenAI or Anthropic SDK: pass `fetch: intentFetch()` (import { intentFetch } from 'onejob/client') in the client's options and it sends one per call, " +
  "or send the header per request: `{ headers: { 'Idempotency-Key': key } }` as the request options; " +
  "OnejobClient (onejob/client) sends one by itself; curl: -H 'Idempotency-Key: <key>'. " +
  'For callers that cannot send a key, the server can accept keyless creates: "keyless": {"mode": "fingerprint"} in its config ' +
  '(then two identical bodies within keyless.windowMs are one job). ' +
  `See ${SENDING_A_KEY_DOCS}`;

/** The error a create without an Idempotency-Key (in keyless `reject` mode) throws. */
export function idempotencyKeyMissing(): OnejobError {
  return new OnejobError('idempotency_key_missing', IDEMPOTENCY_KEY_MISSING_MESSAGE);
}
