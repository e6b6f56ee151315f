/**
 * `POST /v1/attempts/{id}/callback` (CONTRACT §11): a task service tells
 * what became of a task. The one `/v1/` route that authenticates by
 * signature, not by token: `Onejob-Signature: sha256=<hex HMAC-SHA256 of the
 * body with the provider's callbackSecret>`. A missing or bad signature is
 * `401`, and an API token does not replace it. Registered in its own scope
 * of `build-app.ts`, whose `onRequest` hook refuses a request without a
 * well-formed signature before its body is read; the handler checks the
 * signature against the exact bytes received.
 *
 * The body is a task (`{"id", "status", "output"?, "error"?}`), read exactly
 * as the lookup reads one; a callback moves nothing the lookup would not
 * (`starting`/`processing` change nothing; an attempt no longer in doubt is
 * left as it is).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import type { Attempt } from '../../core/types.ts';
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

const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/**
 * The `Onejob-Signature` value of `body` under `secret`.
 *
 * @example callbackSignature('{"id":"t1","status":"succeeded"}', 's3cret…') // 'sha256=…'
 */
export function callbackSignature(body: string | Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function unauthorized(): OnejobError {
  return new OnejobError('unauthorized', 'send Onejob-Signature: sha256=<hex HMAC-SHA256 of the body with the provider\'s callbackSecret>');
}

/** Registers the callback route in the signature-authenticated scope `app`. */
export function registerCallbackRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { store, config } = ctx;
  const rawBodies = new WeakMap<FastifyRequest, Buffer>();

  // Before anything else, whatever the spelling of the path: no well-formed signature, no further reading.
  app.addHook('onRequest', async (request) => {
    const given = request.headers[SIGNATURE_HEADER];
    if (typeof given !== 'string' || !SIGNATURE.test(given.trim())) throw unauthorized();
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
        "Authenticated by `Onejob-Signature: sha256=<hex HMAC-SHA256 of the body with the provider's callbackSecret>`, not by a token (a token does not replace it): 401 without a valid signature. The body is the task as the service answers it; it is applied exactly as a lookup would apply it (`succeeded` → output through the compare-and-swap, `failed`/`canceled` → failed, `starting`/`processing` → nothing).",
      params: idParams,
      response: { 200: { description: 'The attempt after the callback was applied.', $ref: 'Attempt#' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const attemptId = request.params.id;
      const raw = rawBodies.get(request);
      // One answer for every reason a signature cannot be checked: existence is not revealed.
      const attempt = await store.findAttempt(attemptId);
      const provider = attempt === null ? undefined : Object.hasOwn(config.providers, attempt.provider) ? config.providers[attempt.provider] : undefined;
      const secret = provider?.type === 'task' && typeof provider.callbackSecret === 'string' ? provider.callbackSecret : null;
      if (attempt === null || secret === null || raw === undefined || !signatureMatches(String(request.headers[SIGNATURE_HEADER]).trim(), raw, secret)) {
        throw unauthorized();
      }
      bindLog(request, reply, { job_id: attempt.jobId, attempt_id: attempt.id });
      request.log = request.log.child({ owner: attempt.ownerId, provider: attempt.provider });
      const reading = readTask(request.body);
      if (reading.kind === 'malformed') throw new OnejobError('invalid_request', `the callback body is not a task: ${reading.reason}`);
      if (attempt.providerRequestId !== null && reading.task.id !== attempt.providerRequestId) {
        throw new OnejobError('invalid_request', `the callback is about task ${reading.task.id}, but attempt ${attempt.id} is task ${attempt.providerRequestId}`);
      }
      return attemptBody(await applyCallback(ctx, attempt, reading));
    },
  });
}

function signatureMatches(given: string, raw: Buffer, secret: string): boolean {
  const expected = Buffer.from(callbackSignature(raw, secret), 'utf8');
  const actual = Buffer.from(given.toLowerCase(), 'utf8');
  return actual.length === expected.length && timingSafeEqual(actual, expected);
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
