/**
 * The PostgreSQL driver's statements for many calls at once, and its lanes
 * of the group commit above the drivers (`../batched-queries.ts`): each
 * lane's `many` runs a list of calls as ONE autocommit statement (one round
 * trip, one commit).
 *
 * - Job inserts (`jobInsert`, `jobInsertLeased`, mixed): one multi-row
 *   `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING RETURNING …`.
 *   Per row, the semantics of the single-row statement: each call gets its
 *   own job or `null` (the key exists); of calls with the same (owner, key)
 *   in one batch the earliest inserts and the later get `null`, exactly as
 *   one after another; rows go sorted by (owner, key), so two batches take
 *   index locks in the same order and cannot deadlock on each other.
 * - Reads by key (`jobGetByKey`) and attempts of a job (`attemptListByJob`):
 *   one `… IN (SELECT * FROM unnest(…))` each.
 * - The fast path's winning settles (`attemptSettleWon`): one statement
 *   (`attemptSettleWonManyRows`), each settle applying or not on its own.
 *
 * Durability is unchanged: a call is answered only after the statement that
 * carries it has committed.
 */
import type { Attempt, Job } from '../../core/types.ts';
import { pairKey, type BatchedCall, type BatchLane } from '../batched-queries.ts';
import { ItemFailed } from '../batcher.ts';
import { budgetRefused, isBudgetRefusal } from '../spend-refusal.ts';
import type { FirstAttemptRow, JobInsertRow, SettleWonParams } from '../driver.ts';
import { attemptSettleWonManyRows, FIRST_ATTEMPT_EVENT, JOB_RETURNED, settledFromRow, splitJobRow } from './fast-path-queries.ts';
import type { QueryResultRow } from 'pg';
import type { Queryable } from './queryable.ts';
import { ATTEMPT_COLUMNS, attemptFromRow, JOB_COLUMNS, jobFromRow, jsonParam, jsonValueParam, type AttemptRow, type JobRow } from './row-mappers.ts';

/**
 * The multi-row form of `JOB_SQL.insert` and of the fast path's
 * `insertLeased`: one array parameter per column, one row per element. A row
 * with an attempt id is written `running` with its first attempt leased and
 * the attempt's event (as `FAST_PATH_SQL.insertLeased`), one without `queued`.
 */
export const JOB_INSERT_MANY_SQL = {
  name: 'onejob_job_insert_many',
  text: `WITH r AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::text[],
                       $11::text[], $12::text[], $13::text[], $14::text[], $15::int8[], $16::timestamptz[],
                       $17::int8[], $18::int8[], $19::int8[])
  WITH ORDINALITY AS r(owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, created_at, trace_context,
                       attempt_id, provider, lease_owner, lease_token, lease_ms, now, reserve_micros, limit_day, limit_month, ord)
),
j AS (
  INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers,
                    state, version, attempt_count, skipped, created_at, updated_at, trace_context)
  SELECT r.owner_id, r.id, r.idempotency_key, r.fingerprint, r.route, r.input::json, r.metadata::json, r.providers::json,
         CASE WHEN r.attempt_id IS NULL THEN 'queued' ELSE 'running' END, 0, CASE WHEN r.attempt_id IS NULL THEN 0 ELSE 1 END,
         '[]', r.created_at, r.created_at, r.trace_context
  FROM r
  ORDER BY r.ord
  ON CONFLICT (owner_id, idempotency_key) DO NOTHING
  RETURNING ${JOB_COLUMNS}
),
a AS (
  INSERT INTO attempts (owner_id, id, job_id, number, provider, kind, state, base_version, started_at, deadline_at,
                        lease_owner, lease_token, lease_expires_at, reserve_micros, spend_limit_day_micros, spend_limit_month_micros)
  SELECT j.owner_id, r.attempt_id, j.id, 1, r.provider, 'first', 'starting', 0, t.now, NULL,
         r.lease_owner, r.lease_token, t.now + r.lease_ms * interval '1 millisecond', r.reserve_micros, r.limit_day, r.limit_month
  FROM j JOIN r ON r.id = j.id CROSS JOIN LATERAL (SELECT COALESCE(r.now, clock_timestamp()) AS now) t
  WHERE r.attempt_id IS NOT NULL
  RETURNING ${ATTEMPT_COLUMNS}
),
e AS (${FIRST_ATTEMPT_EVENT})
-- A job whose first attempt the spend reservation refused fails the statement (CONTRACT §16): the batch is run again call by call.
SELECT ${JOB_RETURNED} FROM j JOIN r ON r.id = j.id LEFT JOIN a ON a.job_id = j.id
WHERE r.attempt_id IS NULL OR onejob_first_attempt_reserved(a.id IS NOT NULL)`,
} as const;

/** Many `jobGetByKey`s in one statement. */
export const JOB_GET_BY_KEYS_SQL = {
  name: 'onejob_job_get_by_keys',
  text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE (owner_id, idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
} as const;

/** Many `attemptListByJob`s in one statement. */
export const ATTEMPT_LIST_BY_JOB_PAIRS_SQL = {
  name: 'onejob_attempt_list_by_job_pairs',
  text: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE (owner_id, job_id) IN (SELECT * FROM unnest($1::text[], $2::text[])) ORDER BY owner_id, job_id, number`,
} as const;

type InsertCall = Extract<BatchedCall, { method: 'jobInsert' | 'jobInsertLeased' }>;
type Inserted = { readonly job: Job; readonly attempt: Attempt | null };

/** The (owner, key-or-job) pairs of read calls, and the rows `sql` answers for all of them in one statement. */
async function readPairs<Row extends QueryResultRow>(db: Queryable, sql: { name: string; text: string }, calls: readonly BatchedCall[]): Promise<{ pairs: [string, string][]; rows: Row[] }> {
  const pairs = calls.map((c) => c.args as [string, string]);
  const res = await db.query<Row>({ ...sql, values: [pairs.map((p) => p[0]), pairs.map((p) => p[1])] });
  return { pairs, rows: res.rows };
}

/**
 * Many job inserts (with or without their first attempt) in one statement: per call its job, `{ job, attempt }`, or null.
 * A first attempt the spend limit refuses fails the statement (nothing of the batch is written); the calls are then
 * written one after another on this lane (not all at once: a burst past a budget would take every connection of the
 * pool), each refused one failing alone with `budget_exceeded` (CONTRACT §16).
 */
export async function jobInsertMany(db: Queryable, calls: readonly InsertCall[]): Promise<unknown[]> {
  try {
    return await jobInsertManyOnce(db, calls);
  } catch (e) {
    if (calls.length === 1 || !isBudgetRefusal(e)) throw e;
    const out: unknown[] = [];
    for (const c of calls) {
      try {
        out.push((await jobInsertManyOnce(db, [c]))[0]);
      } catch (one) {
        if (!isBudgetRefusal(one)) throw one;
        out.push(new ItemFailed(budgetRefused()));
      }
    }
    return out;
  }
}

async function jobInsertManyOnce(db: Queryable, calls: readonly InsertCall[]): Promise<unknown[]> {
  // The first call per (owner, key) goes to the database; the later ones lose to it, as they would one by one.
  const firsts = new Map<string, { row: JobInsertRow; attempt: FirstAttemptRow | undefined }>();
  for (const c of calls) {
    const row = c.args[0];
    const k = pairKey(row.ownerId, row.idempotencyKey);
    if (!firsts.has(k)) firsts.set(k, { row, attempt: c.method === 'jobInsertLeased' ? c.args[1] : undefined });
  }
  const sorted = [...firsts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, p]) => p);
  const rows = sorted.map((p) => p.row);
  const attempts = sorted.map((p) => p.attempt);
  const res = await db.query<Record<string, unknown>>({
    ...JOB_INSERT_MANY_SQL,
    values: [
      rows.map((r) => r.ownerId),
      rows.map((r) => r.id),
      rows.map((r) => r.idempotencyKey),
      rows.map((r) => r.fingerprint),
      rows.map((r) => r.route),
      rows.map((r) => jsonValueParam(r.input)),
      rows.map((r) => jsonParam(r.metadata)),
      rows.map((r) => JSON.stringify(r.providers)),
      rows.map((r) => r.createdAt),
      rows.map((r) => r.traceContext ?? null),
      attempts.map((a) => a?.id ?? null),
      attempts.map((a) => a?.provider ?? null),
      attempts.map((a) => a?.leaseOwner ?? null),
      attempts.map((a) => a?.leaseToken ?? null),
      attempts.map((a) => a?.leaseMs ?? null),
      attempts.map((a) => a?.now ?? null),
      attempts.map((a) => a?.reserve?.micros ?? null),
      attempts.map((a) => a?.reserve?.dayLimitMicros ?? null),
      attempts.map((a) => a?.reserve?.monthLimitMicros ?? null),
    ],
  });
  const inserted = new Map<string, Record<string, unknown>>();
  for (const r of res.rows) inserted.set(r.j_id as string, r);
  // A call whose row id was inserted is the one that inserted it (a loser's row has its own id). Rows are read by each caller ({@link insertedAnswer}).
  return calls.map((c) => inserted.get(c.args[0].id) ?? null);
}

/** A job insert's answer from its row of {@link jobInsertMany} (or null). */
function insertedAnswer(c: BatchedCall, row: unknown): unknown {
  if (row === null) return null;
  const got: Inserted = splitJobRow(row as Record<string, unknown>);
  if (c.method === 'jobInsert') return got.job;
  return got.attempt ? { job: got.job, attempt: got.attempt } : null;
}

/**
 * The PostgreSQL lanes over the pool `db`: `pipelines` statements of each lane on the wire at most, those beyond the first
 * only once the newest has been out `spareAfterMs` (0: at once).
 */
export function postgresLanes(db: Queryable, options: { readonly pipelines: number; readonly spareAfterMs: number; readonly batchSettles: boolean }): BatchLane[] {
  const { pipelines } = options;
  const spareAfterMs = options.spareAfterMs > 0 ? options.spareAfterMs : undefined;
  const lanes: BatchLane[] = [
    {
      methods: ['jobInsert', 'jobInsertLeased'],
      maxInFlight: pipelines,
      spareAfterMs,
      maxBatch: 500,
      many: (calls) => jobInsertMany(db, calls as InsertCall[]),
      answer: insertedAnswer,
    },
    {
      methods: ['jobGetByKey'],
      maxInFlight: pipelines,
      spareAfterMs,
      maxBatch: 500,
      many: async (calls) => {
        const { pairs, rows } = await readPairs<JobRow>(db, JOB_GET_BY_KEYS_SQL, calls);
        const byKey = new Map<string, Job>();
        for (const r of rows) byKey.set(pairKey(r.owner_id, r.idempotency_key), jobFromRow(r));
        return pairs.map(([o, k]) => byKey.get(pairKey(o, k)) ?? null);
      },
    },
    {
      methods: ['attemptListByJob'],
      maxInFlight: pipelines,
      spareAfterMs,
      maxBatch: 500,
      many: async (calls) => {
        const { pairs, rows } = await readPairs<AttemptRow>(db, ATTEMPT_LIST_BY_JOB_PAIRS_SQL, calls);
        const byJob = new Map<string, Attempt[]>(pairs.map(([o, j]) => [pairKey(o, j), []]));
        for (const r of rows) byJob.get(pairKey(r.owner_id, r.job_id))?.push(attemptFromRow(r));
        return pairs.map(([o, j]) => byJob.get(pairKey(o, j))!);
      },
    },
  ];
  if (options.batchSettles) {
    lanes.push({
      methods: ['attemptSettleWon'],
      maxInFlight: pipelines,
      spareAfterMs,
      maxBatch: 500,
      many: async (calls) => {
        const ps = calls.map((c) => c.args[0] as SettleWonParams);
        const applied = await attemptSettleWonManyRows(db, ps);
        return ps.map((p) => applied.get(p.attemptId) ?? null);
      },
      answer: (_c, row) => (row === null ? null : settledFromRow(row as Record<string, unknown>)),
    });
  }
  return lanes;
}
