/**
 * What every route group of the HTTP app is given, and the per-request
 * helpers they share (log binding; the owner is read through src/http/request-owner.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../core/clock.ts';
import type { EligibilityCheck } from '../core/job-rules.ts';
import type { OnejobConfig } from '../config/config.ts';
import type { ClaimedAttempt, Store } from '../store/store.ts';
import type { NewWorkLease } from '../executor/executor.ts';
import type { JobWatch } from './job-watch.ts';
import type { Metrics } from './metrics.ts';
import type { Reconciler } from '../executor/reconciler.ts';

/**
 * The executor of this process, as the gateway's fast path sees it: a lease
 * for a new job's first attempt, and the attempt run at once (`Executor`).
 */
export interface InlineRunner {
  leaseForNewWork(route: string): NewWorkLease | null;
  adopt(claimed: ClaimedAttempt, leasedAt: number): void;
}


/** Dependencies of the route groups. */
export interface AppContext {
  readonly store: Store;
  readonly config: OnejobConfig;
  readonly metrics: Metrics;
  readonly clock: Clock;
  /** Re-read interval of a long-poll, the fallback for changes made by other processes. Default 1000 ms. */
  readonly waitRecheckMs: number;
  /** Aborted when the app starts closing: long-polls answer at once with what they have. */
  readonly closing: AbortSignal;
  /** The certification gate of a route (manual attempts naming an uncertified provider are refused). */
  readonly eligible: (route: string) => EligibilityCheck;
  /** Every waiting request's view of its job (one entry per job). */
  readonly jobs: JobWatch;
  /** The executor of this process, when it runs one: gateway jobs run their first attempt here at once. */
  readonly inline: InlineRunner | null;
  /**
   * Asks providers about attempts in doubt on request (`POST
   * /v1/attempts/{id}/check`) and applies signed callbacks (CONTRACT §11);
   * null when this app was given no providers.
   */
  readonly reconciler: Reconciler | null;
}

/**
 * Adds `fields` to every later log line of this request. The request's
 * logger is its own (Fastify makes a child per request), so a pino logger
 * takes them in place (`setBindings`) instead of a new child per call; a
 * silent logger takes nothing (a child per request was ≈2–3 % of the CPU of
 * a chat request, docs/performance.md §12). Other loggers get a child.
 */
export function addLogFields(request: FastifyRequest, fields: Record<string, string>): void {
  const log = request.log as FastifyRequest['log'] & { setBindings?: (b: Record<string, string>) => void };
  if (log.level === 'silent') return;
  if (typeof log.setBindings === 'function') log.setBindings(fields);
  else request.log = log.child(fields);
}

/**
 * Adds fields (`job_id`, `attempt_id`) to every later log line of this
 * request, including Fastify's own "request completed" line, and answers the
 * job id in the `Onejob-Job-Id` header.
 */
export function bindLog(request: FastifyRequest, reply: FastifyReply, fields: Record<string, string>): void {
  addLogFields(request, fields);
  reply.log = request.log;
  // One identity through every layer: the load balancer can log the job a request was about.
  // Only an id a header can carry: a path parameter no job could have (a NUL byte, non-ASCII) is answered 404, not echoed.
  if (fields.job_id !== undefined && /^[\x21-\x7e]{1,255}$/.test(fields.job_id)) reply.header('onejob-job-id', fields.job_id);
}
