/**
 * Named SQL of the `jobs` table (PostgreSQL).
 *
 * Each statement is a `{ name, text }` pair; `name` makes `pg` prepare it once
 * per connection. Every statement filters by `owner_id` except the executor's
 * cross-owner queue scan.
 */
import type { JobFinishParams, JobInsertRow, JobListParams, JobProgressParams, JobStreamClaimParams, KeylessLookupParams } from '../driver.ts';
import type { Job } from '../../core/types.ts';
import { JOB_COLUMNS, jobFromRow, jsonParam, jsonValueParam, type JobRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL, ACTIVE_ATTEMPT_STATES_SQL, STREAM_OWNER_ENDED } from '../sql-rules.ts';

/** The statements of this file, by name. */
export const JOB_SQL = {
  insert: {
    name: 'onejob_job_insert',
    text: `INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers,
                      state, version, attempt_count, skipped, created_at, updated_at, trace_context)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, 0, '[]', $9, $9, $10)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING ${JOB_COLUMNS}`,
  },
  insertKeyless: {
    name: 'onejob_job_insert_keyless',
    text: `INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers,
                      state, version, attempt_count, skipped, created_at, updated_at, trace_context, keyless_fingerprint)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, 0, '[]', $9, $9, $10, $11)
ON CONFLICT DO NOTHING
RETURNING ${JOB_COLUMNS}`,
  },
  getByKeylessFingerprint: {
    name: 'onejob_job_get_by_keyless_fingerprint',
    // The undecided one first (at most one: the partial UNIQUE index), else the newest finished within the window.
    text: `SELECT ${JOB_COLUMNS} FROM jobs
WHERE owner_id = $1 AND keyless_fingerprint = $2
  AND (state NOT IN ${TERMINAL_JOB_STATES_SQL} OR finished_at > COALESCE($4::timestamptz, clock_timestamp()) - $3 * interval '1 millisecond')
ORDER BY finished_at DESC NULLS FIRST
LIMIT 1`,
  },
  getByKey: {
    name: 'onejob_job_get_by_key',
    text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE owner_id = $1 AND idempotency_key = $2`,
  },
  get: {
    name: 'onejob_job_get',
    text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE owner_id = $1 AND id = $2`,
  },
  getForUpdate: {
    name: 'onejob_job_get_for_update',
    text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE owner_id = $1 AND id = $2 FOR UPDATE`,
  },
  updateProgress: {
    name: 'onejob_job_update_progress',
    text: `UPDATE jobs SET state = $3, attempt_count = $4, skipped = $5, updated_at = $6
WHERE owner_id = $1 AND id = $2 AND state NOT IN ${TERMINAL_JOB_STATES_SQL}`,
  },
  finish: {
    name: 'onejob_job_finish',
    text: `UPDATE jobs SET state = $4, completed_by = $5, result = $6, error = $7, skipped = $8,
                version = version + 1, updated_at = $9, finished_at = $9
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL AND state NOT IN ${TERMINAL_JOB_STATES_SQL}
  AND (stream_attempt_id IS NULL OR $5::text IS NULL OR stream_attempt_id = $5::text OR ${STREAM_OWNER_ENDED})`,
  },
  streamClaim: {
    name: 'onejob_job_stream_claim',
    text: `WITH t AS (SELECT COALESCE($6::timestamptz, clock_timestamp()) AS now),
j0 AS (
  SELECT jobs.id FROM jobs
  WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL AND state NOT IN ${TERMINAL_JOB_STATES_SQL}
    AND (stream_attempt_id IS NULL OR stream_attempt_id = $3 OR ${STREAM_OWNER_ENDED})
  FOR UPDATE
),
a0 AS (
  SELECT attempts.id FROM attempts, t, j0
  WHERE attempts.owner_id = $1 AND attempts.id = $3 AND attempts.job_id = j0.id AND attempts.state IN ${ACTIVE_ATTEMPT_STATES_SQL}
    AND attempts.lease_owner = $4 AND attempts.lease_token = $5 AND attempts.lease_expires_at > t.now
  FOR UPDATE OF attempts
),
j AS (UPDATE jobs SET stream_attempt_id = $3 FROM a0 WHERE jobs.owner_id = $1 AND jobs.id = $2 RETURNING jobs.id),
d AS (UPDATE attempts SET deadline_at = NULL FROM j WHERE attempts.owner_id = $1 AND attempts.id = $3 AND attempts.state IN ('starting', 'running')),
e AS (
  INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
  SELECT $1, j.id, $3, 'attempt.stream_claimed', '{}'::json, t.now FROM j, t
)
SELECT count(*)::int AS n FROM j`,
  },
  streamOwner: {
    name: 'onejob_job_stream_owner',
    text: `SELECT stream_attempt_id FROM jobs WHERE owner_id = $1 AND id = $2`,
  },
  states: {
    name: 'onejob_job_states',
    // Each job by its primary key (a LATERAL lookup): a join to the unnested rows may be planned as a scan of every job of an owner.
    text: `SELECT j.id, j.state FROM unnest($1::text[], $2::text[]) AS r(owner_id, id)
CROSS JOIN LATERAL (SELECT jobs.id, jobs.state FROM jobs WHERE jobs.owner_id = r.owner_id AND jobs.id = r.id) j`,
  },
  listQueuedForUpdate: {
    name: 'onejob_job_list_queued_for_update',
    text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE state = 'queued' AND batch_id IS NULL ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED`,
  },
} as const;

/**
 * The page query of {@link jobList}; one named statement per combination of
 * the optional filters, so each keeps a plan fitted to its shape.
 */
function jobListSql(withState: boolean, withAfter: boolean): { name: string; text: string } {
  const where = ['owner_id = $1'];
  if (withState) where.push('state = $3');
  if (withAfter) where.push(`(created_at, id) < ($${withState ? 4 : 3}, $${withState ? 5 : 4})`);
  return {
    name: `onejob_job_list${withState ? '_state' : ''}${withAfter ? '_after' : ''}`,
    text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $2`,
  };
}
const JOB_LIST_SQL = [jobListSql(false, false), jobListSql(false, true), jobListSql(true, false), jobListSql(true, true)] as const;

/** See {@link DriverQueries.jobInsert}. */
export async function jobInsert(db: Queryable, row: JobInsertRow): Promise<Job | null> {
  const res = await db.query<JobRow>({
    ...JOB_SQL.insert,
    values: [
      row.ownerId,
      row.id,
      row.idempotencyKey,
      row.fingerprint,
      row.route,
      jsonValueParam(row.input),
      jsonParam(row.metadata),
      JSON.stringify(row.providers),
      row.createdAt,
      row.traceContext ?? null,
    ],
  });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.jobInsertKeyless}. */
export async function jobInsertKeyless(db: Queryable, row: JobInsertRow & { readonly keylessFingerprint: string }): Promise<Job | null> {
  const res = await db.query<JobRow>({
    ...JOB_SQL.insertKeyless,
    values: [
      row.ownerId, row.id, row.idempotencyKey, row.fingerprint, row.route, jsonValueParam(row.input), jsonParam(row.metadata),
      JSON.stringify(row.providers), row.createdAt, row.traceContext ?? null, row.keylessFingerprint,
    ],
  });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.jobGetByKeylessFingerprint}. */
export async function jobGetByKeylessFingerprint(db: Queryable, p: KeylessLookupParams): Promise<Job | null> {
  const res = await db.query<JobRow>({ ...JOB_SQL.getByKeylessFingerprint, values: [p.ownerId, p.fingerprint, p.windowMs, p.now] });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.jobGetByKey}. */
export async function jobGetByKey(db: Queryable, ownerId: string, idempotencyKey: string): Promise<Job | null> {
  const res = await db.query<JobRow>({ ...JOB_SQL.getByKey, values: [ownerId, idempotencyKey] });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.jobGet}. */
export async function jobGet(db: Queryable, ownerId: string, id: string, forUpdate = false): Promise<Job | null> {
  const sql = forUpdate ? JOB_SQL.getForUpdate : JOB_SQL.get;
  const res = await db.query<JobRow>({ ...sql, values: [ownerId, id] });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.jobList}. */
export async function jobList(db: Queryable, p: JobListParams): Promise<Job[]> {
  const withState = p.state !== undefined;
  const withAfter = p.after !== undefined;
  const sql = JOB_LIST_SQL[(withState ? 2 : 0) + (withAfter ? 1 : 0)]!;
  const values: unknown[] = [p.ownerId, p.limit];
  if (p.state !== undefined) values.push(p.state);
  if (p.after !== undefined) values.push(p.after.createdAt, p.after.id);
  const res = await db.query<JobRow>({ ...sql, values });
  return res.rows.map(jobFromRow);
}

/** See {@link DriverQueries.jobUpdateProgress}. */
export async function jobUpdateProgress(db: Queryable, p: JobProgressParams): Promise<boolean> {
  const res = await db.query({
    ...JOB_SQL.updateProgress,
    values: [p.ownerId, p.id, p.state, p.attemptCount, JSON.stringify(p.skipped), p.updatedAt],
  });
  return res.rowCount === 1;
}

/** See {@link DriverQueries.jobFinish}: the completion compare-and-swap. */
export async function jobFinish(db: Queryable, p: JobFinishParams): Promise<boolean> {
  const res = await db.query({
    ...JOB_SQL.finish,
    values: [
      p.ownerId,
      p.id,
      p.expectedVersion,
      p.state,
      p.completedBy,
      jsonParam(p.result),
      jsonParam(p.error),
      JSON.stringify(p.skipped),
      p.now,
    ],
  });
  return res.rowCount === 1;
}

/** See {@link DriverQueries.jobStreamClaim}. */
export async function jobStreamClaim(db: Queryable, p: JobStreamClaimParams): Promise<boolean> {
  const res = await db.query<{ n: number }>({ ...JOB_SQL.streamClaim, values: [p.ownerId, p.id, p.attemptId, p.leaseOwner, p.leaseToken, p.now] });
  return res.rows[0]?.n === 1;
}

/** See {@link DriverQueries.jobStreamOwner}. */
export async function jobStreamOwner(db: Queryable, ownerId: string, id: string): Promise<string | null> {
  const res = await db.query<{ stream_attempt_id: string | null }>({ ...JOB_SQL.streamOwner, values: [ownerId, id] });
  return res.rows[0]?.stream_attempt_id ?? null;
}

/** See {@link DriverQueries.jobListQueuedForUpdate}. */
export async function jobListQueuedForUpdate(db: Queryable, limit: number): Promise<Job[]> {
  const res = await db.query<JobRow>({ ...JOB_SQL.listQueuedForUpdate, values: [limit] });
  return res.rows.map(jobFromRow);
}

/** The database's clock (see {@link DriverQueries.dbNow}). */
export const DB_NOW_SQL = { name: 'onejob_db_now', text: 'SELECT clock_timestamp() AS now' } as const;

/** See {@link DriverQueries.dbNow}. */
export async function dbNow(db: Queryable): Promise<Date> {
  const res = await db.query<{ now: Date }>({ ...DB_NOW_SQL, values: [] });
  return res.rows[0]!.now;
}

/** See {@link DriverQueries.jobStates}. */
export async function jobStates(db: Queryable, refs: readonly { readonly ownerId: string; readonly jobId: string }[]): Promise<{ id: string; state: Job['state'] }[]> {
  if (refs.length === 0) return [];
  const res = await db.query<{ id: string; state: Job['state'] }>({ ...JOB_SQL.states, values: [refs.map((r) => r.ownerId), refs.map((r) => r.jobId)] });
  return res.rows;
}
