/** Named SQL for the `attempts` table (SQLite). */

import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

export const ATTEMPT_INSERT = `
INSERT INTO attempts (owner_id, id, job_id, number, provider, kind, state, base_version, started_at, deadline_at, lease_owner, lease_token, lease_expires_at,
                      reserve_micros, spend_limit_day_micros, spend_limit_month_micros)
VALUES (@ownerId, @id, @jobId, @number, @provider, @kind, @state, @baseVersion, @startedAt, @deadlineAt, @leaseOwner, @leaseToken, @leaseExpiresAt,
        @reserveMicros, @spendLimitDayMicros, @spendLimitMonthMicros)`;

/** A job inserted by the fast path's script whose first attempt the spend reservation refused (CONTRACT §16): taken back, nothing created. */
export const JOB_DELETE_UNRESERVED = `
DELETE FROM jobs WHERE owner_id = @ownerId AND id = @id AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = @ownerId AND a.job_id = @id)`;

export const ATTEMPT_INSERT_RETURNING = `${ATTEMPT_INSERT}
RETURNING *`;

/**
 * The fast path's winning settle, attempt side (see
 * `DriverQueries.attemptSettleWon`): the fence, and the job still undecided
 * with this attempt its only one, at the version the attempt started from.
 */
export const ATTEMPT_SETTLE_WON = `
UPDATE attempts SET state = 'succeeded', finished_at = @now, lease_owner = NULL, lease_expires_at = NULL,
  prompt_tokens = CASE WHEN @withUsage THEN @promptTokens ELSE prompt_tokens END,
  completion_tokens = CASE WHEN @withUsage THEN @completionTokens ELSE completion_tokens END,
  total_tokens = CASE WHEN @withUsage THEN @totalTokens ELSE total_tokens END,
  cost_micros = CASE WHEN @withUsage THEN @costMicros ELSE cost_micros END,
  provider_request_id = COALESCE(@providerRequestId, provider_request_id)
WHERE owner_id = @ownerId AND id = @attemptId AND job_id = @jobId AND state IN ('starting', 'running')
  AND lease_owner = @leaseOwner AND lease_token = @leaseToken AND lease_expires_at > @now
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = @ownerId AND j.id = @jobId AND j.completed_by IS NULL
    AND j.state NOT IN ${TERMINAL_JOB_STATES_SQL} AND j.attempt_count = 1 AND j.version = attempts.base_version
    AND (j.stream_attempt_id IS NULL OR j.stream_attempt_id = @attemptId))
RETURNING *`;

/** `starting` → `running`, fenced (see `DriverQueries.attemptMarkRunning`). */
export const ATTEMPT_MARK_RUNNING = `
UPDATE attempts SET state = 'running', deadline_at = @deadlineAt
WHERE owner_id = @ownerId AND id = @attemptId AND state = 'starting'
  AND lease_owner = @leaseOwner AND lease_token = @leaseToken AND lease_expires_at > @now
RETURNING job_id`;

/** A stream's first output: its deadline to the first output no longer applies (its idle bound does; see `DriverQueries.jobStreamClaim`). */
export const ATTEMPT_CLEAR_DEADLINE = `
UPDATE attempts SET deadline_at = NULL WHERE owner_id = @ownerId AND id = @attemptId AND state IN ('starting', 'running')`;

/** The `attempt.running` event of {@link ATTEMPT_MARK_RUNNING}, its job read from the attempt. */
export const ATTEMPT_RUNNING_EVENT = `
INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
SELECT owner_id, job_id, id, 'attempt.running', @data, @at FROM attempts WHERE owner_id = @ownerId AND id = @attemptId`;

export const ATTEMPT_LIST_BY_JOB = `SELECT * FROM attempts WHERE owner_id = ? AND job_id = ? ORDER BY number`;

export const ATTEMPT_LIST_BY_JOBS = `
SELECT * FROM attempts WHERE owner_id = ? AND job_id IN (SELECT value FROM json_each(?)) ORDER BY job_id, number`;

export const ATTEMPT_GET = `SELECT * FROM attempts WHERE owner_id = ? AND id = ?`;

/** Leases unclaimed `starting` attempts, oldest first, each with a fresh token. */
export const ATTEMPT_CLAIM = `
UPDATE attempts SET lease_owner = @leaseOwner, lease_token = 'lease_' || lower(hex(randomblob(16))), lease_expires_at = @leaseExpiresAt
WHERE (owner_id, id) IN (
  SELECT owner_id, id FROM attempts WHERE state = 'starting' AND lease_owner IS NULL AND started_at <= @now
    AND EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = attempts.owner_id AND j.id = attempts.job_id AND j.state NOT IN ${TERMINAL_JOB_STATES_SQL})
  ORDER BY started_at LIMIT @limit
)
RETURNING *`;

export const ATTEMPT_EXTEND_LEASES = `
UPDATE attempts SET lease_expires_at = @leaseExpiresAt
WHERE lease_owner = @leaseOwner AND lease_token IN (SELECT value FROM json_each(@tokens)) AND lease_expires_at > @now
RETURNING lease_token`;

/** Expired leases, then running attempts with no lease at all (refused by the schema; found should one slip through). */
export const ATTEMPT_LIST_LEASE_EXPIRED = `
SELECT * FROM (SELECT * FROM attempts
  WHERE lease_owner IS NOT NULL AND lease_expires_at < @now AND state IN ('starting', 'running')
  ORDER BY lease_expires_at LIMIT @limit)
UNION ALL
SELECT * FROM (SELECT * FROM attempts
  WHERE state = 'running' AND lease_owner IS NULL
  ORDER BY started_at LIMIT @limit)`;
