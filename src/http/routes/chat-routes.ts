/**
 * The OpenAI-compatible endpoint (CONTRACT §3): `POST /v1/chat/completions`
 * creates or joins the job of its Idempotency-Key, waits for it, and answers
 * in OpenAI's shape. See `docs/chat-completions.md`.
 *
 * Same lifecycle as `POST /v1/jobs`: authentication and the Idempotency-Key
 * check before the body is read ({@link idempotencyKeyOf}), strict JSON, the
 * schema (422), then the store. Creating/joining the job and waiting for it
 * are shared with `POST /v1/messages` (`../chat-job.ts`). Every problem this route answers also carries an
 * OpenAI-style `error` member, so the OpenAI SDKs surface onejob's `code`.
 */
import type { FastifyInstance } from 'fastify';
import { bearerSecurity, chatCompletionBody, streamingJobHeaders, errorResponses, type ChatCompletionBody } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { gatewayBodyLimit } from '../body-limits.ts';
import { chatCompletionOf } from '../chat-completion.ts';
import { createChatJob, settleChatJob } from '../chat-job.ts';
import { defaultStreamHub, type StreamHub } from '../../executor/stream-hub.ts';
import { lastEventIdCursor, streamJobResponse } from '../job-stream.ts';
import { creationKeyOf, IDEMPOTENCY_KEY_HEADER } from './job-routes.ts';

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
  /** Streaming: `: keep-alive` comments while nothing was sent. Default 15 000 ms (CONTRACT §7). */
  readonly keepAliveMs?: number | undefined;
  /** Streaming: the hub the executor of this process publishes to. Default the process's {@link defaultStreamHub}. */
  readonly streamHub?: StreamHub | undefined;
}

/** Default of {@link ChatRoutesOptions.retryAfterMs}. */
export const DEFAULT_CHAT_RETRY_AFTER_MS = 1_000;

/** Header naming the job a chat answer belongs to. */
export { JOB_ID_HEADER } from '../chat-job.ts';

/** Registers `POST /v1/chat/completions`. */
export function registerChatRoutes(app: FastifyInstance, ctx: AppContext, options: ChatRoutesOptions = {}): void {
  const { config } = ctx;
  const maxWaitMs = options.maxWaitMs ?? ctx.config.chatMaxWaitMs;
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_CHAT_RETRY_AFTER_MS;

  app.post<{ Body: ChatCompletionBody }>('/v1/chat/completions', {
    // Images travel inline: the gateway's body limit (32 MiB by default), not the 1 MiB of /v1/jobs.
    ...gatewayBodyLimit(ctx.config, '/v1/chat/completions'),
    schema: {
      tags: ['openai'],
      summary: 'Create a chat completion (OpenAI-compatible, idempotent)',
      description: [
        '`model` names a route (or `route:<name>`). Creates the job for (owner, Idempotency-Key), or joins the one that key already created',
        'when the body is the same (canonical JSON), then waits for it. 200: the winning completion (`Idempotent-Replayed: true` when the key',
        'already had a job). 409 `attempt_in_doubt` (with `Retry-After`): an attempt is unknown. 502 `job_failed`: every provider failed',
        'definitely. 409 `job_finished`: the job was cancelled. 409 `attempt_in_flight` (with `Retry-After`): still running when the',
        'server-side wait ended; retry with the same key. Job-bound answers carry `Onejob-Job-Id`. With `stream: true`: the same answers while',
        'nothing was sent, then `200 text/event-stream` (`chat.completion.chunk` events, `data: [DONE]`; a break ends with `event: error`).',
        'Every event has an SSE `id:`; a duplicate with `Last-Event-ID` receives only the events after it (CONTRACT §13).',
      ].join(' '),
      security: bearerSecurity,
      headers: streamingJobHeaders,
      body: chatCompletionBody,
      response: {
        200: { description: 'The completion, in OpenAI `chat.completion` shape.', $ref: 'ChatCompletion#' },
        ...errorResponses,
      },
    },
    // The key is checked right after authentication, before the body is read (as for POST /v1/jobs).
    onRequest: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      if (key.idempotencyKey !== undefined) reply.header(IDEMPOTENCY_KEY_HEADER, key.idempotencyKey);
    },
    handler: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      const body = request.body;
      const streaming = body.stream === true;
      if (body.n !== undefined && body.n !== 1) {
        throw bodyRejection('n', 'must be 1 or absent: a job has one result');
      }
      const { model: _model, stream: _stream, ...rest } = body;
      // A streaming job keeps `stream: true` in its input: the executor streams from the provider (CONTRACT §7).
      const input = streaming ? { ...rest, stream: true } : rest;
      // The whole body is fingerprinted: a replay must repeat it exactly (canonically), model and stream included.
      const created = await createChatJob(ctx, request, reply, { endpoint: 'chat.completions', model: body.model, input, body, ...key });
      if (streaming) {
        const route = created.job.route;
        const contract = config.routes[route]?.contract ?? null;
        const outputSchema = contract === null ? undefined : (config.contracts[contract] as { outputSchema?: unknown } | undefined)?.outputSchema;
        const streamOptions = (body as { stream_options?: { include_usage?: unknown } | null }).stream_options;
        const r = await streamJobResponse({
          ctx, request, reply, job: created.job, encoder: 'chat', model: body.model,
          includeUsage: streamOptions?.include_usage === true,
          buffered: outputSchema !== undefined && outputSchema !== null,
          maxWaitMs, keepAliveMs: options.keepAliveMs, hub: options.streamHub ?? defaultStreamHub, start: created.start,
          cursor: created.replayed === 'true' ? lastEventIdCursor(request) : null, follower: created.replayed === 'true',
        });
        if (r.streamed) {
          ctx.metrics.chatRequests.inc({ outcome: 'streamed', replayed: created.replayed });
          return reply;
        }
        const settled = await settleChatJob(ctx, request, reply, { ...created, job: r.job }, { maxWaitMs: 0, retryAfterMs });
        return reply.code(200).send(chatCompletionOf(settled, config));
      }
      const settled = await settleChatJob(ctx, request, reply, created, { maxWaitMs, retryAfterMs });
      return reply.code(200).send(chatCompletionOf(settled, config));
    },
  });
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
