/**
 * Job routes: create (idempotent), read (with long-poll), list, cancel.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OnejobError, isOnejobError } from '../../core/errors.ts';
import { isJobTerminal } from '../../core/states.ts';
import type { JobWithAttempts } from '../../core/types.ts';
import type { KeylessConfig } from '../../config/config.ts';
import { tracedCreateJob } from '../../tracing/tracing.ts';
import { jobBody } from '../api-bodies.ts';
import {
  bearerSecurity, cancelJobBody, createJobBody, createJobHeaders, errorResponses, getJobQuery, idParams, listJobsQuery,
  type CancelJobBody, type CreateJobBody, type GetJobQuery, type IdParams, type ListJobsQuery,
} from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';
import { isJobSearch, searchJobsAnswer } from './job-search.ts';
import { requestOwner, requestWriter } from '../request-owner.ts';
import { idempotencyKeyMissing } from '../idempotency-key-missing.ts';

/** The syntax of an Idempotency-Key: 1–255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[!-~]{1,255}$/;

/**
 * The request's Idempotency-Key, checked against CONTRACT §3.
 *
 * @throws OnejobError `idempotency_key_missing` (absent or empty) or `idempotency_key_invalid`.
 */
export function idempotencyKeyOf(request: FastifyRequest): string {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined || raw === '') {
    throw idempotencyKeyMissing();
  }
  const key = Array.isArray(raw) ? raw.join(', ') : raw;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    const why = key.length > 255 ? `it is ${key.length} characters long (at most 255)` : 'it may contain only visible ASCII characters (! to ~), no spaces';
    throw new OnejobError('idempotency_key_invalid', `the Idempotency-Key header is malformed: ${why}`);
  }
  return key;
}

/**
 * How a create names its job (CONTRACT §3, §12): the request's
 * Idempotency-Key, or, when it sent none and keyless `fingerprint` mode is
 * on, `keyless` (its fingerprint stands for the key; the store makes the
 * new job's key).
 */
export type CreationKey =
  | { readonly idempotencyKey: string; readonly keyless?: undefined }
  | { readonly idempotencyKey?: undefined; readonly keyless: { readonly windowMs: number } };

/**
 * The {@link CreationKey} of a create request; checked before the body is
 * read, as {@link idempotencyKeyOf} is.
 *
 * @throws OnejobError `idempotency_key_missing` (in `reject` mode) or `idempotency_key_invalid`.
 * @example const key = creationKeyOf(request, config.keyless); // { idempotencyKey: 'k1' } or { keyless: { windowMs: 600000 } }
 */
export function creationKeyOf(request: FastifyRequest, keyless: KeylessConfig): CreationKey {
  const raw = request.headers['idempotency-key'];
  if ((raw === undefined || raw === '') && keyless.mode === 'fingerprint') return { keyless: { windowMs: keyless.windowMs } };
  return { idempotencyKey: idempotencyKeyOf(request) };
}

/** The header every create answer carries: the key it used (CONTRACT §12), the one sent or the one a keyless create made or joined. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

function jobNotFound(id: string): OnejobError {
  return new OnejobError('job_not_found', `no job ${id}`, { details: { job_id: id } });
}

/** Whether a long-poll on `job` can answer now. */
function settledForWait(job: JobWithAttempts): boolean {
  return isJobTerminal(job.state) || job.state === 'unknown';
}

/**
 * Waits until the owner's job is terminal or unknown, or `waitMs` passes, or
 * the client goes away, through the app's {@link JobWatch} (changes pushed,
 * other processes' read once per job). Shared by the long-poll and the
 * gateway endpoints. `start` (the fast path: the job's first attempt, leased
 * to this process) runs once the wait is subscribed; `ended.readFailed` says
 * the wait ended because the job could not be read. The client going away is
 * seen on the response: a request stream closes as soon as its body has been read.
 */
export async function waitForJob(
  ctx: AppContext, request: FastifyRequest, reply: FastifyReply, first: JobWithAttempts, waitMs: number, start?: () => void,
  ended?: { readFailed: boolean },
): Promise<JobWithAttempts> {
  let latest = first;
  if (waitMs <= 0 || settledForWait(latest) || ctx.closing.aborted) {
    start?.();
    return latest;
  }
  await new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unwatch();
      reply.raw.off('close', finish);
      ctx.closing.removeEventListener('abort', finish);
      resolve();
    };
    // Watching first: a change committed from now on reaches this request (pushed, or read once for all its waiters).
    // A request about to start the job's only attempt itself has nothing to catch up on: no read.
    const unwatch = ctx.jobs.watch(requestOwner(request), first.id, {
      onJob: (job) => {
        if (job === null) return finish();
        latest = job;
        if (settledForWait(job)) finish();
      },
      onError: (error) => {
        request.log.warn({ err: error }, 'long-poll re-read failed; answering with the last state read');
        if (ended) ended.readFailed = true;
        finish();
      },
    }, { readNow: start === undefined, state: first.state });
    reply.raw.on('close', finish);
    ctx.closing.addEventListener('abort', finish);
    const timer = setTimeout(finish, waitMs);
    start?.();
  });
  return latest;
}

/** Registers the job routes. */
export function registerJobRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { store, config, metrics } = ctx;

  app.post<{ Body: CreateJobBody }>('/v1/jobs', {
    schema: {
      tags: ['jobs'],
      summary: 'Create a job (idempotent)',
      description:
        'Creates the job for (owner, Idempotency-Key), or answers with the job that key already created when the body is the same (compared in canonical JSON form).',
      security: bearerSecurity,
      headers: createJobHeaders,
      body: createJobBody,
      response: {
        200: { description: 'A replay: the job this key already created (header `Idempotent-Replayed: true`).', $ref: 'Job#' },
        201: { description: 'Created (header `Location`).', $ref: 'Job#' },
        ...errorResponses,
      },
    },
    // The key is checked right after authentication, before the body is read.
    onRequest: async (request, reply) => {
      const key = creationKeyOf(request, config.keyless);
      if (key.idempotencyKey !== undefined) reply.header(IDEMPOTENCY_KEY_HEADER, key.idempotencyKey);
    },
    handler: async (request, reply) => {
      const key = creationKeyOf(request, config.keyless);
      const idempotencyKey = key.idempotencyKey ?? null;
      const { route, input, metadata } = request.body;
      const routeConfig = Object.hasOwn(config.routes, route) ? config.routes[route] : undefined;
      if (routeConfig === undefined) {
        throw new OnejobError('route_unknown', `no route named ${JSON.stringify(route)} is configured`, { details: { route } });
      }
      let result;
      try {
        result = await tracedCreateJob(store, request.headers, { ownerId: requestWriter(request), ...key, route, input, metadata, providers: routeConfig.providers });
      } catch (error) {
        if (isOnejobError(error, 'idempotency_key_reused')) {
          metrics.conflicts.inc();
          request.log.info({ idempotency_key: idempotencyKey }, 'idempotency key reused with a different body');
        }
        throw error;
      }
      const { job, created } = result;
      bindLog(request, reply, { job_id: job.id });
      reply.header(IDEMPOTENCY_KEY_HEADER, job.idempotencyKey);
      if (created) {
        metrics.jobsCreated.inc({ route });
        request.log.info({ route }, 'job created');
        return reply.code(201).header('location', `/v1/jobs/${job.id}`).send(jobBody(job));
      }
      metrics.replays.inc({ route });
      request.log.info({ route }, 'idempotent replay');
      return reply.code(200).header('idempotent-replayed', 'true').send(jobBody(job));
    },
  });

  app.get<{ Querystring: ListJobsQuery }>('/v1/jobs', {
    schema: {
      tags: ['jobs'],
      summary: "List the owner's jobs, newest first",
      security: bearerSecurity,
      querystring: listJobsQuery,
      response: {
        200: {
          description: 'One page of jobs.',
          type: 'object',
          required: ['data', 'next_cursor'],
          properties: { data: { type: 'array', items: { $ref: 'Job#' } }, next_cursor: { type: ['string', 'null'] } },
        },
        ...errorResponses,
      },
    },
    handler: async (request) => {
      if (isJobSearch(request.query)) return searchJobsAnswer(ctx, request);
      const { state, limit, cursor } = request.query;
      const page = await store.listJobs({ ownerId: requestOwner(request), state, limit, cursor });
      return { data: page.jobs.map(jobBody), next_cursor: page.nextCursor };
    },
  });

  app.get<{ Params: IdParams; Querystring: GetJobQuery }>('/v1/jobs/:id', {
    schema: {
      tags: ['jobs'],
      summary: 'Read a job, optionally waiting for it to settle',
      description: 'With `wait`, the answer comes as soon as the job is terminal or `unknown`, or when the wait ends (then with its current state).',
      security: bearerSecurity,
      params: idParams,
      querystring: getJobQuery,
      response: { 200: { description: 'The job.', $ref: 'Job#' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const { id } = request.params;
      const job = await store.getJob(requestOwner(request), id);
      if (job === null) throw jobNotFound(id);
      bindLog(request, reply, { job_id: job.id });
      const waited = await waitForJob(ctx, request, reply, job, Math.round((request.query.wait ?? 0) * 1000));
      return jobBody(waited);
    },
  });

  app.post<{ Params: IdParams; Body: CancelJobBody | undefined }>('/v1/jobs/:id/cancel', {
    schema: {
      tags: ['jobs'],
      summary: 'Cancel a job',
      description: 'The job becomes terminal `cancelled`; attempts in flight are asked to stop and any later result is `superseded`.',
      security: bearerSecurity,
      params: idParams,
      body: cancelJobBody,
      response: { 200: { description: 'The cancelled job.', $ref: 'Job#' }, ...errorResponses },
    },
    handler: async (request, reply: FastifyReply) => {
      bindLog(request, reply, { job_id: request.params.id });
      const job = await store.cancelJob(requestWriter(request), request.params.id, { actor: 'api', reason: request.body?.reason });
      request.log.info('job cancelled');
      return jobBody(job);
    },
  });
}
