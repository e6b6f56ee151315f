/**
 * Named SQL of retention (CONTRACT §9) and of maintenance leases
 * (PostgreSQL). Every comparison with "now" uses the database's clock.
 * See docs/retention.md.
 */
import type { MaintenanceLeaseParams, RetentionBatchParams, RetentionBatchResult } from '../driver.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

/** The statements of this file, by name. */
export const RETENTION_SQL = {
  leaseAcquire: {
    name: 'onejob_maintenance_lease_acquire',
    text: `INSERT INTO maintenance_leases AS l (name, holder, expires_at)
VALUES ($1, $2, now() + $3 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= now() OR l.holder = EXCLUDED.holder
RETURNING holder`,
  },
  leaseRelease: {
    name: 'onejob_maintenance_lease_release',
    text: `DELETE FROM maintenance_leases WHERE name = $1 AND holder = $2`,
  },
  /**
   * One batch: the oldest terminal jobs past the cutoff (jobs_finished_idx),
   * locked (a concurrent settle of a loser waits; SKIP LOCKED leaves rows
   * another transaction holds for the next sweep), without an attempt still
   * in flight; then their events, stored streams (CONTRACT §13), attempts and the jobs themselves. The
   * foreign key attempts → jobs is checked at the end of the statement, when
   * all three deletes are done.
   */
  deleteBatch: {
    name: 'onejob_retention_delete_batch',
    text: `WITH doomed AS (
  SELECT j.owner_id, j.id FROM jobs j
  WHERE j.finished_at IS NOT NULL AND j.finished_at < now() - $1 * interval '1 millisecond'
    AND j.state IN ${TERMINAL_JOB_STATES_SQL}
    AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.state IN ('starting', 'running'))
  ORDER BY j.finished_at
  LIMIT $2
  FOR UPDATE OF j SKIP LOCKED
), gone_events AS (
  DELETE FROM job_events e USING doomed d WHERE e.owner_id = d.owner_id AND e.job_id = d.id RETURNING 1
), gone_stream AS (
  DELETE FROM stream_events s USING doomed d WHERE s.owner_id = d.owner_id AND s.job_id = d.id RETURNING 1
), gone_attempts AS (
  DELETE FROM attempts a USING doomed d WHERE a.owner_id = d.owner_id AND a.job_id = d.id RETURNING 1
), gone_jobs AS (
  DELETE FROM jobs j USING doomed d WHERE j.owner_id = d.owner_id AND j.id = d.id RETURNING j.state
)
SELECT
  (SELECT count(*)::int FROM gone_events) AS events,
  (SELECT count(*)::int FROM gone_attempts) AS attempts,
  (SELECT coalesce(json_object_agg(state, n), '{}'::json) FROM (SELECT state, count(*)::int AS n FROM gone_jobs GROUP BY state) s) AS by_state`,
  },
} as const;

/** See {@link DriverQueries.maintenanceLeaseAcquire}. */
export async function maintenanceLeaseAcquire(db: Queryable, p: MaintenanceLeaseParams): Promise<boolean> {
  const res = await db.query({ ...RETENTION_SQL.leaseAcquire, values: [p.name, p.holder, p.ttlMs] });
  return res.rowCount === 1;
}

/** See {@link DriverQueries.maintenanceLeaseRelease}. */
export async function maintenanceLeaseRelease(db: Queryable, p: Omit<MaintenanceLeaseParams, 'ttlMs'>): Promise<void> {
  await db.query({ ...RETENTION_SQL.leaseRelease, values: [p.name, p.holder] });
}

/** See {@link DriverQueries.retentionDeleteBatch}. */
export async function retentionDeleteBatch(db: Queryable, p: RetentionBatchParams): Promise<RetentionBatchResult> {
  const res = await db.query<{ events: number; attempts: number; by_state: Record<string, number> }>({
    ...RETENTION_SQL.deleteBatch,
    values: [p.olderThanMs, p.limit],
  });
  const row = res.rows[0] ?? { events: 0, attempts: 0, by_state: {} };
  const jobsByState = row.by_state as RetentionBatchResult['jobsByState'];
  const jobs = Object.values(jobsByState).reduce((n, x) => n + (x ?? 0), 0);
  return { jobsByState, jobs, attempts: row.attempts, events: row.events };
}
