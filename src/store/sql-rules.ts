/**
 * The rules of `src/core/states.ts` as SQL text, for both dialects: the
 * store's statements interpolate these instead of spelling the state lists
 * again (STYLE §15, one truth per rule). The migrations, which cannot be
 * generated, are tested against the same sets (test/store/sql-rules.test.ts).
 *
 * Each text is built once, at load, so a statement's text (and a PostgreSQL
 * named statement's plan) is the same on every call.
 */
import { ACTIVE_ATTEMPT_STATES, AttemptState, TERMINAL_ATTEMPT_STATES, TERMINAL_JOB_STATES } from '../core/states.ts';

/** `('a', 'b', …)`: states as an SQL list, in the order given. */
export function sqlStateList(states: Iterable<string>): string {
  return `(${[...states].map((s) => `'${s}'`).join(', ')})`;
}

/** Job states from which nothing moves on: `('succeeded', 'failed', 'cancelled')`. */
export const TERMINAL_JOB_STATES_SQL = sqlStateList(TERMINAL_JOB_STATES);

/** Attempt states that can still change: `('starting', 'running', 'unknown')`. */
export const ACTIVE_ATTEMPT_STATES_SQL = sqlStateList(ACTIVE_ATTEMPT_STATES);

/** Attempt states that ended definitely without winning: `('failed', 'cancelled', 'superseded')`. */
export const ENDED_WITHOUT_WINNING_ATTEMPT_STATES_SQL = sqlStateList([...TERMINAL_ATTEMPT_STATES].filter((s) => s !== AttemptState.Succeeded));

/**
 * The job's stream is held by an attempt that ended definitely without
 * winning (the job failed over): it may be claimed again (CONTRACT §7). The
 * row of `jobs` is `jobs` itself (an UPDATE's target), the same text on both
 * engines.
 */
export const STREAM_OWNER_ENDED = `stream_attempt_id IN (SELECT a.id FROM attempts a WHERE a.owner_id = jobs.owner_id AND a.job_id = jobs.id
    AND a.state IN ${ENDED_WITHOUT_WINNING_ATTEMPT_STATES_SQL})`;
