/**
 * The PostgreSQL driver's autocommit queries with their group commit: the
 * statements many callers issue at once (a job insert, the fast path's
 * create and settle, the reads of every replay) go through a batcher
 * (`job-insert-batcher.ts`, `read-batcher.ts`) that sends the calls waiting
 * together as one statement. Inside a transaction nothing is batched
 * (`queriesOn` alone). The SQLite driver's counterpart is
 * `../sqlite/group-commit.ts` (docs/store.md, "Group commit, today").
 */
import { OnejobError } from '../../core/errors.ts';
import type { DriverQueries, SettleWonParams } from '../driver.ts';
import { JobInsertBatcher } from './job-insert-batcher.ts';
import { isConnectionError } from './pg-errors.ts';
import { queriesOn } from './queries-on.ts';
import type { Queryable } from './queryable.ts';
import { attemptListByJobBatcher, jobGetByKeyBatcher, settleWonBatcher } from './read-batcher.ts';

/** How the autocommit queries batch (see `PostgresDriverOptions`). */
export interface BatchingOptions {
  /** Most statements of each batcher on the wire at once; 0: no batching. */
  readonly pipelines: number;
  /** Most rows (keys) waiting in each batcher. */
  readonly maxQueued: number;
  /** Whether the fast path's winning settles are batched too. */
  readonly batchSettles: boolean;
}

/** The named queries over the pool `db`, the hot ones batched as `options` say. */
export function batchedQueriesOn(db: Queryable, options: BatchingOptions): DriverQueries {
  const { pipelines, maxQueued } = options;
  if (pipelines <= 0) return queriesOn(db);
  const batcher = new JobInsertBatcher(db, { maxInFlight: pipelines, maxQueued, isConnectionError: (e) => isConnectionError(e) || e instanceof OnejobError });
  // The reads every replay makes (by key, then the attempts) are coalesced the same way.
  const byKey = jobGetByKeyBatcher(db, pipelines, maxQueued);
  const attemptsOf = attemptListByJobBatcher(db, pipelines, maxQueued);
  // Concurrent fast-path settles are group-committed the same way (each its own row of one statement).
  const settles = settleWonBatcher(db, pipelines, maxQueued);
  return {
    ...queriesOn(db),
    jobInsert: async (row) => (await batcher.insert(row))?.job ?? null,
    jobInsertLeased: async (row, attempt) => {
      const r = await batcher.insert(row, attempt);
      return r && r.attempt ? { job: r.job, attempt: r.attempt } : null;
    },
    // Callers sharing one read each get their own copy.
    jobGetByKey: async (ownerId, key) => {
      const job = await byKey.get([ownerId, key]);
      return job && { ...job };
    },
    ...(options.batchSettles ? { attemptSettleWon: (params: SettleWonParams) => settles.get(params) } : {}),
    attemptListByJob: async (ownerId, jobId) => (await attemptsOf.get([ownerId, jobId])).map((a) => ({ ...a })),
  };
}
