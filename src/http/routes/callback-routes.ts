/**
 * `POST /v1/attempts/{id}/callback` (CONTRACT §11, §15): a task service tells
 * what became of a task. The one `/v1/` route that authenticates by
 * signature, not by token (`src/providers/task/callback-signature.ts`):
 * `Onejob-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>">`
 * with the provider's callbackSecret, `t` within 300 s of onejob's clock
 * either way, each signature once (a reuse is `401`; used ones are kept in
 * the database until their window has passed); or the v3 form `sha256=<hex
 * HMAC-SHA256 of the body>`, only when the body's task `id` is the attempt's
 * recorded `provider_request_id` (an attempt with none accepts only v4).
 * Anything else is `401` and changes nothing; an API token does not replace
 * the signature. Registered in its own scope of `build-app.ts`, whose
 * `onRequest` hook refuses a request without a well-formed signature before
 * its body is read; the handler checks the signature against the exact
 * bytes received.
 *
 * The body is a task (`{"id", "status", "output"?, "error"?}`), read exactly
 * as the lookup reads one; a callback moves nothing the lookup would not
 * (`starting`/`processing` change nothing; only an attempt in doubt is
 * moved, §15).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import type { Attempt } from '../../core/types.ts';
import {
  CALLBACK_WINDOW_SECONDS, callbackSignatureMatches, parseCallbackSignature, signCallback, signCallbackV3, withinCallbackWindow,
  type CallbackSignature,
} from '../../providers/task/callback-signature.ts';
import { readTask, taskLookupAnswer } from '../../providers/task/task-provider.ts';
import { attemptBody } from '../api-bodies.ts';
import { errorResponses, idParams, type IdParams } from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';

/** The path of the signed callback (the signature-authenticated scope holds nothing else). */
export const CALLBACK_PATH = '/v1/attempts/:id/callback';
/** Every route of the signature-authenticated scope. */
export const SIGNED_PATHS: ReadonlySet<string> = new Set([CALLBACK_PATH]);
/** The signature header. */
export const SIGNATURE_HEADER = 'onejob-signature';

/**
 * The `Onejob-Signature` value of a callback about `attemptId` with `body`
 * under `secret`: the v4 form, signed now (or at `t`); without `attemptId`,
 * the v3 form (body only).
 *
 * @example callbackSignature('{"id":"t1","status":"succeeded"}', 's3cret…', 'att_1') // 't=1765152000,v1=…'
 */
export function callbackSignature(body: string | Buffer, secret: string, attemptId?: string, t?: number): string {
  return attemptId === undefined ? signCallbackV3(body, secret) : signCallback(body, secret, attemptId, t);
}

const HOW = `send Onejob-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>" with the provider's callbackSecret>`;

function unauthorized(why = HOW): OnejobError {
  return new OnejobError('unauthorized', why);
}

/** Registers the callback route in the signature-authenticated scope `app`. */
export function registerCallbackRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { store, config } = ctx;
  const rawBodies = new WeakMap<FastifyRequest, Buffer>();

  // Before anything else, whatever the spelling of the path: no well-formed signature, no further reading.
  app.addHook('onRequest', async (request) => {
    const given = request.headers[SIGNATURE_HEADER];
    if (typeof given !== 'string' || parseCallbackSignature(given) === null) throw unauthorized();
  });
  // The signature covers the exact bytes: keep them beside the parsed body.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    rawBodies.set(request, raw);
    try {
      done(null, JSON.parse(raw.toString('utf8')));
    } catch (error) {
      done(Object.assign(new Error((error as Error).message), { code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 }), undefined);
    }
  });

  app.post<{ Params: IdParams; Body: unknown }>(CALLBACK_PATH, {
    schema: {
      tags: ['attempts'],
      summary: 'A task service reports a task (signed callback)',
      description:
        "Authenticated by `Onejob-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<attempt id>.<body>\" with the provider's callbackSecret>` (`t` within 300 s of onejob's clock either way; each signature once), not by a token (a token does not replace it). The v3 form `sha256=<hex HMAC-SHA256 of the body>` is accepted only when the body's `id` is the attempt's recorded `provider_request_id`. Anything else is 401 and changes nothing. The body is the task as the service answers it; it is applied exactly as a lookup would apply it, to an attempt in doubt only (`succeeded` → output through the compare-and-swap, `failed`/`canceled` → failed, `starting`/`processing` → nothing).",
      params: idParams,
      response: { 200: { description: 'The attempt after the callback was applied.', $ref: 'Attempt#' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const attemptId = request.params.id;
      const raw = rawBodies.get(request);
      const signature = parseCallbackSignature(String(request.headers[SIGNATURE_HEADER]))!;
      // One answer for every reason a signature cannot be checked: existence is not revealed.
      const attempt = await store.findAttempt(attemptId);
      const provider = attempt === null ? undefined : Object.hasOwn(config.providers, attempt.provider) ? config.providers[attempt.provider] : undefined;
      const secret = provider?.type === 'task' && typeof provider.callbackSecret === 'string' ? provider.callbackSecret : null;
      if (attempt === null || secret === null || raw === undefined || !callbackSignatureMatches(signature, raw, secret, attempt.id)) {
        throw unauthorized();
      }
      bindLog(request, reply, { job_id: attempt.jobId, attempt_id: attempt.id });
      request.log = request.log.child({ owner: attempt.ownerId, provider: attempt.provider, signature: signature.version });
      const reading = readTask(request.body);
      await admitSignature(ctx, attempt, signature, reading.kind === 'malformed' ? null : reading.task.id);
      if (reading.kind === 'malformed') throw new OnejobError('invalid_request', `the callback body is not a task: ${reading.reason}`);
      if (attempt.providerRequestId !== null && reading.task.id !== attempt.providerRequestId) {
        throw new OnejobError('invalid_request', `the callback is about task ${reading.task.id}, but attempt ${attempt.id} is task ${attempt.providerRequestId}`);
      }
      if (signature.version === 'v4' && !(await store.useCallbackSignature({ signature: signature.hex, attemptId: attempt.id, expiresAt: new Date((signature.t + CALLBACK_WINDOW_SECONDS + 1) * 1000) }))) {
        throw unauthorized('this Onejob-Signature was used before: each signature is accepted once; sign each delivery anew (a new t)');
      }
      return attemptBody(await applyCallback(ctx, attempt, reading));
    },
  });
}

/**
 * The rules of a matching signature beyond its HMAC (CONTRACT §15): a v4
 * one's `t` within the window of onejob's clock (the database's); a v3 one
 * only about the attempt's recorded task. 401 otherwise.
 */
async function admitSignature(ctx: AppContext, attempt: Attempt, signature: CallbackSignature, taskId: string | null): Promise<void> {
  if (signature.version === 'v4') {
    const now = await ctx.store.databaseNow();
    if (!withinCallbackWindow(signature.t, now.getTime())) {
      throw unauthorized(`the Onejob-Signature's t (${signature.t}) is more than ${CALLBACK_WINDOW_SECONDS} s from onejob's clock (${Math.floor(now.getTime() / 1000)}): sign each delivery when it is sent, with a synchronized clock`);
    }
    return;
  }
  if (attempt.providerRequestId === null || taskId !== attempt.providerRequestId) {
    throw unauthorized(`a body-only signature (sha256=…) is accepted only for the task onejob recorded for this attempt; ${HOW}`);
  }
}

/** Applies a callback's task the way a lookup's answer is applied; the attempt afterwards. */
async function applyCallback(ctx: AppContext, attempt: Attempt, reading: Exclude<ReturnType<typeof readTask>, { kind: 'malformed' }>): Promise<Attempt> {
  // Only an attempt in doubt is moved (CONTRACT §15): the settle's guard refuses any other, and the attempt is answered as it is.
  if (attempt.state !== 'unknown' || reading.kind === 'running') return attempt;
  if (ctx.reconciler === null) throw new OnejobError('unavailable', 'this server cannot apply callbacks (no providers were given to it)');
  const provider = ctx.config.providers[attempt.provider];
  const settled = await ctx.reconciler.applyAnswer(attempt, taskLookupAnswer(attempt.provider, provider?.model ?? 'task', reading), 'callback');
  return settled?.attempt ?? (await ctx.store.findAttempt(attempt.id)) ?? attempt;
}
