/**
 * Event routes: a job's event log (`GET /v1/jobs/{id}/events`) and the
 * owner's live feed (`GET /v1/events`, server-sent events), which the
 * dashboard uses to update itself.
 *
 * The feed tails the owner's event log by id: each log row is one SSE
 * message with that `id`, so a client that reconnects with `Last-Event-ID`
 * (or `?after=`) misses nothing that was committed. All the feeds of one
 * owner on this process share one source (one read of the log per wake-up,
 * src/http/event-feed-hub.ts), woken at once by the store's job-change
 * notices (changes made by this process) and every `eventFeeds.pollMs`
 * otherwise (changes made by other processes); an owner may hold
 * `eventFeeds.maxPerOwner` feeds open here (429 `too_many_requests` past
 * it). A change notice itself is also sent, without an id, as `event:
 * job_changed` (a new job has no log row yet). Comment lines keep idle
 * proxies from cutting it.
 */
import type { FastifyInstance } from 'fastify';
import type { FromSchema } from 'json-schema-to-ts';
import { OnejobError } from '../../core/errors.ts';
import type { JobEvent } from '../../core/types.ts';
import { bearerSecurity, errorResponses, idParams, type IdParams } from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';
import { EventFeedHub } from '../event-feed-hub.ts';
import { writeSseHead } from '../sse.ts';
import { requestOwner } from '../request-owner.ts';

/** An event as the API shows it. */
export function eventBody(e: JobEvent) {
  return { id: e.id, job_id: e.jobId, attempt_id: e.attemptId, type: e.type, at: e.at.toISOString(), data: e.data };
}

const eventSchema = {
  type: 'object',
  required: ['id', 'job_id', 'attempt_id', 'type', 'at', 'data'],
  properties: {
    id: { type: 'integer' },
    job_id: { type: 'string' },
    attempt_id: { type: ['string', 'null'] },
    type: { type: 'string', examples: ['attempt.started', 'attempt.unknown', 'race.lost', 'job.cancelled'] },
    at: { type: 'string', format: 'date-time' },
    data: { type: 'object', additionalProperties: true, description: 'What the event says (actor, reason, error, …).' },
  },
} as const;

/** Query of `GET /v1/events`. */
export const eventFeedQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { type: 'integer', minimum: 0, description: 'Start after this event id (default: `Last-Event-ID`, else only new events).' },
  },
} as const;
type EventFeedQuery = FromSchema<typeof eventFeedQuery>;

/** Options of {@link registerEventRoutes}. */
export interface EventRoutesOptions {
  /** Re-read interval of the feeds (changes made by other processes). Default `eventFeeds.pollMs` of the config (2000 ms). */
  readonly pollMs?: number;
  /** Keep-alive comment interval. Default 15 000 ms. */
  readonly keepAliveMs?: number;
}

/** Registers the event routes. */
export function registerEventRoutes(app: FastifyInstance, ctx: AppContext, options: EventRoutesOptions = {}): void {
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  // One source per owner for all of this process's feeds (src/http/event-feed-hub.ts).
  const hub = new EventFeedHub({
    store: ctx.store,
    pollMs: options.pollMs ?? ctx.config.eventFeeds.pollMs,
    maxPerOwner: ctx.config.eventFeeds.maxPerOwner,
    onError: (error) => app.log.warn({ err: error }, 'event feed read failed; retrying on the next wake-up'),
  });
  app.addHook('onClose', async () => hub.close());

  app.get<{ Params: IdParams }>('/v1/jobs/:id/events', {
    schema: {
      tags: ['jobs'],
      summary: "A job's event log, oldest first",
      security: bearerSecurity,
      params: idParams,
      response: { 200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: eventSchema } } }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const { id } = request.params;
      const job = await ctx.store.getJob(requestOwner(request), id);
      if (job === null) throw new OnejobError('job_not_found', `no job ${id}`, { details: { job_id: id } });
      bindLog(request, reply, { job_id: job.id });
      return { data: (await ctx.store.listEvents(requestOwner(request), id)).map(eventBody) };
    },
  });

  app.get<{ Querystring: EventFeedQuery }>('/v1/events', {
    schema: {
      tags: ['jobs'],
      summary: "The owner's live feed of job changes (server-sent events)",
      description:
        'text/event-stream. `event: job_event` carries one event-log row (`id:` is its id; reconnect with `Last-Event-ID`); `event: job_changed` `{job_id, state}` a change seen by this process. Send the token in `Authorization` (use fetch streaming, not EventSource).',
      security: bearerSecurity,
      querystring: eventFeedQuery,
      produces: ['text/event-stream'],
      response: { 200: { type: 'string', description: 'An event stream.' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const owner = requestOwner(request);
      const store = ctx.store;
      // The owner's shared source (429 past the cap), joined before anything is read or sent.
      const feed = hub.open(owner);
      const lastHeader = request.headers['last-event-id'];
      const fromHeader = typeof lastHeader === 'string' && /^\d{1,15}$/.test(lastHeader) ? Number(lastHeader) : undefined;
      const explicit = request.query.after ?? fromHeader;
      /** The last event id this feed has written. */
      let sent: number;
      try {
        sent = explicit ?? (await feed.sourceCursor());
      } catch (error) {
        feed.close();
        throw error;
      }

      reply.hijack();
      const res = reply.raw;
      writeSseHead(res, { 'x-request-id': request.id });
      res.write(`retry: 2000\nevent: ready\ndata: ${JSON.stringify({ after: sent })}\n\n`);

      let closed = false;
      const writeEvents = (events: readonly JobEvent[]): void => {
        for (const e of events) {
          if (closed) return;
          if (e.id <= sent) continue;
          sent = e.id;
          res.write(`id: ${e.id}\nevent: job_event\ndata: ${JSON.stringify(eventBody(e))}\n\n`);
        }
      };
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), keepAliveMs);
      const finish = (): void => {
        if (closed) return;
        closed = true;
        clearInterval(keepAlive);
        feed.close();
        ctx.closing.removeEventListener('abort', finish);
        res.end();
      };
      res.on('close', finish);
      ctx.closing.addEventListener('abort', finish);
      if (ctx.closing.aborted) return finish();
      // A feed that resumes behind the source catches up on its own reads, then follows the source
      // (what the source handed it meanwhile was kept; ids already written are skipped).
      if (explicit !== undefined) {
        try {
          let page: readonly JobEvent[];
          do {
            page = await store.insights.eventsSince(owner, sent, 200);
            writeEvents(page);
          } while (page.length === 200 && !closed);
        } catch (error) {
          // Without its backlog the feed would skip events: end it; the client reconnects with Last-Event-ID.
          request.log.warn({ err: error }, 'event feed catch-up failed; ending the feed so that the client resumes');
          return finish();
        }
      }
      feed.start({
        onEvents: writeEvents,
        onChange: (jobId, state) => {
          if (!closed) res.write(`event: job_changed\ndata: ${JSON.stringify({ job_id: jobId, state })}\n\n`);
        },
      });
    },
  });
}
