/**
 * The one error of a create whose first attempt the spend reservation
 * refused (CONTRACT §16): `budget_exceeded`, nothing created. PostgreSQL
 * raises SQLSTATE `OJ429` in the create statement
 * (`onejob_first_attempt_reserved`, migration 0014); the SQLite script takes
 * the job back and says so.
 */
import { OnejobError, isOnejobError } from '../core/errors.ts';

/** The SQLSTATE of a refused first attempt (PostgreSQL). */
export const BUDGET_REFUSED_SQLSTATE = 'OJ429';

/** The `budget_exceeded` refusal of a create. */
export function budgetRefused(): OnejobError {
  return new OnejobError('budget_exceeded', "the owner's spend limit cannot hold this request's worst case: nothing was created, and the Idempotency-Key is still unused");
}

/** Whether `e` is a refused reservation, as either engine reports it (also wrapped as a cause). */
export function isBudgetRefusal(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x !== null && typeof x === 'object' && depth < 4; x = (x as { cause?: unknown }).cause, depth++) {
    if (isOnejobError(x, 'budget_exceeded')) return true;
    if ((x as { code?: unknown }).code === BUDGET_REFUSED_SQLSTATE) return true;
  }
  return false;
}
