/**
 * The one guard of a settle from outside (CONTRACT §15): a lookup, a
 * callback, `POST /v1/attempts/{id}/check` and a settle policy move an
 * attempt only from `unknown`. The caller names the states it may settle from
 * (`SettleAttemptParams.fromStates`); the store checks them under the job's
 * lock and gives them to the attempt's UPDATE as its `state IN (…)` guard, so
 * a writer that does not take the job's lock (`markRunning`) cannot slip
 * between the check and the write.
 */
import { OnejobError } from '../core/errors.ts';
import { isAttemptActive, type AttemptState } from '../core/states.ts';

/** What an outside resolver may settle: only an attempt in doubt. */
export const IN_DOUBT_ONLY: readonly AttemptState[] = ['unknown'];

/**
 * The refusal of settling an attempt in `state` when only `fromStates` may be
 * settled (null when it may): `attempt_in_flight` for one its executor still
 * runs (`starting`, `running`), `attempt_finished` for one that ended.
 *
 * @example settleRefusal('att_1', 'running', ['unknown'])?.code // 'attempt_in_flight'
 */
export function settleRefusal(attemptId: string, state: AttemptState, fromStates: readonly AttemptState[] | undefined): OnejobError | null {
  if (fromStates === undefined ? isAttemptActive(state) : fromStates.includes(state)) return null;
  if (isAttemptActive(state)) {
    return new OnejobError('attempt_in_flight', `attempt ${attemptId} is ${state}: its executor still runs it, and only an attempt in doubt (unknown) is settled from outside`, {
      details: { state },
    });
  }
  return new OnejobError('attempt_finished', `attempt ${attemptId} is already ${state}`, { details: { state } });
}
