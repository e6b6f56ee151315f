/** Named SQL for the `jobs` table (SQLite). Timestamps are epoch milliseconds; JSON is TEXT. */

import { TERMINAL_JOB_STATES_SQL, ACTIVE_ATTEMPT_STATES_SQL, STREAM_OWNER_ENDED } from '../sql-rules.ts';

export const JOB_INSERT = `
INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, attempt_count, skipped, created_at, updated_at, trace_context)
VALUES (@ownerId, @id, @idempotencyKey, @fingerprint, @route, @input, @metadata, @providers, @state, 0, @attemptCount, '[]', @createdAt, @createdAt, @traceContext)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING *`;

/** A keyless job (CONTRACT §12): any uniqueness conflict (the key, or an undecided job with this fingerprint) inserts nothing. */
export const JOB_INSERT_KEYLESS = `
INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, attempt_count, skipped, created_at, updated_at, trace_context, keyless_fingerprint)
VALUES (@ownerId, @id, @idempotencyKey, @fingerprint, @route, @input, @metadata, @providers, @state, 0, @attemptCount, '[]', @createdAt, @createdAt, @traceContext, @keylessFingerprint)
ON CONFLICT DO NOTHING
RETURNING *`;

/** The keyless job a request joins (undecided) or replays (finished within @windowMs of @now, or of the database's clock). */
export const JOB_GET_BY_KEYLESS_FINGERPRINT = `
SELECT * FROM jobs
WHERE owner_id = @ownerId AND keyless_fingerprint = @fingerprint
  AND (state NOT IN ${TERMINAL_JOB_STATES_SQL}
       OR finished_at > COALESCE(@now, CAST(round(unixepoch('subsec') * 1000) AS INTEGER)) - @windowMs)
ORDER BY finished_at IS NOT NULL, finished_at DESC
LIMIT 1`;

/**
 * The fast path's compare-and-swap (see `DriverQueries.attemptSettleWon`): run
 * only after `ATTEMPT_SETTLE_WON` applied in the same transaction, which
 * checked the job (undecided, one attempt, version) under the write lock.
 */
export const JOB_SETTLE_WON = `
UPDATE jobs SET state = 'succeeded', completed_by = @attemptId, result = @result, error = NULL,
  version = version + 1, updated_at = @now, finished_at = @now
WHERE owner_id = @ownerId AND id = @jobId AND completed_by IS NULL AND state NOT IN ${TERMINAL_JOB_STATES_SQL}
RETURNING *`;

/** @refs: a JSON array of [owner_id, id] pairs. */
export const JOB_STATES = `
SELECT j.id, j.state FROM jobs j JOIN json_each(@refs) r
  ON j.owner_id = json_extract(r.value, '$[0]') AND j.id = json_extract(r.value, '$[1]')`;

export const JOB_GET_BY_KEY = `SELECT * FROM jobs WHERE owner_id = ? AND idempotency_key = ?`;

export const JOB_GET = `SELECT * FROM jobs WHERE owner_id = ? AND id = ?`;

/** Keyset pagination over (created_at DESC, id DESC); @state and @afterCreatedAt may be NULL. */
export const JOB_LIST = `
SELECT * FROM jobs
WHERE owner_id = @ownerId
  AND (@state IS NULL OR state = @state)
  AND (@afterCreatedAt IS NULL OR created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))
ORDER BY created_at DESC, id DESC
LIMIT @limit`;

export const JOB_UPDATE_PROGRESS = `
UPDATE jobs SET state = @state, attempt_count = @attemptCount, skipped = @skipped, updated_at = @updatedAt
WHERE owner_id = @ownerId AND id = @id AND state NOT IN ${TERMINAL_JOB_STATES_SQL}`;

/** The outcome compare-and-swap (CONTRACT §2, invariant 2), which also respects the job's stream owner (§7). */
export const JOB_FINISH = `
UPDATE jobs SET state = @state, completed_by = @completedBy, result = @result, error = @error, skipped = @skipped,
  version = version + 1, updated_at = @now, finished_at = @now
WHERE owner_id = @ownerId AND id = @id AND version = @expectedVersion AND completed_by IS NULL
  AND state NOT IN ${TERMINAL_JOB_STATES_SQL}
  AND (stream_attempt_id IS NULL OR @completedBy IS NULL OR stream_attempt_id = @completedBy OR ${STREAM_OWNER_ENDED})`;

/** The stream compare-and-swap (CONTRACT §7; see `DriverQueries.jobStreamClaim`). */
export const JOB_STREAM_CLAIM = `
UPDATE jobs SET stream_attempt_id = @attemptId
WHERE owner_id = @ownerId AND id = @id AND completed_by IS NULL AND state NOT IN ${TERMINAL_JOB_STATES_SQL}
  AND (stream_attempt_id IS NULL OR stream_attempt_id = @attemptId OR ${STREAM_OWNER_ENDED})
  AND EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = @ownerId AND a.id = @attemptId AND a.job_id = @id
    AND a.state IN ${ACTIVE_ATTEMPT_STATES_SQL} AND a.lease_owner = @leaseOwner AND a.lease_token = @leaseToken AND a.lease_expires_at > @now)`;

export const JOB_STREAM_OWNER = `SELECT stream_attempt_id FROM jobs WHERE owner_id = ? AND id = ?`;

/** SQLite has one writer at a time: the write transaction is the lock, so no SKIP LOCKED is needed. */
export const JOB_LIST_QUEUED = `SELECT * FROM jobs WHERE state = 'queued' AND batch_id IS NULL ORDER BY created_at LIMIT ?`;

/** The database's clock in epoch milliseconds (see `DriverQueries.dbNow`). */
export const DB_NOW = `SELECT CAST(round(unixepoch('subsec') * 1000) AS INTEGER) AS now`;
