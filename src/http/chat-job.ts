/**
 * The job underneath the gateway endpoints (CONTRACT §3 and §7):
 * `POST /v1/chat/completions` and `POST /v1/messages` both create or join the
 * job of their Idempotency-Key ({@link createChatJob}), wait for it, and turn
 * its state into an answer or a problem ({@link settleChatJob}). Only the
 * shape of the success differs, so the endpoints share this and nothing else.
 */
import { tracedCreateJob } from '../tracing/tracing.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { fingerprint } from '../core/fingerprint.ts';
import { OnejobError, isOnejobError } from '../core/errors.ts';
import { passedThroughError } from '../core/pass-through.ts';
import type { JobWithAttempts } from '../core/types.ts';
import type { ClaimedAttempt } from '../store/store.ts';
import { bindLog, type AppContext } from './app-context.ts';
import { chatRouteOf } from './chat-completion.ts';
import { IDEMPOTENCY_KEY_HEADER, waitForJob, type CreationKey, creationKeyOf } from './routes/job-routes.ts';
import { requestWriter } from './request-owner.ts';
import { idempotencyKeyMissing } from './idempotency-key-missing.ts';

/** Header naming the job a gateway answer belongs to. */
export const JOB_ID_HEADER = 'onejob-job-id';

/**
 * Members of a gateway request body that say how the answer is delivered,
 * not what is asked (CONTRACT §13): the same key and body with `stream`
 * flipped (or, on `/v1/responses`, `background`) is the same job, a replay,
 * never `409 idempotency_key_reused`.
 */
export const DELIVERY_MEMBERS: readonly string[] = ['stream', 'stream_options', 'background'];

/**
 * The part of a gateway request body that is the intent: the body without
 * its {@link DELIVERY_MEMBERS}. Replays and reused keys are told apart by it.
 *
 * @example intentOf({ model: 'm', stream: true, messages }) // { model: 'm', messages }
 */
export function intentOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  if (!DELIVERY_MEMBERS.some((m) => Object.hasOwn(body, m))) return body;
  return Object.fromEntries(Object.entries(body).filter(([k]) => !DELIVERY_MEMBERS.includes(k)));
}

/** What {@link createChatJob} is given. */
export interface ChatJobRequest {
  /** The endpoint, part of the fingerprint: one key cannot be replayed across endpoints. */
  readonly endpoint: 'chat.completions' | 'messages' | 'responses';
  /** The request's `model`: a route name or `route:<name>`. */
  readonly model: string;
  /** The job's input (the chat input, OpenAI shape). */
  readonly input: unknown;
  /** The whole request body: a replay must repeat it exactly (canonically). */
  readonly body: unknown;
  /** The request's Idempotency-Key, or none and `keyless` (CONTRACT §12: see {@link creationKeyOf}). */
  readonly idempotencyKey?: string | undefined;
  readonly keyless?: { readonly windowMs: number } | undefined;
  /** The job's metadata (the Responses endpoint keeps what rebuilds a Response there). Default none. */
  readonly metadata?: Record<string, unknown> | undefined;
}

/** A created or joined job. */
export interface ChatJob {
  readonly job: JobWithAttempts;
  readonly created: boolean;
  /** `'true'` when the key already had a job (the metrics' label). */
  readonly replayed: 'true' | 'false';
  /**
   * The fast path: the job's first attempt was leased to this process's
   * executor with the job; this runs it. Call it once the answer waits
   * (subscribed to the job or its stream); later calls do nothing. It runs
   * on the next turn of the event loop in any case.
   */
  readonly start?: (() => void) | undefined;
}

/**
 * Creates the job of (owner, Idempotency-Key), or joins the one that key
 * already created for the same body: names the route (`422 route_unknown`),
 * sets `Onejob-Job-Id` and `Idempotent-Replayed`, counts and logs.
 *
 * @throws OnejobError `route_unknown`, `idempotency_key_reused`, or the store's.
 */
export async function createChatJob(ctx: AppContext, request: FastifyRequest, reply: FastifyReply, p: ChatJobRequest): Promise<ChatJob> {
  const { store, config, metrics } = ctx;
  const route = chatRouteOf(p.model, config.routes);
  if (route === null) {
    throw new OnejobError('route_unknown', `no route named ${JSON.stringify(p.model)} is configured (model names a route, or route:<name>)`, {
      details: { route: p.model },
    });
  }
  let created: boolean;
  let job: JobWithAttempts;
  let claimed: ClaimedAttempt | undefined;
  const key: CreationKey = p.idempotencyKey !== undefined
    ? { idempotencyKey: p.idempotencyKey }
    : p.keyless !== undefined ? { keyless: p.keyless } : keyMissing();
  const fp = fingerprint({ endpoint: p.endpoint, body: intentOf(p.body) });
  if (isResume(request)) return joinResumedJob(ctx, request, reply, p, key, fp);
  // A keyless create takes the general path (the store queues it): no lease to take.
  const firstAttempt = key.keyless ? undefined : ctx.inline?.leaseForNewWork(route) ?? undefined;
  const leasedAt = performance.now();
  try {
    ({ job, created, claimed } = await tracedCreateJob(store, request.headers, {
      ownerId: requestWriter(request),
      ...key,
      route,
      input: p.input,
      ...(p.metadata === undefined ? {} : { metadata: p.metadata }),
      providers: config.routes[route]!.providers,
      fingerprint: fp,
      firstAttempt,
      // A gateway request over the owner's concurrency is refused (CONTRACT §16), never queued behind a waiting caller.
      whenBusy: 'refuse',
    }));
  } catch (error) {
    // A definite refusal wrote nothing; any other failure may have committed the leased attempt: it is released, never left to doubt.
    firstAttempt?.afterCreate({ error }, requestWriter(request));
    if (isOnejobError(error, 'idempotency_key_reused')) {
      metrics.conflicts.inc();
      request.log.info({ idempotency_key: p.idempotencyKey }, 'idempotency key reused with a different body');
    }
    throw error;
  }
  bindLog(request, reply, { job_id: job.id });
  reply.header(JOB_ID_HEADER, job.id);
  reply.header(IDEMPOTENCY_KEY_HEADER, job.idempotencyKey);
  if (created) {
    metrics.jobsCreated.inc({ route });
    request.log.info({ route, endpoint: p.endpoint }, 'chat job created');
  } else {
    metrics.replays.inc({ route });
    reply.header('idempotent-replayed', 'true');
    request.log.info({ route, endpoint: p.endpoint, state: job.state }, 'chat request joined its job');
  }
  const inline = ctx.inline;
  firstAttempt?.afterCreate({ claimed: Boolean(claimed && inline) }, requestWriter(request));
  let started = false;
  const start = claimed && inline
    ? () => {
        if (started) return;
        started = true;
        inline.adopt(claimed, leasedAt);
      }
    : undefined;
  // At the latest on the next turn of the event loop, whatever the route does: a leased attempt nobody runs
  // would sit until its lease expires and end unknown. (The route subscribes within this turn, before any I/O.)
  if (start) setImmediate(start);
  return { job, created, replayed: created ? 'false' : 'true', start };
}

/**
 * Whether the request resumes a stream (CONTRACT §13): it carries
 * `Last-Event-ID`. A resume never starts work (§15): it follows the job its
 * key (or, keyless, its fingerprint) names, or is `404 not_found`.
 */
export function isResume(request: FastifyRequest): boolean {
  const id = request.headers['last-event-id'];
  return typeof id === 'string' && id.trim() !== '';
}

/**
 * A resume's job (CONTRACT §15): the owner's job of the key, or of the
 * fingerprint for a keyless request (whenever it finished), answered as a
 * join. Nothing is created, leased or started.
 *
 * @throws OnejobError `not_found` when the owner has no such job; `idempotency_key_reused` for the key's job of another body.
 */
async function joinResumedJob(
  ctx: AppContext, request: FastifyRequest, reply: FastifyReply, p: ChatJobRequest, key: CreationKey, fp: string,
): Promise<ChatJob> {
  const ownerId = requestWriter(request);
  const job = key.idempotencyKey !== undefined
    ? await ctx.store.insights.jobToResume({ ownerId, idempotencyKey: key.idempotencyKey })
    : await ctx.store.insights.jobToResume({ ownerId, keylessFingerprint: fp });
  if (job === null) {
    const what = key.idempotencyKey !== undefined ? `Idempotency-Key "${key.idempotencyKey}"` : 'this body (no Idempotency-Key)';
    throw new OnejobError('not_found', `Last-Event-ID resumes a stream, but you have no job for ${what}: a resume never starts work; send the request without Last-Event-ID to create it`, {
      details: key.idempotencyKey !== undefined ? { idempotency_key: key.idempotencyKey } : {},
    });
  }
  if (job.fingerprint !== fp) {
    ctx.metrics.conflicts.inc();
    throw new OnejobError('idempotency_key_reused', `Idempotency-Key "${job.idempotencyKey}" was already used with a different request (job ${job.id})`, {
      details: { job_id: job.id },
    });
  }
  bindLog(request, reply, { job_id: job.id });
  reply.header(JOB_ID_HEADER, job.id);
  reply.header(IDEMPOTENCY_KEY_HEADER, job.idempotencyKey);
  reply.header('idempotent-replayed', 'true');
  ctx.metrics.replays.inc({ route: job.route });
  request.log.info({ route: job.route, endpoint: p.endpoint, state: job.state }, 'stream resume joined its job');
  return { job, created: false, replayed: 'true' };
}

function keyMissing(): never {
  throw idempotencyKeyMissing();
}

/** What a gateway endpoint answers for a failed job: `502 job_failed` with the job's error (also a batch line's, CONTRACT §17). */
export function jobFailedError(job: Pick<JobWithAttempts, 'id' | 'error'>): OnejobError {
  return new OnejobError('job_failed', `job ${job.id} failed: ${job.error?.message ?? 'every provider failed'}`, {
    details: { job_id: job.id, job_error: job.error },
  });
}

/** Options of {@link settleChatJob}. */
export interface SettleChatJobOptions {
  /** The longest the request waits for its job. */
  readonly maxWaitMs: number;
  /** The delay `Retry-After` / `retry-after-ms` suggest on retryable answers. */
  readonly retryAfterMs: number;
}

/**
 * Waits for the job (the long-poll's wait) and returns it once it
 * succeeded; any other end is thrown as the contract's problem, with the
 * headers the official SDKs act on:
 * - `unknown` → `409 attempt_in_doubt` with `Retry-After`;
 * - `failed` → `502 job_failed` with `x-should-retry: false`;
 * - `cancelled` → `409 job_finished` with `x-should-retry: false`;
 * - still running when the wait ends → `409 attempt_in_flight` with `Retry-After`.
 */
export async function settleChatJob(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
  created: ChatJob,
  options: SettleChatJobOptions,
): Promise<JobWithAttempts> {
  const { metrics } = ctx;
  const { replayed } = created;
  const ended = { readFailed: false };
  const job = await waitForJob(ctx, request, reply, created.job, options.maxWaitMs, created.start, ended);
  const retryLater = (): void => {
    reply.header('retry-after', String(Math.max(1, Math.ceil(options.retryAfterMs / 1000)))).header('retry-after-ms', String(options.retryAfterMs));
  };
  const details = { job_id: job.id };
  switch (job.state) {
    case 'succeeded':
      metrics.chatRequests.inc({ outcome: 'succeeded', replayed });
      return job;
    case 'unknown': {
      metrics.chatRequests.inc({ outcome: 'in_doubt', replayed });
      retryLater();
      const doubt = job.attempts.find((a) => a.state === 'unknown' || a.state === 'starting');
      const which = doubt === undefined ? 'an attempt' : `attempt ${doubt.number} (${doubt.provider})`;
      throw new OnejobError('attempt_in_doubt', `${which} of job ${job.id} is unknown: the provider may have run it; retry with the same key later, or resolve it`, {
        details: doubt === undefined ? details : { ...details, attempt_id: doubt.id },
      });
    }
    case 'failed': {
      metrics.chatRequests.inc({ outcome: 'failed', replayed });
      reply.header('x-should-retry', 'false');
      // A refusal the route passes through is the provider's answer, given as its error (a 400), not a failure of onejob's.
      const refused = passedThroughError(job.error);
      if (refused !== null) throw new OnejobError(refused.code, refused.message, { details: { ...details, ...refused.details } });
      throw jobFailedError(job);
    }
    case 'cancelled':
      metrics.chatRequests.inc({ outcome: 'cancelled', replayed });
      reply.header('x-should-retry', 'false');
      throw new OnejobError('job_finished', `job ${job.id} was cancelled`, { details: { ...details, state: job.state } });
    default: {
      const gone = request.raw.socket?.destroyed === true;
      metrics.chatRequests.inc({ outcome: gone ? 'client_closed' : 'pending', replayed });
      if (!gone) request.log.info({ state: job.state, shutting_down: ctx.closing.aborted }, 'chat wait ended with the job still running');
      retryLater();
      const why = ctx.closing.aborted
        ? 'the server is shutting down'
        : ended.readFailed ? 'the job could not be read from the database' : `the wait ended after ${options.maxWaitMs} ms`;
      throw new OnejobError('attempt_in_flight', `job ${job.id} is still ${job.state} (${why}); retry with the same Idempotency-Key to keep waiting`, {
        details: { ...details, state: job.state },
      });
    }
  }
}
