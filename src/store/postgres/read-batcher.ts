/**
 * Coalesced autocommit statements (PostgreSQL): a hot read that many callers
 * issue at once (1,000 replays of one Idempotency-Key all read the job by key
 * and its attempts) leaves as one statement per batch instead of one per
 * caller; so do concurrent independent writes (the fast path's settles: each
 * its own key, never shared, one commit for the batch).
 *
 * At most `maxInFlight` statements are on the wire; calls arriving meanwhile
 * wait in a queue and are sent together, identical keys once. A read is
 * always SENT after its call was made, so it sees everything committed before
 * the call, exactly like the single statement it replaces (a batch never
 * reuses a statement that was already running when the call arrived). A
 * batch of one runs the single-row query as before. If a batched statement
 * fails, each call is retried alone, so an error reaches only its caller.
 */
import { OnejobError } from '../../core/errors.ts';
import type { Attempt, Job } from '../../core/types.ts';
import type { SettleWonParams } from '../driver.ts';
import { attemptListByJob } from './attempt-queries.ts';
import { attemptSettleWon, attemptSettleWonMany } from './fast-path-queries.ts';
import { jobGetByKey } from './job-queries.ts';
import type { Queryable } from './queryable.ts';
import { ATTEMPT_COLUMNS, attemptFromRow, JOB_COLUMNS, jobFromRow, type AttemptRow, type JobRow } from './row-mappers.ts';

/** Options of {@link ReadBatcher}. */
export interface ReadBatcherOptions<K, V> {
  /** A stable string for a key (equal keys share one read). */
  readonly keyOf: (key: K) => string;
  /** The single-key query. */
  readonly one: (key: K) => Promise<V>;
  /** The many-key query: a result for every key given (by `keyOf`). */
  readonly many: (keys: readonly K[]) => Promise<Map<string, V>>;
  /** Most statements on the wire at once. Default 2. */
  readonly maxInFlight?: number | undefined;
  /** Most distinct keys in one statement. Default 500. */
  readonly maxBatch?: number | undefined;
  /** Most distinct keys waiting; a call for one more is refused at once with `unavailable`. Default 2 000. */
  readonly maxQueued?: number | undefined;
}

interface Waiter<V> {
  readonly resolve: (v: V) => void;
  readonly reject: (e: unknown) => void;
}

/** See the module comment. */
export class ReadBatcher<K, V> {
  readonly #o: Required<ReadBatcherOptions<K, V>>;
  /** Keys not yet sent, in arrival order, with their waiters. */
  #queue = new Map<string, { key: K; waiters: Waiter<V>[] }>();
  #inFlight = 0;

  constructor(options: ReadBatcherOptions<K, V>) {
    this.#o = {
      ...options,
      maxInFlight: Math.max(1, options.maxInFlight ?? 2),
      maxBatch: Math.max(1, options.maxBatch ?? 500),
      maxQueued: Math.max(1, options.maxQueued ?? 2_000),
    };
  }

  /** Distinct keys waiting to be sent. */
  get queued(): number {
    return this.#queue.size;
  }

  /** The value for `key`. @throws OnejobError `unavailable` (rejects) when `maxQueued` keys already wait. */
  get(key: K): Promise<V> {
    const k = this.#o.keyOf(key);
    if (!this.#queue.has(k) && this.#queue.size >= this.#o.maxQueued && this.#inFlight >= this.#o.maxInFlight) {
      return Promise.reject(new OnejobError('unavailable', `${this.#queue.size} reads are already waiting for the database`));
    }
    return new Promise((resolve, reject) => {
      const entry = this.#queue.get(k);
      if (entry) entry.waiters.push({ resolve, reject });
      else this.#queue.set(k, { key, waiters: [{ resolve, reject }] });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#o.maxInFlight && this.#queue.size > 0) {
      const batch: [string, { key: K; waiters: Waiter<V>[] }][] = [];
      for (const e of this.#queue) {
        batch.push(e);
        if (batch.length >= this.#o.maxBatch) break;
      }
      for (const [k] of batch) this.#queue.delete(k);
      this.#inFlight++;
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  async #run(batch: readonly [string, { key: K; waiters: Waiter<V>[] }][]): Promise<void> {
    const settleOne = async (key: K, waiters: readonly Waiter<V>[]): Promise<void> => {
      try {
        const v = await this.#o.one(key);
        for (const w of waiters) w.resolve(v);
      } catch (e) {
        for (const w of waiters) w.reject(e);
      }
    };
    if (batch.length === 1) {
      const [, { key, waiters }] = batch[0]!;
      await settleOne(key, waiters);
      return;
    }
    let results: Map<string, V>;
    try {
      results = await this.#o.many(batch.map(([, e]) => e.key));
    } catch (e) {
      // A lost connection fails every waiter at once; anything else is retried key by key.
      if (e instanceof OnejobError) {
        for (const [, entry] of batch) for (const w of entry.waiters) w.reject(e);
        return;
      }
      await Promise.all(batch.map(([, e]) => settleOne(e.key, e.waiters)));
      return;
    }
    for (const [k, e] of batch) {
      const v = results.get(k) as V;
      for (const w of e.waiters) w.resolve(v);
    }
  }
}

// ---- the coalesced reads of the driver -------------------------------------


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

type Pair = readonly [string, string];
const pairKey = (p: Pair): string => `${p[0].length}:${p[0]}\u0000${p[1]}`;

/** `jobGetByKey` coalesced over `db` (autocommit only). */
export function jobGetByKeyBatcher(db: Queryable, maxInFlight?: number, maxQueued?: number): ReadBatcher<Pair, Job | null> {
  return new ReadBatcher<Pair, Job | null>({
    keyOf: pairKey,
    maxInFlight,
    maxQueued,
    one: ([ownerId, key]) => jobGetByKey(db, ownerId, key),
    many: async (pairs) => {
      const res = await db.query<JobRow>({ ...JOB_GET_BY_KEYS_SQL, values: [pairs.map((p) => p[0]), pairs.map((p) => p[1])] });
      const out = new Map<string, Job | null>(pairs.map((p) => [pairKey(p), null]));
      for (const r of res.rows) out.set(pairKey([r.owner_id, r.idempotency_key]), jobFromRow(r));
      return out;
    },
  });
}

/** `attemptListByJob` coalesced over `db` (autocommit only). */
export function attemptListByJobBatcher(db: Queryable, maxInFlight?: number, maxQueued?: number): ReadBatcher<Pair, Attempt[]> {
  return new ReadBatcher<Pair, Attempt[]>({
    keyOf: pairKey,
    maxInFlight,
    maxQueued,
    one: ([ownerId, jobId]) => attemptListByJob(db, ownerId, jobId),
    many: async (pairs) => {
      const res = await db.query<AttemptRow>({ ...ATTEMPT_LIST_BY_JOB_PAIRS_SQL, values: [pairs.map((p) => p[0]), pairs.map((p) => p[1])] });
      const out = new Map<string, Attempt[]>(pairs.map((p) => [pairKey(p), []]));
      for (const r of res.rows) out.get(pairKey([r.owner_id, r.job_id]))?.push(attemptFromRow(r));
      return out;
    },
  });
}

/**
 * The fast path's winning settle (`attemptSettleWon`) group-committed over
 * `db` (autocommit only): concurrent settles leave as one statement. Each
 * call is its own key: two calls never share an answer.
 */
export function settleWonBatcher(db: Queryable, maxInFlight?: number, maxQueued?: number): ReadBatcher<SettleWonParams, { job: Job; attempt: Attempt } | null> {
  let seq = 0;
  const keys = new WeakMap<SettleWonParams, string>();
  const keyOf = (p: SettleWonParams): string => {
    let k = keys.get(p);
    if (k === undefined) keys.set(p, (k = `${p.attemptId}\u0000${seq++}`));
    return k;
  };
  return new ReadBatcher<SettleWonParams, { job: Job; attempt: Attempt } | null>({
    keyOf,
    maxInFlight,
    maxQueued,
    one: (p) => attemptSettleWon(db, p),
    many: async (ps) => {
      const applied = await attemptSettleWonMany(db, ps);
      return new Map(ps.map((p) => [keyOf(p), applied.get(p.attemptId) ?? null]));
    },
  });
}
