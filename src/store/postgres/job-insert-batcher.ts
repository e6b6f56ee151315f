/**
 * Group commit for keyed job creation (PostgreSQL).
 *
 * `jobInsert` outside a transaction is the hot path of `POST /v1/jobs`: one
 * autocommit `INSERT … ON CONFLICT DO NOTHING` per request, each paying a
 * round trip and a WAL flush. The batcher keeps at most `maxInFlight`
 * statements on the wire; calls that arrive while they run wait in a queue
 * and leave together as ONE multi-row statement (`INSERT … SELECT FROM
 * unnest(…) ON CONFLICT DO NOTHING RETURNING …`), committed once. Under low
 * load nothing waits (a batch of one is the single-row statement, sent at
 * once); under high load a commit carries many rows.
 *
 * Semantics are those of the single-row statement, per row:
 * - each call gets its own job (inserted) or `null` (the key exists);
 * - rows with the same (owner, key) in one batch: the earliest call inserts,
 *   the later ones get `null` (exactly as if they had run one after another);
 * - rows are sent sorted by (owner, key), so two batches always take index
 *   locks in the same order and cannot deadlock on each other;
 * - if a multi-row statement fails for any reason other than a lost
 *   connection, every row of it is retried alone, so an error (a CHECK
 *   violation, say) reaches only the call whose row caused it.
 * The queue is bounded (`maxQueued`): past it a call is refused at once with
 * `unavailable`, so a database that stops answering costs bounded memory and
 * the API answers `503` instead of holding requests for ever.
 * Durability is unchanged: a call resolves only after the statement that
 * carries its row has committed.
 */
import { OnejobError } from '../../core/errors.ts';
import type { Attempt, Job } from '../../core/types.ts';
import type { FirstAttemptRow, JobInsertRow } from '../driver.ts';
import { FIRST_ATTEMPT_EVENT, JOB_RETURNED, jobInsertLeased, splitJobRow } from './fast-path-queries.ts';
import { jobInsert } from './job-queries.ts';
import { ATTEMPT_COLUMNS, JOB_COLUMNS, jsonParam, jsonValueParam } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';

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
                       $11::text[], $12::text[], $13::text[], $14::text[], $15::int8[], $16::timestamptz[])
  WITH ORDINALITY AS r(owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, created_at, trace_context,
                       attempt_id, provider, lease_owner, lease_token, lease_ms, now, ord)
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
                        lease_owner, lease_token, lease_expires_at)
  SELECT j.owner_id, r.attempt_id, j.id, 1, r.provider, 'first', 'starting', 0, t.now, NULL,
         r.lease_owner, r.lease_token, t.now + r.lease_ms * interval '1 millisecond'
  FROM j JOIN r ON r.id = j.id CROSS JOIN LATERAL (SELECT COALESCE(r.now, clock_timestamp()) AS now) t
  WHERE r.attempt_id IS NOT NULL
  RETURNING ${ATTEMPT_COLUMNS}
),
e AS (${FIRST_ATTEMPT_EVENT})
SELECT ${JOB_RETURNED} FROM j LEFT JOIN a ON a.job_id = j.id`,
} as const;

/** Options of {@link JobInsertBatcher}. */
export interface JobInsertBatcherOptions {
  /** Most statements on the wire at once (each holds a pooled connection). Default 4. */
  readonly maxInFlight?: number | undefined;
  /** Most rows in one statement. Default 500. */
  readonly maxBatch?: number | undefined;
  /**
   * Most rows waiting (not yet sent); one more is refused at once with
   * `unavailable`, before anything reaches the database. Default 2 000.
   */
  readonly maxQueued?: number | undefined;
  /** Whether an error means the connection is gone (then the batch is not retried row by row). */
  readonly isConnectionError?: ((e: unknown) => boolean) | undefined;
}

/** What an insert answers: the new job (with its first attempt when one was asked for), or null (the key exists). */
export type InsertedJob = { readonly job: Job; readonly attempt: Attempt | null } | null;

interface Pending {
  readonly row: JobInsertRow;
  /** The fast path's first attempt, leased with the job. */
  readonly attempt: FirstAttemptRow | undefined;
  readonly resolve: (inserted: InsertedJob) => void;
  readonly reject: (e: unknown) => void;
}

/** See the module comment. One per driver, over the driver's pool. */
export class JobInsertBatcher {
  readonly #db: Queryable;
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  readonly #maxQueued: number;
  readonly #isConnectionError: (e: unknown) => boolean;
  #queue: Pending[] = [];
  #inFlight = 0;

  constructor(db: Queryable, options: JobInsertBatcherOptions = {}) {
    this.#db = db;
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 4);
    this.#maxBatch = Math.max(1, options.maxBatch ?? 500);
    this.#maxQueued = Math.max(1, options.maxQueued ?? 2_000);
    this.#isConnectionError = options.isConnectionError ?? (() => false);
  }

  /** Rows waiting to be sent. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Same contract as `DriverQueries.jobInsert`.
   *
   * @throws OnejobError `unavailable` (the promise rejects) when `maxQueued` rows already wait: nothing was sent.
   */
  insert(row: JobInsertRow, attempt?: FirstAttemptRow): Promise<InsertedJob> {
    if (this.#queue.length >= this.#maxQueued && this.#inFlight >= this.#maxInFlight) {
      return Promise.reject(new OnejobError('unavailable', `${this.#queue.length} job inserts are already waiting for the database`));
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ row, attempt, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
      this.#queue = batch === this.#queue ? [] : this.#queue.slice(batch.length);
      this.#inFlight++;
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  async #run(batch: readonly Pending[]): Promise<void> {
    if (batch.length === 1) {
      const only = batch[0]!;
      await insertOne(this.#db, only).then(only.resolve, only.reject);
      return;
    }
    // First call per (owner, key) goes to the database; later ones lose to it, as they would one by one.
    const firsts = new Map<string, Pending>();
    const losers: Pending[] = [];
    for (const p of batch) {
      const k = keyOf(p.row);
      if (firsts.has(k)) losers.push(p);
      else firsts.set(k, p);
    }
    const sorted = [...firsts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, p]) => p);
    let inserted: Map<string, NonNullable<InsertedJob>>;
    try {
      inserted = await this.#insertMany(sorted);
    } catch (e) {
      if (this.#isConnectionError(e)) {
        for (const p of batch) p.reject(e);
        return;
      }
      // Row by row, so only the offending call sees its error.
      await Promise.all(batch.map((p) => insertOne(this.#db, p).then(p.resolve, p.reject)));
      return;
    }
    for (const p of sorted) p.resolve(inserted.get(p.row.id) ?? null);
    for (const p of losers) p.resolve(null);
  }

  async #insertMany(batch: readonly Pending[]): Promise<Map<string, NonNullable<InsertedJob>>> {
    const rows = batch.map((p) => p.row);
    const attempts = batch.map((p) => p.attempt);
    const res = await this.#db.query<Record<string, unknown>>({
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
      ],
    });
    const out = new Map<string, NonNullable<InsertedJob>>();
    for (const r of res.rows) {
      const split = splitJobRow(r);
      out.set(split.job.id, split);
    }
    return out;
  }
}

/** One row by the single-row statement of its kind. */
async function insertOne(db: Queryable, p: Pending): Promise<InsertedJob> {
  if (p.attempt) return jobInsertLeased(db, p.row, p.attempt);
  const job = await jobInsert(db, p.row);
  return job && { job, attempt: null };
}

function keyOf(row: JobInsertRow): string {
  return `${row.ownerId.length}:${row.ownerId}\u0000${row.idempotencyKey}`;
}
