/**
 * The Responses API endpoints (CONTRACT §12): `POST /v1/responses` creates
 * or joins the job of its Idempotency-Key (the same job, rules, wait and
 * error answers as `POST /v1/chat/completions`, `../chat-job.ts`), and
 * answers the Response object; `GET /v1/responses/{id}` (optionally as a
 * live event stream from `starting_after`), `POST …/cancel` and `GET
 * …/input_items` read and cancel it. A Response id is `resp_<job id>`: it
 * names exactly one job, for as long as the job is kept.
 *
 * The request is translated into the internal chat input
 * (`src/protocols/openai-responses.ts`), so any provider type in the chain
 * runs it; what rebuilds the Response (the echoed members, this request's
 * input items) is kept in the job's metadata. `previous_response_id` is
 * resolved here, from the owner's own jobs. Every problem carries the
 * OpenAI-style `error` member (the /v1/ scope adds it). See docs/responses-api.md.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OnejobError, isOnejobError } from '../../core/errors.ts';
import { isJobTerminal } from '../../core/states.ts';
import type { JobWithAttempts } from '../../core/types.ts';
import { defaultStreamHub } from '../../executor/stream-hub.ts';
import {
  RESPONSES_RECORD_KEY,
  conversationOf,
  jobIdOfItem,
  jobIdOfResponse,
  resolveItemReferences,
  responseInputItems,
  responseOf,
  responsesRecordOf,
  responsesRequestToChatInput,
  type OnejobResponse,
  type ResponsesRecord,
} from '../../protocols/openai-responses.ts';
import { ResponsesStreamEncoder, responsesSseEvent, type ResponsesSseEvent } from '../../protocols/openai-responses-stream.ts';
import { bearerSecurity, createJobHeaders, errorResponses } from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';
import { gatewayBodyLimit } from '../body-limits.ts';
import { createChatJob, settleChatJob } from '../chat-job.ts';
import { lastEventIdCursor, NO_ATTEMPT_STREAM, streamEventId, streamJobResponse } from '../job-stream.ts';
import { requestOwner, requestWriter } from '../request-owner.ts';
import { writeSseHead } from '../sse.ts';
import { DEFAULT_CHAT_RETRY_AFTER_MS, type ChatRoutesOptions } from './chat-routes.ts';
import { creationKeyOf, IDEMPOTENCY_KEY_HEADER } from './job-routes.ts';

/** The path of the create endpoint. */
export const RESPONSES_PATH = '/v1/responses';

const responsesBody = {
  type: 'object',
  required: ['model'],
  additionalProperties: true,
  properties: {
    model: { type: 'string', minLength: 1, description: 'A configured route name, or `route:<name>`.' },
    input: { type: ['string', 'array'], description: 'Text, or an array of input items (messages, function_call, function_call_output).' },
    stream: { type: ['boolean', 'null'], description: 'true: the answer is streamed as Responses server-sent events.' },
    background: { type: ['boolean', 'null'], description: 'true: answer at once (status queued or in_progress); the job runs on.' },
    previous_response_id: { type: ['string', 'null'], description: "A Response of the same owner this one continues (any provider served it)." },
  },
} as const;

const responseIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 300 } },
} as const;

const retrieveQuery = {
  type: 'object',
  properties: {
    stream: { type: 'boolean', description: 'true: the events of the Response, live while it runs.' },
    starting_after: { type: 'integer', minimum: -1, description: 'With stream: only events whose sequence_number is greater.' },
    include: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
    include_obfuscation: { type: 'boolean' },
  },
} as const;

const inputItemsQuery = {
  type: 'object',
  properties: {
    after: { type: 'string', description: 'An item id: list the items after it.' },
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
    include: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
  },
} as const;

const responseSchema = { description: 'The Response (`object: "response"`), with `onejob: {job_id, state}`.', type: 'object', additionalProperties: true } as const;

/**
 * A body member this endpoint cannot honour, rejected exactly like a schema
 * violation (422 `invalid_request` with `field`) by the one error handler.
 */
function memberRejection(member: string, reason: string): Error {
  return Object.assign(new Error(`body/${member} ${reason}`), {
    statusCode: 400,
    validationContext: 'body',
    validation: [{ instancePath: `/${member.replace(/[.[\]]+/g, '/').replace(/\/$/, '')}`, keyword: 'const', message: reason, params: {} }],
  });
}

/** `404 job_not_found`; a resume (`?stream=true`) is `404 not_found`, as every resume that names nothing (CONTRACT §15). */
function responseNotFound(id: string, resume = false): OnejobError {
  return resume
    ? new OnejobError('not_found', `no response ${id} of yours to follow: a resume never starts work`, { details: { response_id: id } })
    : new OnejobError('job_not_found', `no response ${id}`, { details: { response_id: id } });
}

/** A Responses job of the owner and its record; `404` for an id that names none (another owner's, unknown, not a Responses job). */
async function loadResponseJob(ctx: AppContext, ownerId: string, id: string, resume = false): Promise<{ job: JobWithAttempts; record: ResponsesRecord }> {
  const jobId = jobIdOfResponse(id);
  const job = jobId === null ? null : await ctx.store.getJob(ownerId, jobId);
  const record = job === null ? null : responsesRecordOf(job.metadata);
  if (job === null || record === null) throw responseNotFound(id, resume);
  return { job, record };
}

/**
 * A continued conversation is bounded (issue 35): `previous_response_id`
 * expanded with this request's input may not exceed `maxConversationBytes`
 * of JSON (default `gatewayBodyLimitBytes`).
 *
 * @throws OnejobError `conversation_too_large` (413), naming both sizes and what to do.
 */
function checkConversationSize(ctx: AppContext, messages: unknown, previousId: string): void {
  const max = ctx.config.maxConversationBytes ?? ctx.config.gatewayBodyLimitBytes;
  const bytes = Buffer.byteLength(JSON.stringify(messages));
  if (bytes <= max) return;
  throw new OnejobError('conversation_too_large', `the conversation continued from ${previousId} with this input is ${bytes} bytes, more than maxConversationBytes (${max}): start a new conversation (no previous_response_id) with a summary of this one, or raise maxConversationBytes`, {
    details: { previous_response_id: previousId, bytes, max_bytes: max },
  });
}

/** When a job's answer was decided (its winner finished, else its terminal write), or null while it is not. */
function completedAtOf(job: JobWithAttempts): Date | null {
  return job.attempts.find((a) => a.id === job.completedBy)?.finishedAt ?? (isJobTerminal(job.state) ? job.updatedAt : null);
}

/** A job as its Response now. */
export function responseOfJob(job: JobWithAttempts, record: ResponsesRecord): OnejobResponse {
  return responseOf({
    jobId: job.id,
    state: job.state,
    createdAt: job.createdAt,
    completedAt: completedAtOf(job),
    result: job.result,
    error: job.error,
    record,
  });
}

/** Whether the route's contract checks the whole output first (the stream is then one burst at the end). */
function bufferedRoute(ctx: AppContext, route: string): boolean {
  const contract = ctx.config.routes[route]?.contract ?? null;
  const schema = contract === null ? undefined : (ctx.config.contracts[contract] as { outputSchema?: unknown } | undefined)?.outputSchema;
  return schema !== undefined && schema !== null;
}

/**
 * Writes `events` as the whole event-stream answer (a Response that can no longer stream live). They belong to no
 * attempt's stream (the job ended, or the wait did, before any was found): each is numbered as the stream of none,
 * `0-<sequence_number + 1>` (CONTRACT §13: every event has an id).
 */
function sendEvents(reply: FastifyReply, events: readonly ResponsesSseEvent[]): FastifyReply {
  reply.hijack();
  const headers: Record<string, string | number | string[]> = {};
  for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
  writeSseHead(reply.raw, headers);
  reply.raw.end(events.map((e) => `id: ${streamEventId(NO_ATTEMPT_STREAM, e.sequence_number + 1)}\n${responsesSseEvent(e)}`).join(''));
  return reply;
}

/** The closing events of a stream whose job did not succeed (or did not finish within the wait). */
function endingEvents(enc: ResponsesStreamEncoder, job: JobWithAttempts, maxWaitMs: number): ResponsesSseEvent[] {
  switch (job.state) {
    case 'succeeded':
      return enc.replay(job.result);
    case 'failed':
      return enc.failed(`job ${job.id} failed: ${job.error?.message ?? 'every provider failed'}`);
    case 'cancelled':
      return enc.error({ code: 'job_finished', message: `job ${job.id} was cancelled` });
    case 'unknown':
      return enc.error({ code: 'attempt_in_doubt', message: `an attempt of job ${job.id} is unknown: the provider may have run it; retry later, or resolve it` });
    default:
      return enc.error({ code: 'attempt_in_flight', message: `job ${job.id} is still ${job.state} (the wait ended after ${maxWaitMs} ms); retrieve it again` });
  }
}

/** Registers `POST /v1/responses`, `GET /v1/responses/{id}`, `POST /v1/responses/{id}/cancel`, `GET /v1/responses/{id}/input_items`. */
export function registerResponsesRoutes(app: FastifyInstance, ctx: AppContext, options: ChatRoutesOptions = {}): void {
  const maxWaitMs = options.maxWaitMs ?? ctx.config.chatMaxWaitMs;
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_CHAT_RETRY_AFTER_MS;
  const hub = options.streamHub ?? defaultStreamHub;

  app.post<{ Body: Record<string, unknown> }>(RESPONSES_PATH, {
    // Images travel inline: the gateway's body limit (32 MiB by default), not the 1 MiB of /v1/jobs.
    ...gatewayBodyLimit(ctx.config, RESPONSES_PATH),
    schema: {
      tags: ['openai'],
      summary: 'Create a response (OpenAI Responses API, idempotent)',
      description: [
        '`model` names a route (or `route:<name>`). The same Idempotency-Key rules, job and error answers as `POST /v1/chat/completions`;',
        '200 is the Response (`object: "response"`, `output` items, `usage`), header `Onejob-Job-Id`. `stream: true`: Responses server-sent',
        'events with `sequence_number`. `background: true`: the Response at once (`queued` / `in_progress`); the job runs on. `stream` and',
        '`background` are delivery, not intent: flipping them with the same key is the same job. `previous_response_id`: a Response of the',
        'same owner this one continues, whatever provider served it (404 when it names none).',
      ].join(' '),
      security: bearerSecurity,
      headers: createJobHeaders,
      body: responsesBody,
      response: { 200: responseSchema, ...errorResponses },
    },
    onRequest: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      if (key.idempotencyKey !== undefined) reply.header(IDEMPOTENCY_KEY_HEADER, key.idempotencyKey);
    },
    handler: async (request, reply) => {
      const key = creationKeyOf(request, ctx.config.keyless);
      const body = request.body;
      const owner = requestWriter(request);
      let previous = null;
      const previousId = body.previous_response_id;
      if (typeof previousId === 'string' && previousId !== '') {
        const p = await loadResponseJob(ctx, owner, previousId);
        if (p.job.state !== 'succeeded') {
          throw memberRejection('previous_response_id', `response ${previousId} is ${responseOfJob(p.job, p.record).status}: only a completed Response can be continued`);
        }
        previous = conversationOf(p.job.input, p.job.result, p.record);
      }
      // An `item_reference` names an item of one of the owner's Responses (its id derives from the job's): the item itself.
      const input = Array.isArray(body.input)
        ? await resolveItemReferences(body.input, async (id) => {
            const jobId = jobIdOfItem(id);
            const found = jobId === null ? null : await ctx.store.getJob(owner, jobId);
            const rec = found === null ? null : responsesRecordOf(found.metadata);
            const item = found === null || rec === null
              ? undefined
              : [...responseOfJob(found, rec).output, ...responseInputItems(found.id, rec)].find((i) => (i as { id?: unknown }).id === id);
            if (item === undefined) throw new OnejobError('not_found', `no item ${id} in your Responses`, { details: { item_id: id } });
            return item;
          })
        : body.input;
      const t = responsesRequestToChatInput(input === body.input ? body : { ...body, input }, previous);
      if (!t.ok) throw memberRejection(t.member, t.message);
      if (previous !== null) checkConversationSize(ctx, t.input.messages, previousId as string);
      // The fingerprint is the body's intent: createChatJob leaves stream, background and stream_options out (CONTRACT §13).
      const created = await createChatJob(ctx, request, reply, {
        endpoint: 'responses', model: t.model, input: t.input, body, ...key, metadata: { [RESPONSES_RECORD_KEY]: t.record },
      });
      // A joined job answers with its own record (the first request's echo).
      const record = responsesRecordOf(created.job.metadata) ?? t.record;
      if (t.stream) {
        const enc = new ResponsesStreamEncoder({ job: { jobId: created.job.id, createdAt: created.job.createdAt, record }, completedAt: completedAtOf(created.job) });
        // A duplicate with Last-Event-ID resumes after that event (CONTRACT §13), as on chat and messages.
        const r = await streamJobResponse({
          ctx, request, reply, job: created.job, encoder: 'responses', responses: enc, model: t.model, cursor: lastEventIdCursor(request), follower: created.replayed === 'true',
          buffered: bufferedRoute(ctx, created.job.route), maxWaitMs, keepAliveMs: options.keepAliveMs, hub, start: created.start,
        });
        if (r.streamed) {
          ctx.metrics.chatRequests.inc({ outcome: 'streamed', replayed: created.replayed });
          return reply;
        }
        const settled = await settleChatJob(ctx, request, reply, { ...created, job: r.job }, { maxWaitMs: 0, retryAfterMs });
        return reply.code(200).send(responseOfJob(settled, record));
      }
      if (t.background) {
        created.start?.();
        return reply.code(200).send(responseOfJob(created.job, record));
      }
      const settled = await settleChatJob(ctx, request, reply, created, { maxWaitMs, retryAfterMs });
      return reply.code(200).send(responseOfJob(settled, record));
    },
  });

  app.get<{ Params: { id: string }; Querystring: { stream?: boolean; starting_after?: number } }>(`${RESPONSES_PATH}/:id`, {
    schema: {
      tags: ['openai'],
      summary: 'Retrieve a response, or follow its events',
      description: [
        'The Response now: `queued`, `in_progress` (a job in doubt is `in_progress` with `onejob.state: "unknown"`), `completed`,',
        '`incomplete`, `failed`, `cancelled`. With `stream=true`: its events after `starting_after`, live while it runs.',
      ].join(' '),
      security: bearerSecurity,
      params: responseIdParams,
      querystring: retrieveQuery,
      response: { 200: responseSchema, ...errorResponses },
    },
    handler: async (request, reply) => {
      const { job, record } = await loadResponseJob(ctx, requestOwner(request), request.params.id, request.query.stream === true);
      bindLog(request, reply, { job_id: job.id });
      if (request.query.stream !== true) return responseOfJob(job, record);
      const view = { job: { jobId: job.id, createdAt: job.createdAt, record }, completedAt: completedAtOf(job) };
      // The relay numbers the SSE events of the job's stream and skips those up to the cursor: event n (1-based) is the one
      // with sequence_number n - 1, so `starting_after=k` resumes after the (k + 1)-th; `Last-Event-ID` works too.
      const after = request.query.starting_after;
      const cursor = after !== undefined ? { attemptNumber: null, ordinal: after + 1 } : lastEventIdCursor(request);
      const r = await streamJobResponse({
        ctx, request, reply, job, encoder: 'responses', responses: new ResponsesStreamEncoder(view), model: record.model, cursor,
        buffered: bufferedRoute(ctx, job.route), maxWaitMs, keepAliveMs: options.keepAliveMs, hub, endInStream: true, follower: true,
      });
      if (r.streamed) return reply;
      return sendEvents(reply, endingEvents(new ResponsesStreamEncoder({ ...view, startingAfter: after }), r.job, maxWaitMs));
    },
  });

  app.post<{ Params: { id: string } }>(`${RESPONSES_PATH}/:id/cancel`, {
    schema: {
      tags: ['openai'],
      summary: 'Cancel a response',
      description: 'Cancels the job (as `POST /v1/jobs/{id}/cancel`) and answers the Response `cancelled`; a finished one answers as it is.',
      security: bearerSecurity,
      params: responseIdParams,
      response: { 200: responseSchema, ...errorResponses },
    },
    handler: async (request: FastifyRequest<{ Params: { id: string } }>, reply) => {
      const owner = requestWriter(request);
      const { job, record } = await loadResponseJob(ctx, owner, request.params.id);
      bindLog(request, reply, { job_id: job.id });
      if (isJobTerminal(job.state)) return responseOfJob(job, record);
      try {
        const cancelled = await ctx.store.cancelJob(owner, job.id, { actor: 'api', reason: 'cancelled through POST /v1/responses/{id}/cancel' });
        request.log.info('response cancelled');
        return responseOfJob(cancelled, record);
      } catch (error) {
        if (!isOnejobError(error, 'job_finished')) throw error;
        const now = await ctx.store.getJob(owner, job.id);
        if (now === null) throw responseNotFound(request.params.id);
        return responseOfJob(now, record);
      }
    },
  });

  app.get<{ Params: { id: string }; Querystring: { after?: string; limit?: number; order?: 'asc' | 'desc' } }>(`${RESPONSES_PATH}/:id/input_items`, {
    schema: {
      tags: ['openai'],
      summary: "A response's input items",
      description: "This Response's own input items (not those of the Responses it continues), in OpenAI's list shape; `order` default `desc`.",
      security: bearerSecurity,
      params: responseIdParams,
      querystring: inputItemsQuery,
      response: {
        200: {
          description: '`{object: "list", data, first_id, last_id, has_more}`.',
          type: 'object',
          additionalProperties: true,
        },
        ...errorResponses,
      },
    },
    handler: async (request, reply) => {
      const { job, record } = await loadResponseJob(ctx, requestOwner(request), request.params.id);
      bindLog(request, reply, { job_id: job.id });
      const { after, limit = 20, order = 'desc' } = request.query;
      const all = responseInputItems(job.id, record);
      if (order === 'desc') all.reverse();
      const from = after === undefined ? 0 : all.findIndex((i) => (i as { id?: string }).id === after) + 1;
      const page = from === 0 && after !== undefined ? [] : all.slice(from, from + limit);
      const id = (i: unknown): string | null => (i as { id?: string } | undefined)?.id ?? null;
      return { object: 'list', data: page, first_id: id(page[0]), last_id: id(page[page.length - 1]), has_more: from + page.length < all.length };
    },
  });
}
