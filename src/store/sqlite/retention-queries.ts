/**
 * Named SQL of retention (CONTRACT §9) and of maintenance leases (SQLite).
 * Timestamps are epoch milliseconds; "now" is the database's clock
 * (`julianday('now')`, the host's clock, as every process on one SQLite
 * file shares one host). See docs/retention.md.
 */

import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

/** The database's now, in epoch milliseconds. */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;

export const MAINTENANCE_LEASE_ACQUIRE = `
INSERT INTO maintenance_leases (name, holder, expires_at) VALUES (@name, @holder, ${NOW_MS} + @ttlMs)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE maintenance_leases.expires_at <= ${NOW_MS} OR maintenance_leases.holder = excluded.holder
RETURNING holder`;

export const MAINTENANCE_LEASE_RELEASE = `DELETE FROM maintenance_leases WHERE name = ? AND holder = ?`;

/** The cutoff of one batch, computed once so every statement of the batch agrees. */
export const RETENTION_CUTOFF = `SELECT ${NOW_MS} - @olderThanMs AS cutoff`;

/**
 * The jobs of one batch: the oldest terminal jobs finished before @cutoff
 * (jobs_finished_idx), none with an attempt still in flight. The order is
 * total, so the deletes below, run in the same write transaction, select the
 * same rows again.
 */
const DOOMED = `
SELECT owner_id, id FROM jobs j
WHERE j.finished_at IS NOT NULL AND j.finished_at < @cutoff
  AND j.state IN ${TERMINAL_JOB_STATES_SQL}
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.state IN ('starting', 'running'))
ORDER BY j.finished_at, j.owner_id, j.id
LIMIT @limit`;

/** The states of the batch's jobs, counted. */
export const RETENTION_COUNT = `SELECT state, count(*) AS n FROM jobs WHERE (owner_id, id) IN (${DOOMED}) GROUP BY state`;
export const RETENTION_DELETE_EVENTS = `DELETE FROM job_events WHERE (owner_id, job_id) IN (${DOOMED})`;
/** A deleted job's stored stream goes with it (CONTRACT §13). */
export const RETENTION_DELETE_STREAM = `DELETE FROM stream_events WHERE (owner_id, job_id) IN (${DOOMED})`;
export const RETENTION_DELETE_ATTEMPTS = `DELETE FROM attempts WHERE (owner_id, job_id) IN (${DOOMED})`;
export const RETENTION_DELETE_JOBS = `DELETE FROM jobs WHERE (owner_id, id) IN (${DOOMED})`;
