/**
 * The fast path's two statements (PostgreSQL), each one round trip and one
 * commit (docs/performance.md, "the fast path"):
 *
 * - {@link jobInsertLeased}: the job, its first attempt leased to the
 *   creating process and the attempt's event, in one `INSERT … ON CONFLICT
 *   DO NOTHING` with data-modifying CTEs: a replay inserts nothing at all.
 * - {@link attemptSettleWon}: the winning settle of a job's only attempt.
 *   It takes the row locks in the order every store transaction does (the
 *   job, then the attempt: no deadlock against them), checks the fence and
 *   the compare-and-swap on the latest row versions (`FOR UPDATE` re-checks
 *   a row changed since the statement's snapshot), and only then writes;
 *   anything unexpected writes nothing and answers no row, and the store
 *   falls back to its general transaction.
 */
import type { Attempt, Job } from '../../core/types.ts';
import type { FirstAttemptRow, JobInsertRow, SettleWonParams } from '../driver.ts';
import { ATTEMPT_COLUMNS, JOB_COLUMNS, attemptFromRow, jobFromRow, jsonParam, jsonValueParam, type AttemptRow, type JobRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

/** `<alias>.<column> AS <prefix><column>` for every column of a list. */
function prefixed(columns: string, alias: string, prefix: string): string {
  return columns.split(', ').map((c) => `${alias}.${c} AS ${prefix}${c}`).join(', ');
}

/** A job (`j`) and its attempt (`a`) in one row, their columns prefixed `j_` and `a_` (see {@link splitJobRow}). */
export const JOB_RETURNED = `${prefixed(JOB_COLUMNS, 'j', 'j_')}, ${prefixed(ATTEMPT_COLUMNS, 'a', 'a_')}`;
const RETURNED = JOB_RETURNED;

/** `<table>.<column>` for every column of a list (a RETURNING beside other relations' columns). */
function qualified(columns: string, table: string): string {
  return columns.split(', ').map((c) => `${table}.${c}`).join(', ');
}

/**
 * The `attempt.started` event of first attempts written with their job, from
 * the inserted attempts `a` (here and in the create batcher's multi-row form).
 */
export const FIRST_ATTEMPT_EVENT = `
  INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
  SELECT a.owner_id, a.job_id, a.id, 'attempt.started',
         json_build_object('number', 1, 'provider', a.provider, 'kind', 'first', 'lease_owner', a.lease_owner), a.started_at
  FROM a
`;

/** The statements of this file, by name. */
export const FAST_PATH_SQL = {
  insertLeased: {
    name: 'onejob_job_insert_leased',
    text: `WITH t AS (SELECT COALESCE($15::timestamptz, clock_timestamp()) AS now),
j AS (
  INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers,
                    state, version, attempt_count, skipped, created_at, updated_at, trace_context)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', 0, 1, '[]', $9, $9, $10)
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING ${JOB_COLUMNS}
),
a AS (
  INSERT INTO attempts (owner_id, id, job_id, number, provider, kind, state, base_version, started_at, deadline_at,
                        lease_owner, lease_token, lease_expires_at, reserve_micros, spend_limit_day_micros, spend_limit_month_micros)
  SELECT j.owner_id, $11, j.id, 1, $12, 'first', 'starting', 0, t.now, NULL, $13, $14, t.now + $16 * interval '1 millisecond', $17, $18, $19
  FROM j, t
  RETURNING ${ATTEMPT_COLUMNS}
),
e AS (${FIRST_ATTEMPT_EVENT})
-- A job inserted without its attempt (the spend reservation refused it, CONTRACT §16) fails the whole statement: nothing created.
SELECT ${RETURNED} FROM j LEFT JOIN a ON a.job_id = j.id WHERE onejob_first_attempt_reserved(a.id IS NOT NULL)`,
  },
  settleWon: {
    name: 'onejob_attempt_settle_won',
    text: `WITH t AS (SELECT COALESCE($12::timestamptz, clock_timestamp()) AS now),
j0 AS (
  SELECT jobs.id, jobs.version FROM jobs
  WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL AND state NOT IN ${TERMINAL_JOB_STATES_SQL} AND attempt_count = 1
    AND (stream_attempt_id IS NULL OR stream_attempt_id = $3)
  FOR UPDATE
),
a0 AS (
  SELECT attempts.id FROM attempts, t, j0
  WHERE attempts.owner_id = $1 AND attempts.id = $3 AND attempts.job_id = j0.id AND attempts.base_version = j0.version
    AND attempts.state IN ('starting', 'running')
    AND attempts.lease_owner = $4 AND attempts.lease_token = $5 AND attempts.lease_expires_at > t.now
  FOR UPDATE OF attempts
),
j AS (
  UPDATE jobs SET state = 'succeeded', completed_by = $3, result = $6, error = NULL,
                  version = jobs.version + 1, updated_at = t.now, finished_at = t.now
  FROM t, a0
  WHERE jobs.owner_id = $1 AND jobs.id = $2
  RETURNING ${qualified(JOB_COLUMNS, 'jobs')}
),
a AS (
  UPDATE attempts SET state = 'succeeded', finished_at = t.now, lease_owner = NULL, lease_expires_at = NULL,
    prompt_tokens = CASE WHEN $7 THEN $8::bigint ELSE attempts.prompt_tokens END,
    completion_tokens = CASE WHEN $7 THEN $9::bigint ELSE attempts.completion_tokens END,
    total_tokens = CASE WHEN $7 THEN $10::bigint ELSE attempts.total_tokens END,
    cost_micros = CASE WHEN $7 THEN $11::bigint ELSE attempts.cost_micros END,
    provider_request_id = COALESCE($14::text, attempts.provider_request_id)
  FROM t, j
  WHERE attempts.owner_id = $1 AND attempts.id = $3
  RETURNING ${qualified(ATTEMPT_COLUMNS, 'attempts')}
),
e AS (
  INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
  SELECT a.owner_id, a.job_id, a.id, v.type, json_build_object('actor', $13::text), a.finished_at
  FROM a, (VALUES (1, 'attempt.succeeded'), (2, 'job.succeeded')) AS v(ord, type)
  ORDER BY v.ord
)
SELECT ${RETURNED} FROM j JOIN a ON a.job_id = j.id`,
  },
  /**
   * {@link settleWon} for many attempts in one statement (the group commit of
   * concurrent settles): one array parameter per column, one attempt per
   * element (sent sorted by job: rows are locked in that order, so two
   * batches never lock in opposite orders). Each attempt applies or not on
   * its own, exactly as alone; the answer holds a row for each that applied.
   * Each row is found by its primary key in a LATERAL lookup (locked there),
   * then updated by its `ctid` (under the lock it cannot move): a plain join
   * of the tables to the unnested rows let the planner pick per-owner index
   * scans that read every job of the owner (100 → 700 ms per batch as 3,000
   * jobs of one owner piled up, measured).
   */
  settleWonMany: {
    name: 'onejob_attempt_settle_won_many',
    text: `WITH r AS MATERIALIZED (
  SELECT r.*, COALESCE(r.at, clock_timestamp()) AS now
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::int8[], $9::int8[], $10::int8[], $11::int8[],
              $12::timestamptz[], $13::text[], $14::text[]) WITH ORDINALITY
    AS r(owner_id, job_id, attempt_id, lease_owner, lease_token, result, with_usage, prompt_tokens, completion_tokens, total_tokens, cost_micros, at, actor,
         provider_request_id, ord)
),
j0 AS MATERIALIZED (
  SELECT r.ord, x.ctid AS job_ctid, x.version FROM r CROSS JOIN LATERAL (
    SELECT jobs.ctid, jobs.version FROM jobs
    WHERE jobs.owner_id = r.owner_id AND jobs.id = r.job_id AND jobs.completed_by IS NULL AND jobs.state NOT IN ${TERMINAL_JOB_STATES_SQL} AND jobs.attempt_count = 1
      AND (jobs.stream_attempt_id IS NULL OR jobs.stream_attempt_id = r.attempt_id)
    FOR UPDATE
  ) x
),
a0 AS MATERIALIZED (
  SELECT j0.ord, j0.job_ctid, y.ctid AS attempt_ctid FROM j0 JOIN r ON r.ord = j0.ord CROSS JOIN LATERAL (
    SELECT attempts.ctid FROM attempts
    WHERE attempts.owner_id = r.owner_id AND attempts.id = r.attempt_id AND attempts.job_id = r.job_id AND attempts.base_version = j0.version
      AND attempts.state IN ('starting', 'running')
      AND attempts.lease_owner = r.lease_owner AND attempts.lease_token = r.lease_token AND attempts.lease_expires_at > r.now
    FOR UPDATE
  ) y
),
j AS (
  UPDATE jobs SET state = 'succeeded', completed_by = r.attempt_id, result = r.result::json, error = NULL,
                  version = jobs.version + 1, updated_at = r.now, finished_at = r.now
  FROM a0 JOIN r ON r.ord = a0.ord
  WHERE jobs.ctid = ANY (ARRAY(SELECT job_ctid FROM a0)) AND jobs.ctid = a0.job_ctid
    -- The attempt's locked version must be the one this statement sees: one updated meanwhile (a lease renewal that
    -- committed while a0 waited for its lock) is locked at its new ctid, which the UPDATE below cannot see, so the job
    -- would be decided by an attempt left running. Then neither applies and the caller settles the general way.
    AND EXISTS (SELECT 1 FROM attempts WHERE attempts.ctid = a0.attempt_ctid)
  RETURNING ${qualified(JOB_COLUMNS, 'jobs')}, a0.attempt_ctid, a0.ord
),
a AS (
  UPDATE attempts SET state = 'succeeded', finished_at = r.now, lease_owner = NULL, lease_expires_at = NULL,
    prompt_tokens = CASE WHEN r.with_usage THEN r.prompt_tokens ELSE attempts.prompt_tokens END,
    completion_tokens = CASE WHEN r.with_usage THEN r.completion_tokens ELSE attempts.completion_tokens END,
    total_tokens = CASE WHEN r.with_usage THEN r.total_tokens ELSE attempts.total_tokens END,
    cost_micros = CASE WHEN r.with_usage THEN r.cost_micros ELSE attempts.cost_micros END,
    provider_request_id = COALESCE(r.provider_request_id, attempts.provider_request_id)
  FROM j JOIN r ON r.ord = j.ord
  WHERE attempts.ctid = ANY (ARRAY(SELECT attempt_ctid FROM a0)) AND attempts.ctid = j.attempt_ctid
  RETURNING ${qualified(ATTEMPT_COLUMNS, 'attempts')}, r.actor, r.ord
),
e AS (
  INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
  SELECT a.owner_id, a.job_id, a.id, v.type, json_build_object('actor', a.actor), a.finished_at
  FROM a CROSS JOIN (VALUES (1, 'attempt.succeeded'), (2, 'job.succeeded')) AS v(ord, type)
  ORDER BY a.ord, v.ord
)
SELECT ${RETURNED} FROM j JOIN a ON a.ord = j.ord`,
  },
} as const;

/** Each column of {@link JOB_RETURNED} beside its prefixed name, worked out once (not per row: the split runs per create and settle). */
const JOB_KEYS: readonly (readonly [string, string])[] = JOB_COLUMNS.split(', ').map((c) => [c, `j_${c}`] as const);
const ATTEMPT_KEYS: readonly (readonly [string, string])[] = ATTEMPT_COLUMNS.split(', ').map((c) => [c, `a_${c}`] as const);

/** Splits a row of {@link JOB_RETURNED} into its job and its attempt (null when the row has none: a left join). */
export function splitJobRow(r: Record<string, unknown>): { job: Job; attempt: Attempt | null } {
  const job: Record<string, unknown> = {};
  for (const [column, key] of JOB_KEYS) job[column] = r[key];
  if (r.a_id == null) return { job: jobFromRow(job as unknown as JobRow), attempt: null };
  const attempt: Record<string, unknown> = {};
  for (const [column, key] of ATTEMPT_KEYS) attempt[column] = r[key];
  return { job: jobFromRow(job as unknown as JobRow), attempt: attemptFromRow(attempt as unknown as AttemptRow) };
}

/** {@link splitJobRow} of a row that has both. */
function split(r: Record<string, unknown>): { job: Job; attempt: Attempt } {
  const { job, attempt } = splitJobRow(r);
  if (attempt === null) throw new Error(`job ${job.id} came back without its attempt`);
  return { job, attempt };
}

/** See {@link DriverQueries.jobInsertLeased}. */
export async function jobInsertLeased(db: Queryable, row: JobInsertRow, a: FirstAttemptRow): Promise<{ job: Job; attempt: Attempt } | null> {
  const res = await db.query<Record<string, unknown>>({
    ...FAST_PATH_SQL.insertLeased,
    values: [
      row.ownerId, row.id, row.idempotencyKey, row.fingerprint, row.route, jsonValueParam(row.input), jsonParam(row.metadata),
      JSON.stringify(row.providers), row.createdAt, row.traceContext ?? null,
      a.id, a.provider, a.leaseOwner, a.leaseToken, a.now, a.leaseMs,
      a.reserve?.micros ?? null, a.reserve?.dayLimitMicros ?? null, a.reserve?.monthLimitMicros ?? null,
    ],
  });
  const r = res.rows[0];
  return r ? split(r) : null;
}

/** See {@link DriverQueries.attemptSettleWon}. */
export async function attemptSettleWon(db: Queryable, p: SettleWonParams): Promise<{ job: Job; attempt: Attempt } | null> {
  const withUsage = p.usage !== undefined;
  const res = await db.query<Record<string, unknown>>({
    ...FAST_PATH_SQL.settleWon,
    values: [
      p.ownerId, p.jobId, p.attemptId, p.leaseOwner, p.leaseToken, jsonParam(p.result),
      withUsage, p.usage?.promptTokens ?? null, p.usage?.completionTokens ?? null, p.usage?.totalTokens ?? null,
      withUsage ? (p.costMicros ?? null) : null, p.now, p.actor, p.providerRequestId ?? null,
    ],
  });
  const r = res.rows[0];
  return r ? split(r) : null;
}

/**
 * Many {@link attemptSettleWon}s in one statement; the answer maps each
 * attempt id that applied to its job and attempt (absent: nothing written
 * for it, the caller settles it the general way).
 */
export async function attemptSettleWonMany(db: Queryable, many: readonly SettleWonParams[]): Promise<Map<string, { job: Job; attempt: Attempt }>> {
  const out = new Map<string, { job: Job; attempt: Attempt }>();
  for (const [id, r] of await attemptSettleWonManyRows(db, many)) out.set(id, settledFromRow(r));
  return out;
}

/** A settled job and attempt from a row of {@link attemptSettleWonManyRows}. */
export function settledFromRow(r: Record<string, unknown>): { job: Job; attempt: Attempt } {
  return split(r);
}

/** {@link attemptSettleWonMany} with the rows as the statement returned them (by attempt id), read by the caller. */
export async function attemptSettleWonManyRows(db: Queryable, many: readonly SettleWonParams[]): Promise<Map<string, Record<string, unknown>>> {
  // Sorted by job: the rows are locked in this order, so two batches never lock in opposite orders.
  const ps = [...many].sort((x, y) => (x.jobId < y.jobId ? -1 : x.jobId > y.jobId ? 1 : 0));
  const res = await db.query<Record<string, unknown>>({
    ...FAST_PATH_SQL.settleWonMany,
    values: [
      ps.map((p) => p.ownerId), ps.map((p) => p.jobId), ps.map((p) => p.attemptId), ps.map((p) => p.leaseOwner), ps.map((p) => p.leaseToken),
      ps.map((p) => jsonParam(p.result)), ps.map((p) => p.usage !== undefined),
      ps.map((p) => p.usage?.promptTokens ?? null), ps.map((p) => p.usage?.completionTokens ?? null), ps.map((p) => p.usage?.totalTokens ?? null),
      ps.map((p) => (p.usage !== undefined ? (p.costMicros ?? null) : null)), ps.map((p) => p.now), ps.map((p) => p.actor),
      ps.map((p) => p.providerRequestId ?? null),
    ],
  });
  const out = new Map<string, Record<string, unknown>>();
  for (const r of res.rows) out.set(r.a_id as string, r);
  return out;
}
