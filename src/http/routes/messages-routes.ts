/**
 * The Anthropic-compatible endpoint (CONTRACT §7): `POST /v1/messages`
 * takes Anthropic's Messages request, creates or joins the job of its
 * Idempotency-Key (the same job, rules and wait as `POST
 * /v1/chat/completions`, `../chat-job.ts`), and answers in the Messages
 * response shape. Any provider type can run the job: the request is
 * translated into the internal chat input (`src/protocols/`) and each
 * adapter speaks its own protocol.
 *
 * Every problem this route answers is rewritten into Anthropic's error body
 * (`application/json`, `{"type":"error","error":{"type","message"},"code"}`,
 * same status and `code` as elsewhere), so `@anthropic-ai/sdk` raises its own
 * `APIError` subclasses with onejob's `code`. See `docs/chat-completions.md`.
 */
import type { FastifyInstance } from 'fastify';
import { chatResultToMessagesResponse, messagesRequestToChatInput } from '../../protocols/anthropic-messages.ts';
import { bearerSecurity, streamingJobHeaders, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { gatewayBodyLimit } from '../body-limits.ts';
import { lastEventIdCursor, streamJobResponse } from '../job-stream.ts';
import { createChatJob, settleChatJob } from '../chat-job.ts';
import { DEFAULT_CHAT_RETRY_AFTER_MS, type ChatRoutesOptions } from './chat-routes.ts';
import { creationKeyOf, IDEMPOTENCY_KEY_HEADER } from './job-routes.ts';

/** The path of the endpoint (`x-api-key` is accepted as the credential here, CONTRACT §3). */
export const MESSAGES_PATH = '/v1/messages';

/**
 * Anthropic's error `type` for an HTTP status (their documented set):
 * 400/409/422 `invalid_request_error`, 401 `authentication_error`, 403
 * `permission_error`, 404 `not_found_error`, 413 `request_too_large`, 429
 * `rate_limit_error`, 503 `overloaded_error`, any other 5xx `api_error`.
 */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** RFC 9457's own members; the rest of a problem (`job_id`, `field`, …) is repeated at the top level. */
const PROBLEM_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'code', 'error']);

/**
 * A problem document as Anthropic's error body, `code` at the top level.
 *
 * @example anthropicErrorOf({ type: 'urn:onejob:error:unauthorized', title, status: 401, detail: 'send …', code: 'unauthorized' })
 * // { type: 'error', error: { type: 'authentication_error', message: 'send …' }, code: 'unauthorized' }
 */
export function anthropicErrorOf(problem: Record<string, unknown>): Record<string, unknown> {
  const status = typeof problem.status === 'number' ? problem.status : 500;
  const code = typeof problem.code === 'string' ? problem.code : 'internal';
  const message = typeof problem.detail === 'string' ? problem.detail : String(problem.title ?? code);
  const extensions = Object.fromEntries(Object.entries(problem).filter(([k]) => !PROBLEM_MEMBERS.has(k)));
  return { ...extensions, type: 'error', error: { type: anthropicErrorType(status), message }, code };
}

/**
 * A body member this endpoint cannot honour, rejected exactly like a schema
 * violation (422 `invalid_request` with `field`) by the one error handler.
 */
function memberRejection(member: string, reason: string): Error {
  return Object.assign(new Error(`body/${member} ${reason}`), {
    statusCode: 400,
    validationContext: 'body',
    validation: [{ instancePath: `/${member.replace(/\./g, '/')}`, keyword: 'const', message: reason, params: {} }],
  });
}

const messagesBody = {
  type: 'object',
  required: ['model', 'messages', 'max_tokens'],
  additionalProperties: true,
  properties: {
    model: { type: 'string', minLength: 1, description: 'A configured route name, or `route:<name>`.' },
    max_tokens: { type: 'integer', minimum: 1 },
    messages: { type: 'array', minItems: 1, items: { type: 'object' } },
    stream: { type: 'boolean' },
  },
} as const;

/** Registers `POST /v1/messages` (options as for the chat completions endpoint). */
export function registerMessagesRoutes(app: FastifyInstance, ctx: AppContext, options: ChatRoutesOptions = {}): void {
  const maxWaitMs = options.maxWaitMs ?? ctx.config.chatMaxWaitMs;
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_CHAT_RETRY_AFTER_MS;

  app.post<{ Body: Record<string, unknown> }>(MESSAGES_PATH, {
    // Images travel inline: the gateway's body limit (32 MiB by default), not the 1 MiB of /v1/jobs.
    ...gatewayBodyLimit(ctx.config, MESSAGES_PATH),
    schema: {
      tags: ['anthropic'],
      summary: 'Create a message (Anthropic-compatible, idempotent)',
      description: [
        "Anthropic's Messages request; `model` names a route (or `route:<name>`). `x-api-key: <token>` is accepted instead of",
        '`Authorization: Bearer`. The same Idempotency-Key rules, job and answers as `POST /v1/chat/completions`; 200 is a Messages',
        "response (`type: \"message\"`, content blocks incl. `tool_use`, `stop_reason`, `usage`). Errors use Anthropic's body",
        '`{"type":"error","error":{"type","message"},"code"}` with the same status and `code`. Streaming is not yet supported here.',
      ].join(' '),
      security: bearerSecurity,
      headers: streamingJobHeaders,
      body: messagesBody,
      response: {
        200: { description: 'The message, in Anthropic `message` shape.', type: 'object', additionalProperties: true },
        ...errorResponses,
      },
    },
    onRequest: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      if (key.idempotencyKey !== undefined) reply.header(IDEMPOTENCY_KEY_HEADER, key.idempotencyKey);
    },
    // Anthropic's SDKs read `{type: "error", error: {type, message}}`: every problem of this route in that shape.
    onSend: async (_request, reply, payload) => {
      const type = reply.getHeader('content-type');
      if (typeof payload !== 'string' || typeof type !== 'string' || !type.startsWith('application/problem+json')) return payload;
      try {
        const body = JSON.stringify(anthropicErrorOf(JSON.parse(payload) as Record<string, unknown>));
        reply.header('content-type', 'application/json; charset=utf-8');
        return body;
      } catch {
        return payload;
      }
    },
    handler: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      const body = request.body;
      const translated = messagesRequestToChatInput(body);
      if (!translated.ok) throw memberRejection(translated.member, translated.message);
      // A streaming job keeps `stream: true` in its input: the executor streams from the provider (CONTRACT §7).
      const input = translated.stream ? { ...(translated.input as Record<string, unknown>), stream: true } : translated.input;
      const job = await createChatJob(ctx, request, reply, { endpoint: 'messages', model: translated.model, input, body, ...key });
      if (translated.stream) {
        const contract = ctx.config.routes[job.job.route]?.contract ?? null;
        const outputSchema = contract === null ? undefined : (ctx.config.contracts[contract] as { outputSchema?: unknown } | undefined)?.outputSchema;
        const r = await streamJobResponse({
          ctx, request, reply, job: job.job, encoder: 'messages', model: translated.model, id: messageId(job.job.id),
          buffered: outputSchema !== undefined && outputSchema !== null, maxWaitMs, start: job.start,
          keepAliveMs: options.keepAliveMs, hub: options.streamHub,
          cursor: job.replayed === 'true' ? lastEventIdCursor(request) : null, follower: job.replayed === 'true',
        });
        if (r.streamed) {
          ctx.metrics.chatRequests.inc({ outcome: 'streamed', replayed: job.replayed });
          return reply;
        }
        const settled = await settleChatJob(ctx, request, reply, { ...job, job: r.job }, { maxWaitMs: 0, retryAfterMs });
        return reply.code(200).send(chatResultToMessagesResponse(settled.result, { id: messageId(settled.id), model: settled.route }));
      }
      const settled = await settleChatJob(ctx, request, reply, job, { maxWaitMs, retryAfterMs });
      return reply.code(200).send(chatResultToMessagesResponse(settled.result, { id: messageId(settled.id), model: settled.route }));
    },
  });
}

/** The message id of a job: the same for every answer of that job. */
export function messageId(jobId: string): string {
  return `msg_${jobId}`;
}
