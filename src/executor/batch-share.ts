/**
 * How an executor runs batch lines (CONTRACT §17, docs/batches.md): behind
 * interactive work, never more than `batch.maxShare` of its concurrency, and
 * never hedged. Pure; the executor asks these at its claim and its attempts.
 */
import type { Job } from '../core/types.ts';

/** Default of `batch.maxShare`: half an executor's concurrency. */
export const DEFAULT_BATCH_MAX_SHARE = 0.5;

/** Whether a job is a line of a batch. */
export function isBatchLine(job: Pick<Job, 'batchId'>): boolean {
  return job.batchId !== null && job.batchId !== undefined;
}

/**
 * How many more batch lines the executor may start now: its share of
 * `concurrency` (at least one when the share is above 0) less the batch
 * lines it runs.
 *
 * @example batchRoom(64, 0.5, 30) // 2
 */
export function batchRoom(concurrency: number, maxShare: number, batchLinesInFlight: number): number {
  if (maxShare <= 0) return 0;
  const share = Math.max(1, Math.floor(concurrency * Math.min(1, maxShare)));
  return Math.max(0, share - batchLinesInFlight);
}

/** The hedge delay of a job's attempts: its route's, except for batch lines, which are never hedged. */
export function hedgeAfterMsOf(job: Pick<Job, 'batchId'>, routeHedgeAfterMs: number | null | undefined): number | null {
  return isBatchLine(job) ? null : routeHedgeAfterMs ?? null;
}
