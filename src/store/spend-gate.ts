/**
 * The routing gates of spend limits (CONTRACT §16), around a route's
 * eligibility check: under a spend limit a provider without `pricing` is
 * skipped `unsupported:pricing`; a provider whose attempt the database
 * refused to reserve in this decision is skipped `budget_exceeded`.
 */
import { hasSpendLimit, UNPRICED_SKIP, type SpendPolicy } from '../core/limits.ts';
import type { EligibilityCheck } from '../core/job-rules.ts';
import type { RecordedError, SkippedProvider } from '../core/types.ts';

/** The skip reason, and the job's error code when nothing else is left, of a start the spend limit refused. */
export const BUDGET_EXCEEDED = 'budget_exceeded';

/** `gate` for `owner`, skipping unpriced providers while the owner has a spend limit. */
export function spendGate(policy: SpendPolicy | undefined, owner: string, gate: EligibilityCheck): EligibilityCheck {
  if (!policy || !hasSpendLimit(policy.limitsOf(owner))) return gate;
  return (provider, kind, input) => gate(provider, kind, input) ?? (policy.worstCase(provider, input) === 'unpriced' ? UNPRICED_SKIP : null);
}

/** `gate` with the providers refused in this decision skipped as `budget_exceeded`. */
export function refusedGate(gate: EligibilityCheck, refused: ReadonlySet<string>): EligibilityCheck {
  if (refused.size === 0) return gate;
  return (provider, kind, input) => (refused.has(provider) ? BUDGET_EXCEEDED : gate(provider, kind, input));
}

/** A job's error when its chain ran out and a start was refused by the budget: `budget_exceeded` (CONTRACT §16), else as given. */
export function exhaustedError(error: RecordedError, refused: ReadonlySet<string>, skipped: readonly SkippedProvider[]): RecordedError {
  if (refused.size === 0) return error;
  return {
    code: BUDGET_EXCEEDED,
    message: `no provider left that the owner's spend limit can hold (refused: ${[...refused].join(', ')})`,
    details: { skipped, was: error.code },
  };
}
