/**
 * The job and attempt state machines (CONTRACT §2) as data.
 *
 * Every legal transition is listed once, in {@link ATTEMPT_TRANSITIONS} and
 * {@link JOB_TRANSITIONS}; {@link transitionAttempt} and {@link transitionJob}
 * return the next state or throw an {@link OnejobError} with code
 * `illegal_transition`. Pure: no I/O, no clock.
 */
import { OnejobError } from './errors.ts';

/** The states of one attempt (one try of a job on one provider). */
export const AttemptState = {
  /**
   * The row is written; dispatch to the provider is not confirmed. Entered
   * when an attempt is created (by failover, a hedge, or `POST .../attempts`).
   * Left when an executor dispatches it (`running`), when it is cancelled
   * before dispatch, or when the executor that claimed it loses its lease
   * (`unknown`: it may have sent the request).
   */
  Starting: 'starting',
  /**
   * The provider has the request. Left on a definite outcome, at the
   * attempt's deadline (`unknown`), or when its executor's lease expires.
   */
  Running: 'running',
  /** Terminal: the provider's output won the job's compare-and-swap. */
  Succeeded: 'succeeded',
  /** Terminal: a definite failure; the provider did not (or could not usefully) execute. */
  Failed: 'failed',
  /** Terminal: stopped on request; no output was accepted. */
  Cancelled: 'cancelled',
  /**
   * In doubt: the deadline passed or the executor died without a definite
   * outcome. Never retried silently; left only by a late answer, a status
   * look-up, or an explicit resolve.
   */
  Unknown: 'unknown',
  /** Terminal: finished after another attempt had already won; its payload was discarded. */
  Superseded: 'superseded',
} as const;
export type AttemptState = (typeof AttemptState)[keyof typeof AttemptState];

/** The states of a job (the durable record of one intent). */
export const JobState = {
  /** Created; no attempt yet. The executor starts the first attempt. */
  Queued: 'queued',
  /** At least one attempt is `starting` or `running` (or the next one is about to be started). */
  Running: 'running',
  /** Blocked: an attempt is `unknown` and nothing is running. */
  Unknown: 'unknown',
  /** Terminal: `completed_by` names the winning attempt; `result` is its output. */
  Succeeded: 'succeeded',
  /** Terminal: every eligible provider failed definitely. */
  Failed: 'failed',
  /** Terminal: cancelled on request. */
  Cancelled: 'cancelled',
} as const;
export type JobState = (typeof JobState)[keyof typeof JobState];

/** Every attempt state, in declaration order. */
export const ATTEMPT_STATES: readonly AttemptState[] = Object.values(AttemptState);
/** Every job state, in declaration order. */
export const JOB_STATES: readonly JobState[] = Object.values(JobState);

/** What happens to an attempt. */
export type AttemptEvent =
  | 'dispatch' // the executor handed the request to the provider
  | 'win' // a definite success that won the compare-and-swap
  | 'lose' // a definite success (or success resolution) after another attempt won
  | 'fail' // a definite failure
  | 'cancel' // stopped on request before any output was accepted
  | 'time_out' // deadline passed or lease expired without a definite outcome
  | 'no_answer'; // the executor gave up listening for a late answer (unknown stays unknown)

/** The table of legal attempt transitions: `from -> event -> to`. */
export const ATTEMPT_TRANSITIONS: Readonly<
  Record<AttemptState, Partial<Readonly<Record<AttemptEvent, AttemptState>>>>
> = {
  starting: { dispatch: 'running', win: 'succeeded', lose: 'superseded', fail: 'failed', cancel: 'cancelled', time_out: 'unknown' },
  running: { win: 'succeeded', lose: 'superseded', fail: 'failed', cancel: 'cancelled', time_out: 'unknown' },
  unknown: { win: 'succeeded', lose: 'superseded', fail: 'failed', cancel: 'cancelled', no_answer: 'unknown' },
  succeeded: {},
  failed: {},
  cancelled: {},
  superseded: {},
};

/** Attempt states from which nothing moves on. */
export const TERMINAL_ATTEMPT_STATES: ReadonlySet<AttemptState> = new Set(['succeeded', 'failed', 'cancelled', 'superseded']);
/** Job states from which nothing moves on. */
export const TERMINAL_JOB_STATES: ReadonlySet<JobState> = new Set(['succeeded', 'failed', 'cancelled']);
/** Attempt states that can still change (every state but the terminal ones), in declaration order. */
export const ACTIVE_ATTEMPT_STATES: readonly AttemptState[] = ATTEMPT_STATES.filter((s) => !TERMINAL_ATTEMPT_STATES.has(s));
/** Attempt states that block a new attempt (CONTRACT §2, invariant 3). */
export const IN_DOUBT_ATTEMPT_STATES: ReadonlySet<AttemptState> = new Set(['starting', 'unknown']);

/** Whether an attempt in `state` can still change. */
export function isAttemptActive(state: AttemptState): boolean {
  return !TERMINAL_ATTEMPT_STATES.has(state);
}

/** Whether a job in `state` is finished. */
export function isJobTerminal(state: JobState): boolean {
  return TERMINAL_JOB_STATES.has(state);
}

/**
 * The state an attempt moves to on `event`.
 *
 * @throws OnejobError `illegal_transition` (for `unknown` + `dispatch`, say).
 * @example transitionAttempt('running', 'time_out') // 'unknown'
 */
export function transitionAttempt(from: AttemptState, event: AttemptEvent): AttemptState {
  const to = ATTEMPT_TRANSITIONS[from][event];
  if (to === undefined) {
    throw new OnejobError('illegal_transition', `an attempt that is ${from} cannot ${event.replace('_', ' ')}`);
  }
  return to;
}

/** The table of legal job transitions; the target is derived from the attempts (see `deriveJobState`). */
export const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  queued: ['queued', 'running', 'unknown', 'succeeded', 'failed', 'cancelled'],
  running: ['running', 'unknown', 'succeeded', 'failed', 'cancelled'],
  unknown: ['unknown', 'running', 'succeeded', 'failed', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

/**
 * Checks that a job may move from `from` to `to`, and returns `to`.
 *
 * @throws OnejobError `job_finished` when `from` is terminal, `illegal_transition` otherwise.
 */
export function transitionJob(from: JobState, to: JobState): JobState {
  if (isJobTerminal(from)) throw new OnejobError('job_finished', `the job is already ${from}`);
  if (!JOB_TRANSITIONS[from].includes(to)) {
    throw new OnejobError('illegal_transition', `a job that is ${from} cannot become ${to}`);
  }
  return to;
}
