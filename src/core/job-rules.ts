/**
 * The rules of CONTRACT §2, decided as plain functions over plain data.
 *
 * The store loads a job and its attempts under the job's lock, asks these
 * functions what may happen, and writes the answer. Nothing here does I/O.
 */
import { passedThroughJobError, passThroughKindOf } from './pass-through.ts';
import { OnejobError } from './errors.ts';
import { IN_DOUBT_ATTEMPT_STATES, isJobTerminal, type JobState } from './states.ts';
import type { Attempt, AttemptKind, RecordedError, SkippedProvider } from './types.ts';

/** The parts of an attempt the rules look at. */
export type AttemptView = Pick<Attempt, 'id' | 'provider' | 'state' | 'startedAt' | 'number'>;

/**
 * Whether a provider may receive traffic for a job.
 * Returns null when it may, or the reason it may not (e.g. `not_certified`,
 * or `unsupported:<member>` when the provider's protocol cannot express a
 * member of the job's `input`, CONTRACT §7). The store passes the job's
 * `input` at each routing decision.
 */
export type EligibilityCheck = (provider: string, kind: AttemptKind, input?: unknown) => string | null;

/** Every provider is eligible: the gate before any certification exists. */
export const everyProviderEligible: EligibilityCheck = () => null;

/**
 * The state a non-terminal job is in, derived from its attempts; `null` when
 * every attempt is settled (failed, cancelled, superseded) and the caller must
 * fail over or fail the job.
 *
 * - any attempt `starting` or `running` → `running`
 * - else any attempt `unknown` → `unknown` (blocked)
 * - no attempts → `queued`
 */
export function deriveActiveJobState(attempts: readonly Pick<Attempt, 'state'>[]): 'queued' | 'running' | 'unknown' | null {
  if (attempts.length === 0) return 'queued';
  if (attempts.some((a) => a.state === 'starting' || a.state === 'running')) return 'running';
  if (attempts.some((a) => a.state === 'unknown')) return 'unknown';
  return null;
}

/** The next provider of the chain for an automatic or default attempt. */
export interface ProviderPlan {
  /** The provider to start, or null when the chain is exhausted. */
  readonly provider: string | null;
  /** Providers passed over on the way, with the reason. */
  readonly skipped: readonly SkippedProvider[];
}

/**
 * Walks the chain in order, skipping providers already tried and providers
 * the eligibility check refuses, and returns the first one left.
 *
 * @example planNextProvider(['a', 'b'], [{ provider: 'a', … }], everyProviderEligible, 'failover') // { provider: 'b', skipped: [] }
 */
export function planNextProvider(
  chain: readonly string[],
  attempts: readonly Pick<Attempt, 'provider'>[],
  eligible: EligibilityCheck,
  kind: AttemptKind,
): ProviderPlan {
  const tried = new Set(attempts.map((a) => a.provider));
  const skipped: SkippedProvider[] = [];
  for (const provider of chain) {
    if (tried.has(provider)) continue;
    const reason = eligible(provider, kind);
    if (reason === null) return { provider, skipped };
    skipped.push({ provider, reason });
  }
  return { provider: null, skipped };
}

/** What {@link decideStartAttempt} is asked. */
export interface StartAttemptQuestion {
  readonly jobState: JobState;
  readonly chain: readonly string[];
  readonly attempts: readonly AttemptView[];
  readonly kind: AttemptKind;
  /** An explicit provider (manual attempts); when absent, the next of the chain. */
  readonly provider?: string | undefined;
  /** The route's hedge delay; null means no hedging. */
  readonly hedgeAfterMs: number | null;
  readonly now: Date;
  readonly eligible: EligibilityCheck;
}

/** A permitted start: which provider, and what was skipped to get there. */
export interface StartAttemptDecision {
  readonly provider: string;
  readonly skipped: readonly SkippedProvider[];
}

/**
 * Decides whether a new attempt may start, in the contract's order:
 * `attempt_in_doubt` (one is starting or unknown), `attempt_in_flight` (one is
 * running and no hedge is allowed yet), `job_finished`, then
 * `provider_not_certified` / `chain_exhausted`.
 *
 * A hedge is allowed only when every active attempt is running, the route sets
 * `hedgeAfterMs`, and the newest running attempt has been silent that long.
 *
 * @throws OnejobError with one of the codes above.
 */
export function decideStartAttempt(q: StartAttemptQuestion): StartAttemptDecision {
  const inDoubt = q.attempts.find((a) => IN_DOUBT_ATTEMPT_STATES.has(a.state));
  if (inDoubt) {
    throw new OnejobError('attempt_in_doubt', `attempt ${inDoubt.number} (${inDoubt.provider}) is ${inDoubt.state}; resolve or cancel it first`, {
      details: { attempt_id: inDoubt.id },
    });
  }
  const running = q.attempts.filter((a) => a.state === 'running');
  if (running.length > 0) {
    const newest = running.reduce((x, y) => (y.startedAt > x.startedAt ? y : x));
    const silentMs = q.now.getTime() - newest.startedAt.getTime();
    const hedgeOk = q.hedgeAfterMs !== null && silentMs >= q.hedgeAfterMs && (q.kind === 'hedge' || q.kind === 'manual');
    if (!hedgeOk) {
      const why = q.hedgeAfterMs === null ? 'the route allows no hedge' : `a hedge is allowed after ${q.hedgeAfterMs} ms of silence (${silentMs} ms so far)`;
      throw new OnejobError('attempt_in_flight', `attempt ${newest.number} (${newest.provider}) is running and ${why}`, {
        details: { attempt_id: newest.id },
      });
    }
  }
  if (isJobTerminal(q.jobState)) throw new OnejobError('job_finished', `the job is already ${q.jobState}`);

  if (q.provider !== undefined) {
    const reason = q.eligible(q.provider, q.kind);
    if (reason !== null) {
      throw new OnejobError('provider_not_certified', `provider ${q.provider} may not receive this job: ${reason}`, {
        details: { provider: q.provider, reason },
      });
    }
    return { provider: q.provider, skipped: [] };
  }
  const plan = planNextProvider(q.chain, q.attempts, q.eligible, q.kind);
  if (plan.provider === null) {
    throw new OnejobError('chain_exhausted', 'every provider of the chain has been tried or is not eligible', {
      details: { skipped: plan.skipped },
    });
  }
  return { provider: plan.provider, skipped: plan.skipped };
}

/**
 * A provider's `retry` setting: how a definite failure that certainly did not
 * execute (see {@link RetryRequest}) is tried again on the same provider
 * before the job fails over. Absent (the default): fail over at once.
 *
 * @example { attempts: 2, maxWaitMs: 10_000 } // one retry, after at most 10 s
 */
export interface RetryPolicy {
  /** The most attempts one job makes on this provider, the first included (2: one retry). At least 1. */
  readonly attempts: number;
  /** The longest wait before a retry; a provider that asks for longer is failed over at once. */
  readonly maxWaitMs: number;
}

/**
 * An attempt's definite failure that may be retried where it happened: the
 * provider certainly did not execute it and said (or showed) that trying
 * again later may work (a 429 or 503 with `Retry-After`, a refused
 * connection). Built by the executor from the provider's outcome.
 */
export interface RetryRequest {
  /** The provider the failure happened on. */
  readonly provider: string;
  /** The wait the provider asked for (`Retry-After`), or null when it could not say (the connection was refused). */
  readonly retryAfterMs: number | null;
  /** That provider's policy. */
  readonly policy: RetryPolicy;
}

/** The first wait before retrying a refused connection (doubling with each retry, at most `maxWaitMs`). */
export const REFUSED_RETRY_BASE_MS = 500;

/**
 * How long to wait before the job's next attempt on `retry.provider`, or
 * null when the failure may not be retried there: the policy's attempts are
 * used up (every attempt of the job on that provider counts, the failed one
 * included), or the provider asked for a longer wait than `maxWaitMs`. A
 * refused connection waits {@link REFUSED_RETRY_BASE_MS}, doubling with each
 * retry, capped at `maxWaitMs`.
 *
 * @example retryDelayMs({ provider: 'a', retryAfterMs: 1000, policy: { attempts: 2, maxWaitMs: 5000 } }, [{ provider: 'a' }]) // 1000
 */
export function retryDelayMs(retry: RetryRequest, attempts: readonly Pick<Attempt, 'provider'>[]): number | null {
  const onProvider = attempts.filter((a) => a.provider === retry.provider).length;
  if (onProvider >= retry.policy.attempts) return null;
  if (retry.retryAfterMs !== null) return retry.retryAfterMs <= retry.policy.maxWaitMs ? Math.max(0, retry.retryAfterMs) : null;
  return Math.min(retry.policy.maxWaitMs, REFUSED_RETRY_BASE_MS * 2 ** Math.max(0, onProvider - 1));
}

/** What happens to a job after one of its attempts settled without winning. */
export type AfterSettle =
  /** Other attempts are still active: the job stays (or becomes) `running` or `unknown`. */
  | { readonly action: 'stay'; readonly state: 'running' | 'unknown' }
  /** Nothing is active and the failure may be retried where it happened: a new attempt on the same provider, due in `delayMs`. */
  | { readonly action: 'retry'; readonly provider: string; readonly delayMs: number }
  /** Nothing is active: start the next eligible provider. */
  | { readonly action: 'failover'; readonly provider: string; readonly skipped: readonly SkippedProvider[] }
  /** Nothing is active and no eligible provider is left: the job fails with `error`. */
  | { readonly action: 'fail'; readonly error: RecordedError; readonly skipped: readonly SkippedProvider[] };

/**
 * Decides the job's next step after an attempt failed, was cancelled or was
 * superseded (CONTRACT §3, resolve: "the job continues down its chain as it
 * would after any definite failure"). The next attempt is, in this order:
 * none while another attempt is active; the same provider again when the
 * failure may be retried where it happened (`retry`, see
 * {@link retryDelayMs}) and that provider is still eligible; else the first
 * provider of the chain that has no attempt yet.
 *
 * @param lastError the error of the attempt that just settled, carried onto the job if it fails.
 * @param retry the settled attempt's failure as a retry request, when it is one (only definite failures are).
 */
export function decideAfterSettle(
  chain: readonly string[],
  attempts: readonly AttemptView[],
  eligible: EligibilityCheck,
  lastError: RecordedError | null,
  retry?: RetryRequest,
): AfterSettle {
  const state = deriveActiveJobState(attempts);
  if (state === 'running' || state === 'unknown') return { action: 'stay', state };
  // A refusal the route passes through (a content policy's) is the job's answer: no retry, no failover.
  if (passThroughKindOf(lastError) !== null) return { action: 'fail', error: passedThroughJobError(lastError!), skipped: [] };
  if (retry !== undefined) {
    const delayMs = retryDelayMs(retry, attempts);
    if (delayMs !== null && eligible(retry.provider, 'failover') === null) return { action: 'retry', provider: retry.provider, delayMs };
  }
  const plan = planNextProvider(chain, attempts, eligible, 'failover');
  if (plan.provider !== null) return { action: 'failover', provider: plan.provider, skipped: plan.skipped };
  const error: RecordedError = {
    code: 'providers_exhausted',
    message: lastError ? `every provider failed; last: ${lastError.message}` : 'every provider failed',
    details: { last_error: lastError, skipped: plan.skipped },
  };
  return { action: 'fail', error, skipped: plan.skipped };
}

/** The parts of a job the completion compare-and-swap reads and writes. */
export interface CompletionSnapshot {
  readonly state: JobState;
  readonly version: number;
  readonly completedBy: string | null;
  readonly result: unknown;
}

/**
 * The compare-and-swap of CONTRACT §2, invariant 2, as a pure function: the
 * reference model the SQL statement
 * `UPDATE jobs SET … version = version + 1 WHERE id = $1 AND version = $2 AND completed_by IS NULL`
 * implements. Returns the new snapshot, or null when the attempt lost.
 */
export function casComplete(job: CompletionSnapshot, attemptId: string, expectedVersion: number, result: unknown): CompletionSnapshot | null {
  if (job.version !== expectedVersion || job.completedBy !== null) return null;
  return { state: 'succeeded', version: job.version + 1, completedBy: attemptId, result };
}
