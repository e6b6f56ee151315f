/**
 * Named SQL of the `attempts` table (PostgreSQL).
 *
 * Every transition is a guarded UPDATE that reports whether it applied; the
 * claim and lease queries are the executor's and span owners.
 */
import type { AttemptClaimParams, AttemptInsertRow, AttemptUpdateParams, LeaseExtendParams, MarkRunningParams } from '../driver.ts';
import type { Attempt } from '../../core/types.ts';
import { ATTEMPT_COLUMNS, attemptFromRow, jsonParam, type AttemptRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

/** The fixed statements of this file, by name ({@link attemptUpdate} builds its own). */
export const ATTEMPT_SQL = {
  markRunning: {
    name: 'onejob_attempt_mark_running',
    text: `WITH t AS (SELECT COALESCE($6::timestamptz, clock_timestamp()) AS now),
a AS (
  UPDATE attempts SET state = 'running', deadline_at = t.now + $5 * interval '1 millisecond'
  FROM t
  WHERE owner_id = $1 AND id = $2 AND state = 'starting' AND lease_owner = $3 AND lease_token = $4 AND lease_expires_at > t.now
  RETURNING attempts.owner_id, attempts.job_id, attempts.id, attempts.deadline_at
),
e AS (
  INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
  SELECT a.owner_id, a.job_id, a.id, 'attempt.running',
         json_build_object('deadline_at', to_char(a.deadline_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')), t.now
  FROM a, t
)
SELECT count(*)::int AS n FROM a`,
  },
  insert: {
    name: 'onejob_attempt_insert',
    text: `INSERT INTO attempts (owner_id, id, job_id, number, provider, kind, state, base_version,
                          started_at, deadline_at, lease_owner, lease_token, lease_expires_at,
                          reserve_micros, spend_limit_day_micros, spend_limit_month_micros)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
  },
  listByJob: {
    name: 'onejob_attempt_list_by_job',
    text: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = $1 AND job_id = $2 ORDER BY number`,
  },
  listByJobs: {
    name: 'onejob_attempt_list_by_jobs',
    text: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = $1 AND job_id = ANY($2::text[]) ORDER BY job_id, number`,
  },
  get: {
    name: 'onejob_attempt_get',
    text: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = $1 AND id = $2`,
  },
  // The job row is locked before the attempt's (the lock order of every store transaction): a cancel or a winning
  // settle holding the job is skipped, never raced (it would cancel the attempt while this claim leases it). The jobs
  // of a wider window of candidates are locked (SKIP LOCKED: concurrent claimers take different jobs), the oldest
  // `limit` of their attempts claimed; the UPDATE re-checks `starting`, unleased on the row's latest version. The
  // final SELECT restores "oldest first".
  claim: {
    name: 'onejob_attempt_claim',
    text: `WITH candidates AS (
  SELECT owner_id, id, job_id, started_at FROM attempts
  WHERE state = 'starting' AND lease_owner IS NULL AND started_at <= $4
  ORDER BY started_at, id
  LIMIT $3 * 4),
locked_jobs AS (
  SELECT jobs.owner_id, jobs.id FROM jobs
  WHERE (jobs.owner_id, jobs.id) IN (SELECT owner_id, job_id FROM candidates)
    AND jobs.state NOT IN ${TERMINAL_JOB_STATES_SQL}
  FOR UPDATE SKIP LOCKED),
picked AS (
  SELECT c.owner_id, c.id FROM candidates c JOIN locked_jobs j ON j.owner_id = c.owner_id AND j.id = c.job_id
  ORDER BY c.started_at, c.id
  LIMIT $3),
claimed AS (
  UPDATE attempts
  SET lease_owner = $1, lease_token = 'lease_' || gen_random_uuid()::text, lease_expires_at = $2
  WHERE (owner_id, id) IN (SELECT owner_id, id FROM picked) AND state = 'starting' AND lease_owner IS NULL
  RETURNING ${ATTEMPT_COLUMNS})
SELECT ${ATTEMPT_COLUMNS} FROM claimed ORDER BY started_at, id`,
  },
  extendLeases: {
    name: 'onejob_attempt_extend_leases',
    text: `UPDATE attempts SET lease_expires_at = $3
WHERE lease_owner = $1 AND lease_token = ANY($2::text[]) AND lease_expires_at > $4
RETURNING lease_token`,
  },
  listLeaseExpired: {
    name: 'onejob_attempt_list_lease_expired',
    // Expired leases, then running attempts with no lease at all (forbidden by attempts_running_has_lease; found should one slip through).
    text: `(SELECT ${ATTEMPT_COLUMNS} FROM attempts
 WHERE lease_owner IS NOT NULL AND lease_expires_at < $1 AND state IN ('starting', 'running')
 ORDER BY lease_expires_at, id
 LIMIT $2)
UNION ALL
(SELECT ${ATTEMPT_COLUMNS} FROM attempts
 WHERE state = 'running' AND lease_owner IS NULL
 ORDER BY started_at, id
 LIMIT $2)`,
  },
} as const;

/** See {@link DriverQueries.attemptInsert}. */
export async function attemptInsert(db: Queryable, row: AttemptInsertRow): Promise<void> {
  await db.query({
    ...ATTEMPT_SQL.insert,
    values: [
      row.ownerId,
      row.id,
      row.jobId,
      row.number,
      row.provider,
      row.kind,
      row.state,
      row.baseVersion,
      row.startedAt,
      row.deadlineAt,
      row.leaseOwner,
      row.leaseToken,
      row.leaseExpiresAt,
      row.reserve?.micros ?? null,
      row.reserve?.dayLimitMicros ?? null,
      row.reserve?.monthLimitMicros ?? null,
    ],
  });
}

/** See {@link DriverQueries.attemptListByJob}. */
export async function attemptListByJob(db: Queryable, ownerId: string, jobId: string): Promise<Attempt[]> {
  const res = await db.query<AttemptRow>({ ...ATTEMPT_SQL.listByJob, values: [ownerId, jobId] });
  return res.rows.map(attemptFromRow);
}

/** See {@link DriverQueries.attemptListByJobs}. */
export async function attemptListByJobs(db: Queryable, ownerId: string, jobIds: readonly string[]): Promise<Attempt[]> {
  if (jobIds.length === 0) return [];
  const res = await db.query<AttemptRow>({ ...ATTEMPT_SQL.listByJobs, values: [ownerId, [...jobIds]] });
  return res.rows.map(attemptFromRow);
}

/** See {@link DriverQueries.attemptGet}. */
export async function attemptGet(db: Queryable, ownerId: string, id: string): Promise<Attempt | null> {
  const res = await db.query<AttemptRow>({ ...ATTEMPT_SQL.get, values: [ownerId, id] });
  const r = res.rows[0];
  return r ? attemptFromRow(r) : null;
}

/**
 * See {@link DriverQueries.attemptUpdate}: one guarded UPDATE built from the
 * fields of `set` that are defined. The statement is named after its shape
 * (which columns, whether fenced), so each shape is prepared once per
 * connection. With nothing to set, the guard alone is checked.
 *
 * @throws TypeError when `set` both releases the lease and sets `leaseExpiresAt`.
 */
export async function attemptUpdate(db: Queryable, p: AttemptUpdateParams): Promise<boolean> {
  const { set } = p;
  if (set.releaseLease === true && set.leaseExpiresAt !== undefined) {
    throw new TypeError('attemptUpdate: releaseLease and leaseExpiresAt are mutually exclusive');
  }
  const values: unknown[] = [p.ownerId, p.id, [...p.fromStates]];
  const assignments: string[] = [];
  const shape: string[] = [];
  const assign = (column: string, tag: string, value: unknown): void => {
    values.push(value);
    assignments.push(`${column} = $${values.length}`);
    shape.push(tag);
  };
  if (set.state !== undefined) assign('state', 's', set.state);
  if (set.startedAt !== undefined) assign('started_at', 'st', set.startedAt);
  if (set.deadlineAt !== undefined) assign('deadline_at', 'd', set.deadlineAt);
  if (set.finishedAt !== undefined) assign('finished_at', 'f', set.finishedAt);
  if (set.error !== undefined) assign('error', 'e', jsonParam(set.error));
  if (set.leaseExpiresAt !== undefined) assign('lease_expires_at', 'x', set.leaseExpiresAt);
  if (set.usage !== undefined) {
    assign('prompt_tokens', 'u', set.usage?.promptTokens ?? null);
    assignments.push(`completion_tokens = $${values.push(set.usage?.completionTokens ?? null)}`, `total_tokens = $${values.push(set.usage?.totalTokens ?? null)}`);
  }
  if (set.costMicros !== undefined) assign('cost_micros', 'c', set.costMicros);
  if (set.providerRequestId !== undefined) assign('provider_request_id', 'p', set.providerRequestId);
  if (set.resolvedBy !== undefined) assign('resolved_by', 'rb', set.resolvedBy);
  if (set.unknownAt !== undefined) assign('unknown_at', 'ua', set.unknownAt);
  if (set.lookupNextAt !== undefined) assign('lookup_next_at', 'ln', set.lookupNextAt);
  if (set.releaseLease === true) {
    assignments.push('lease_owner = NULL', 'lease_expires_at = NULL');
    shape.push('r');
  }
  if (assignments.length === 0) assignments.push('state = state');

  let fence = '';
  if (p.fence !== undefined) {
    if (p.fence.now === null) {
      // The token alone (an answer whose lease ran out while nobody else took the attempt).
      values.push(p.fence.leaseOwner, p.fence.leaseToken);
      const n = values.length;
      fence = ` AND (lease_owner = $${n - 1} OR lease_owner IS NULL) AND lease_token = $${n}`;
      shape.push('token');
    } else {
      values.push(p.fence.leaseOwner, p.fence.leaseToken, p.fence.now);
      const n = values.length;
      fence = ` AND lease_owner = $${n - 2} AND lease_token = $${n - 1} AND lease_expires_at > $${n}`;
      shape.push('fence');
    }
  }
  if (p.noLookupHeldAt !== undefined) {
    values.push(p.noLookupHeldAt);
    fence += ` AND (lookup_holder IS NULL OR lookup_lease_expires_at <= $${values.length})`;
    shape.push('nolookup');
  }
  const res = await db.query({
    name: `onejob_attempt_update_${shape.join('_') || 'noop'}`,
    text: `UPDATE attempts SET ${assignments.join(', ')} WHERE owner_id = $1 AND id = $2 AND state = ANY($3::text[])${fence}`,
    values,
  });
  return res.rowCount === 1;
}

/** See {@link DriverQueries.attemptClaim}: each claimed row gets a fresh `lease_<uuid>` token. */
export async function attemptClaim(db: Queryable, p: AttemptClaimParams): Promise<Attempt[]> {
  const res = await db.query<AttemptRow>({ ...ATTEMPT_SQL.claim, values: [p.leaseOwner, p.leaseExpiresAt, p.limit, p.now] });
  return res.rows.map(attemptFromRow);
}

/** See {@link DriverQueries.attemptExtendLeases}. */
export async function attemptExtendLeases(db: Queryable, p: LeaseExtendParams): Promise<string[]> {
  if (p.leaseTokens.length === 0) return [];
  const res = await db.query<{ lease_token: string }>({
    ...ATTEMPT_SQL.extendLeases,
    values: [p.leaseOwner, [...p.leaseTokens], p.leaseExpiresAt, p.now],
  });
  return res.rows.map((r) => r.lease_token);
}

/** See {@link DriverQueries.attemptListLeaseExpired}: oldest expiry first. */
export async function attemptListLeaseExpired(db: Queryable, now: Date, limit: number): Promise<Attempt[]> {
  const res = await db.query<AttemptRow>({ ...ATTEMPT_SQL.listLeaseExpired, values: [now, limit] });
  return res.rows.map(attemptFromRow);
}

/** See {@link DriverQueries.attemptMarkRunning}. */
export async function attemptMarkRunning(db: Queryable, p: MarkRunningParams): Promise<boolean> {
  const res = await db.query<{ n: number }>({ ...ATTEMPT_SQL.markRunning, values: [p.ownerId, p.attemptId, p.leaseOwner, p.leaseToken, p.timeoutMs, p.now] });
  return res.rows[0]?.n === 1;
}
