/**
 * Admission of a job-creating request under an owner's limits (CONTRACT
 * §16): `requestsPerMinute` (jobs created in the last 60 s, sliding) and
 * `concurrency` (the owner's attempts `starting` or `running`), both counted
 * by the database at the moment of the create; and the details of a
 * `budget_exceeded` refusal (which window, until when). A replay or a join is
 * never refused nor counted: the caller looks for the existing job first.
 *
 * Unlike spend, which the database reserves with the attempt, these two are
 * a count read before the insert: concurrent creates of one owner arriving
 * in the same few milliseconds can pass the count together (docs/limits.md,
 * "What is exact and what is not").
 */
import { OnejobError } from '../core/errors.ts';
import { REQUESTS_WINDOW_MS, retryAfterSeconds, windowsAt, type OwnerLimits } from '../core/limits.ts';
import type { OwnerUse } from './driver.ts';

/** What a create may do now: go ahead, or be created queued (its first attempt waits for room). */
export type Admission = 'admit' | 'queue';

/**
 * The admission of a new job: throws `rate_limited` (with the seconds until
 * the window frees a place) or, for a gateway request (`whenBusy: "refuse"`),
 * `concurrency_limited`; a job created by `POST /v1/jobs` (`queue`) waits queued.
 */
export function admitCreate(limits: OwnerLimits, use: OwnerUse, now: Date, whenBusy: 'refuse' | 'queue'): Admission {
  if (limits.requestsPerMinute !== null && use.createdSince >= limits.requestsPerMinute) {
    const freesAt = (use.oldestCreatedAt?.getTime() ?? now.getTime()) + REQUESTS_WINDOW_MS;
    const retryAfter = Math.max(1, Math.ceil((freesAt - now.getTime()) / 1000));
    throw new OnejobError('rate_limited', `the owner created ${use.createdSince} jobs in the last 60 s, its limit is ${limits.requestsPerMinute} per minute: retry after ${retryAfter} s (nothing was created, the Idempotency-Key is still unused)`, {
      details: { limit: limits.requestsPerMinute, used: use.createdSince, retry_after_seconds: retryAfter },
    });
  }
  if (limits.concurrency !== null && use.inFlight >= limits.concurrency) {
    if (whenBusy === 'queue') return 'queue';
    throw new OnejobError('concurrency_limited', `the owner has ${use.inFlight} attempts starting or running, its limit is ${limits.concurrency}: retry in a second (nothing was created, the Idempotency-Key is still unused)`, {
      details: { limit: limits.concurrency, in_use: use.inFlight, retry_after_seconds: 1 },
    });
  }
  return 'admit';
}

/** Whether the owner has a limit that {@link admitCreate} checks. */
export function hasAdmissionLimit(limits: OwnerLimits): boolean {
  return limits.requestsPerMinute !== null || limits.concurrency !== null;
}

/**
 * The `budget_exceeded` refusal of a create, naming the window that cannot
 * hold `worstCaseMicros` now, with `retry_after_seconds` when that window
 * ends within the hour (CONTRACT §16).
 */
export function budgetExceeded(limits: OwnerLimits, use: OwnerUse, now: Date, worstCaseMicros: number): OnejobError {
  const w = windowsAt(now);
  const over = (limit: number | null, u: OwnerUse['day']) => limit !== null && u.spentMicros + u.reservedMicros + worstCaseMicros > limit;
  const window = over(limits.spendDayMicros, use.day) || !over(limits.spendMonthMicros, use.month) ? 'day' : 'month';
  const u = use[window];
  const limit = window === 'day' ? limits.spendDayMicros : limits.spendMonthMicros;
  const resetsAt = w[window].resetsAt;
  const retryAfter = retryAfterSeconds(now, resetsAt);
  return new OnejobError('budget_exceeded', `the owner's ${window} spend limit ($${(limit ?? 0) / 1e6}) cannot hold this request's worst case ($${worstCaseMicros / 1e6}): $${u.spentMicros / 1e6} spent and $${u.reservedMicros / 1e6} reserved; it resets at ${resetsAt.toISOString()}. Nothing was created, and the Idempotency-Key is still unused`, {
    details: {
      window, limit_usd: limit === null ? null : limit / 1e6, spent_usd: u.spentMicros / 1e6, reserved_usd: u.reservedMicros / 1e6,
      worst_case_usd: worstCaseMicros / 1e6, resets_at: resetsAt.toISOString(), ...(retryAfter === null ? {} : { retry_after_seconds: retryAfter }),
    },
  });
}
