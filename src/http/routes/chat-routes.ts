/**
 * The OpenAI-compatible endpoint (CONTRACT §3): `POST /v1/chat/completions`
 * creates or joins the job of its Idempotency-Key, waits for it, and answers
 * in OpenAI's shape. See `docs/chat-completions.md`.
 *
 * Same lifecycle as `POST /v1/jobs`: authentication and the Idempotency-Key
 * check before the body is read ({@link idempotencyKeyOf}), strict JSON, the
 * schema (422), then the store. The wait is the long-poll's
 * ({@link waitForJob}). Every problem this route answers also carries an
 * OpenAI-style `error` member, so the OpenAI SDKs surface onejob's `code`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { tracedCreateJob } from '../../tracing/tracing.ts';
import { fingerprint } from '../../core/fingerprint.ts';
import { OnejobError, isOnejobError } from '../../core/errors.ts';
import type { JobWithAttempts } from '../../core/types.ts';
import { bearerSecurity, chatCompletionBody, createJobHeaders, errorResponses, type ChatCompletionBody } from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';
import { chatCompletionOf, chatRouteOf, withOpenAiError } from '../chat-completion.ts';
import { idempotencyKeyOf, waitForJob } from './job-routes.ts';

/** Options of the chat completions endpoint. */
export interface ChatRoutesOptions {
  /**
   * The longest a request waits for its job before answering `409
   * attempt_in_flight` (with `Retry-After`; the SDKs retry it with the same
   * key and wait again). Default 300 000 ms, below the OpenAI SDKs' own
   * 10-minute timeout so they get an answer rather than timing out.
   */
  readonly maxWaitMs?: number | undefined;
  /** The delay suggested by `Retry-After` (and `retry-after-ms`) on retryable answers. Default 1000 ms. */
  readonly retryAfterMs?: number | undefined;
}

/** Default of {@link ChatRoutesOptions.retryAfterMs}. */
export const DEFAULT_CHAT_RETRY_AFTER_MS = 1_000;

/** Header naming the job a chat answer belongs to. */
export const JOB_ID_HEADER = 'onejob-job-id';

/** Registers `POST /v1/chat/completions`. */
export function registerChatRoutes(app: FastifyInstance, ctx: AppContext, options: ChatRoutesOptions = {}): void {
  const { store, config, metrics } = ctx;
  const maxWaitMs = options.maxWaitMs ?? ctx.config.chatMaxWaitMs;
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_CHAT_RETRY_AFTER_MS;

  /** Headers that tell a client to come back with the same key. */
  const retryLater = (reply: FastifyReply): void => {
    reply.header('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000)))).header('retry-after-ms', String(retryAfterMs));
  };

  app.post<{ Body: ChatCompletionBody }>('/v1/chat/completions', {
    schema: {
      tags: ['openai'],
      summary: 'Create a chat completion (OpenAI-compatible, idempotent)',
      description: [
        '`model` names a route (or `route:<name>`). Creates the job for (owner, Idempotency-Key), or joins the one that key already created',
        'when the body is the same (canonical JSON), then waits for it. 200: the winning completion (`Idempotent-Replayed: true` when the key',
        'already had a job). 409 `attempt_in_doubt` (with `Retry-After`): an attempt is unknown. 502 `job_failed`: every provider failed',
        'definitely. 409 `job_finished`: the job was cancelled. 409 `attempt_in_flight` (with `Retry-After`): still running when the',
        'server-side wait ended; retry with the same key. Job-bound answers carry `Onejob-Job-Id`. Streaming is not supported.',
      ].join(' '),
      security: bearerSecurity,
      headers: createJobHeaders,
      body: chatCompletionBody,
      response: {
        200: { description: 'The completion, in OpenAI `chat.completion` shape.', $ref: 'ChatCompletion#' },
        ...errorResponses,
      },
    },
    // The key is checked right after authentication, before the body is read (as for POST /v1/jobs).
    onRequest: async (request) => {
      idempotencyKeyOf(request);
    },
    // OpenAI SDKs read `error.code` / `error.message`: add that view to every problem of this route.
    onSend: async (_request, reply, payload) => {
      const type = reply.getHeader('content-type');
      if (typeof payload !== 'string' || typeof type !== 'string' || !type.startsWith('application/problem+json')) return payload;
      try {
        return JSON.stringify(withOpenAiError(JSON.parse(payload) as Record<string, unknown>));
      } catch {
        return payload;
      }
    },
    handler: async (request, reply) => {
      const idempotencyKey = idempotencyKeyOf(request);
      const body = request.body;
      if (body.stream === true) {
        throw bodyRejection('stream', 'must be false or absent: streaming is not supported (the answer comes once the job has finished)');
      }
      if (body.n !== undefined && body.n !== 1) {
        throw bodyRejection('n', 'must be 1 or absent: a job has one result');
      }
      const route = chatRouteOf(body.model, config.routes);
      if (route === null) {
        throw new OnejobError('route_unknown', `no route named ${JSON.stringify(body.model)} is configured (model names a route, or route:<name>)`, {
          details: { route: body.model },
        });
      }
      const { model: _model, stream: _stream, ...input } = body;
      let created: boolean;
      let job: JobWithAttempts;
      try {
        ({ job, created } = await tracedCreateJob(store, request.headers, {
          ownerId: request.owner,
          idempotencyKey,
          route,
          input,
          providers: config.routes[route]!.providers,
          // The whole body: a replay must repeat it exactly (canonically), model and stream included.
          fingerprint: fingerprint({ endpoint: 'chat.completions', body }),
        }));
      } catch (error) {
        if (isOnejobError(error, 'idempotency_key_reused')) {
          metrics.conflicts.inc();
          request.log.info({ idempotency_key: idempotencyKey }, 'idempotency key reused with a different body');
        }
        throw error;
      }
      bindLog(request, reply, { job_id: job.id });
      reply.header(JOB_ID_HEADER, job.id);
      const replayed = created ? 'false' : 'true';
      if (created) {
        metrics.jobsCreated.inc({ route });
        request.log.info({ route }, 'chat job created');
      } else {
        metrics.replays.inc({ route });
        reply.header('idempotent-replayed', 'true');
        request.log.info({ route, state: job.state }, 'chat request joined its job');
      }

      const settled = await waitForJob(ctx, request, reply, job, maxWaitMs);
      return answer(request, reply, settled, replayed);
    },
  });

  function answer(request: FastifyRequest, reply: FastifyReply, job: JobWithAttempts, replayed: string): unknown {
    const details = { job_id: job.id };
    switch (job.state) {
      case 'succeeded':
        metrics.chatRequests.inc({ outcome: 'succeeded', replayed });
        return reply.code(200).send(chatCompletionOf(job, config));
      case 'unknown': {
        metrics.chatRequests.inc({ outcome: 'in_doubt', replayed });
        retryLater(reply);
        const doubt = job.attempts.find((a) => a.state === 'unknown' || a.state === 'starting');
        const which = doubt === undefined ? 'an attempt' : `attempt ${doubt.number} (${doubt.provider})`;
        throw new OnejobError('attempt_in_doubt', `${which} of job ${job.id} is unknown: the provider may have run it; retry with the same key later, or resolve it`, {
          details: doubt === undefined ? details : { ...details, attempt_id: doubt.id },
        });
      }
      case 'failed':
        metrics.chatRequests.inc({ outcome: 'failed', replayed });
        reply.header('x-should-retry', 'false');
        throw new OnejobError('job_failed', `job ${job.id} failed: ${job.error?.message ?? 'every provider failed'}`, {
          details: { ...details, job_error: job.error },
        });
      case 'cancelled':
        metrics.chatRequests.inc({ outcome: 'cancelled', replayed });
        reply.header('x-should-retry', 'false');
        throw new OnejobError('job_finished', `job ${job.id} was cancelled`, { details: { ...details, state: job.state } });
      default: {
        const gone = request.raw.socket?.destroyed === true;
        metrics.chatRequests.inc({ outcome: gone ? 'client_closed' : 'pending', replayed });
        if (!gone) request.log.info({ state: job.state, shutting_down: ctx.closing.aborted }, 'chat wait ended with the job still running');
        retryLater(reply);
        const why = ctx.closing.aborted ? 'the server is shutting down' : `the wait ended after ${maxWaitMs} ms`;
        throw new OnejobError('attempt_in_flight', `job ${job.id} is still ${job.state} (${why}); retry with the same Idempotency-Key to keep waiting`, {
          details: { ...details, state: job.state },
        });
      }
    }
  }
}

/**
 * A body member the schema accepts but this endpoint cannot honour, rejected
 * exactly like a schema violation (422 `invalid_request` with `field`), by
 * the one error handler.
 */
function bodyRejection(field: string, reason: string): Error {
  return Object.assign(new Error(`body/${field} ${reason}`), {
    statusCode: 400,
    validationContext: 'body',
    validation: [{ instancePath: `/${field}`, keyword: 'const', message: reason, params: {} }],
  });
}
