/**
 * The named queries of files and batches (CONTRACT §17, migration 0015), one
 * implementation per driver (`postgres/batch-queries.ts`,
 * `sqlite/batch-queries.ts`), part of every {@link DriverQueries} (autocommit
 * or a transaction's). Internal; `store/batch-store.ts` is the surface.
 * See docs/batches.md.
 *
 * Every statement filters by `owner_id` except `batchListOpen` and
 * `jobListQueuedBatchLines` (the runner's and the executors' cross-owner
 * work queries) and `batchRetentionDelete`.
 */
import type { Job } from '../core/types.ts';
import type { JobInsertRow } from './driver.ts';

/** The statuses of a Batch object (OpenAI's). */
export type BatchStatus = 'validating' | 'in_progress' | 'finalizing' | 'completed' | 'cancelling' | 'cancelled' | 'expired' | 'failed';

/** The statuses a batch ends in. */
export const TERMINAL_BATCH_STATUSES: readonly BatchStatus[] = ['completed', 'cancelled', 'expired', 'failed'];

/** A `files` row. */
export interface FileRow {
  readonly ownerId: string;
  readonly id: string;
  readonly purpose: 'batch' | 'batch_output';
  readonly filename: string;
  readonly bytes: number;
  readonly lineCount: number;
  /** The distinct `url`s of its lines. */
  readonly endpoints: readonly string[];
  readonly status: 'uploading' | 'processed';
  readonly batchId: string | null;
  readonly kind: 'upload' | 'output' | 'error';
  readonly createdAt: Date;
}

/** One stored line of an upload. */
export interface FileLineRow {
  readonly ownerId: string;
  readonly fileId: string;
  readonly lineNo: number;
  readonly customId: string;
  readonly url: string;
  readonly route: string;
  /** The line's text exactly as uploaded. */
  readonly line: string;
}

/** A `batches` row. */
export interface BatchRow {
  readonly ownerId: string;
  readonly id: string;
  readonly idempotencyKey: string;
  readonly fingerprint: string;
  readonly inputFileId: string;
  readonly endpoint: string;
  readonly completionWindow: string;
  readonly metadata: Record<string, unknown> | null;
  readonly status: BatchStatus;
  readonly lineCount: number;
  readonly linesCreated: number;
  readonly outputFileId: string | null;
  readonly errorFileId: string | null;
  readonly errors: unknown;
  readonly createdAt: Date;
  readonly expiresAt: Date;
  readonly inProgressAt: Date | null;
  readonly finalizingAt: Date | null;
  readonly completedAt: Date | null;
  readonly failedAt: Date | null;
  readonly expiredAt: Date | null;
  readonly cancellingAt: Date | null;
  readonly cancelledAt: Date | null;
  readonly finishedAt: Date | null;
}

/** A new batch. */
export type BatchInsertRow = Pick<BatchRow,
  'ownerId' | 'id' | 'idempotencyKey' | 'fingerprint' | 'inputFileId' | 'endpoint' | 'completionWindow' | 'metadata' | 'lineCount' | 'createdAt' | 'expiresAt'>;

/** A line of a batch: the job it became and, once finished, its output line. */
export interface BatchLineRow {
  readonly ownerId: string;
  readonly batchId: string;
  readonly lineNo: number;
  readonly customId: string;
  /** Null: the line's key was held by a job that is not this batch's (an error line). */
  readonly jobId: string | null;
  readonly outcome: 'output' | 'error' | null;
  readonly output: string | null;
}

/** A status change of {@link BatchQueries.batchSetStatus}; the status's own timestamp is set with it. */
export interface BatchStatusChange {
  readonly ownerId: string;
  readonly id: string;
  readonly from: readonly BatchStatus[];
  readonly to: BatchStatus;
  readonly now: Date;
  readonly outputFileId?: string | null | undefined;
  readonly errorFileId?: string | null | undefined;
}

/** The timestamp column each status sets. */
export const BATCH_STATUS_COLUMN: Readonly<Partial<Record<BatchStatus, string>>> = {
  in_progress: 'in_progress_at',
  finalizing: 'finalizing_at',
  completed: 'completed_at',
  failed: 'failed_at',
  expired: 'expired_at',
  cancelling: 'cancelling_at',
  cancelled: 'cancelled_at',
};

/** Counts of a batch's lines by outcome. */
export interface BatchCounts {
  /** Lines created (rows of `batch_lines`). */
  readonly lines: number;
  readonly outputs: number;
  readonly errors: number;
}

export interface BatchQueries {
  fileInsert(row: FileRow): Promise<void>;
  /** Many lines in one statement. */
  fileLinesInsert(rows: readonly FileLineRow[]): Promise<void>;
  /** `uploading` → `processed` with its totals; false when it was not uploading. */
  filePublish(p: { ownerId: string; id: string; bytes: number; lineCount: number; endpoints: readonly string[] }): Promise<boolean>;
  /** Deletes a file and its lines. */
  fileDelete(ownerId: string, id: string): Promise<void>;
  fileGet(ownerId: string, id: string): Promise<FileRow | null>;
  /** Lines after `afterLineNo`, in order. */
  fileLinesPage(ownerId: string, fileId: string, afterLineNo: number, limit: number): Promise<FileLineRow[]>;

  /** `INSERT … ON CONFLICT (owner_id, idempotency_key) DO NOTHING`: null when the key already had a batch. */
  batchInsert(row: BatchInsertRow): Promise<BatchRow | null>;
  batchGet(ownerId: string, id: string): Promise<BatchRow | null>;
  batchGetByKey(ownerId: string, key: string): Promise<BatchRow | null>;
  /** Newest first; rows strictly after `after` in (created_at DESC, id DESC) order. */
  batchList(p: { ownerId: string; limit: number; after?: { createdAt: Date; id: string } | undefined }): Promise<BatchRow[]>;
  /** Every owner's unfinished batches, oldest first (the runner). */
  batchListOpen(limit: number): Promise<BatchRow[]>;
  /** The page cursor's compare-and-swap: `lines_created` from → to, `validating` → `in_progress`. */
  batchAdvanceLines(p: { ownerId: string; id: string; from: number; to: number; now: Date }): Promise<boolean>;
  batchSetStatus(p: BatchStatusChange): Promise<boolean>;

  /** Batch line jobs, `queued`, in one statement; answers the keys it inserted. */
  batchJobsInsert(rows: readonly (JobInsertRow & { readonly batchId: string })[]): Promise<string[]>;
  /** The jobs holding these keys. */
  jobsByKeys(ownerId: string, keys: readonly string[]): Promise<{ id: string; idempotencyKey: string; batchId: string | null }[]>;
  batchLinesInsert(rows: readonly BatchLineRow[]): Promise<void>;
  /** Lines without an outcome whose job is terminal (or that have no job), in order. */
  batchLinesFinished(ownerId: string, batchId: string, limit: number): Promise<BatchLineRow[]>;
  /** Ids of the batch's jobs in these states. */
  batchJobIdsInStates(ownerId: string, batchId: string, states: readonly string[], limit: number): Promise<string[]>;
  /** Sets a line's outcome once (`WHERE outcome IS NULL`). */
  batchLineFinish(p: { ownerId: string; batchId: string; lineNo: number; outcome: 'output' | 'error'; output: string }): Promise<boolean>;
  batchCounts(ownerId: string, batchId: string): Promise<BatchCounts>;
  /** Sum of `cost_micros` over the attempts of the batch's jobs; null when none is priced. */
  batchCostMicros(ownerId: string, batchId: string): Promise<number | null>;
  /** Bytes of the file of one outcome's lines (each line and its newline). */
  batchOutputBytes(ownerId: string, batchId: string, outcome: 'output' | 'error'): Promise<number>;
  /** Rendered lines of one outcome after `afterLineNo`, in line order. */
  batchOutputPage(ownerId: string, batchId: string, outcome: 'output' | 'error', afterLineNo: number, limit: number): Promise<{ lineNo: number; output: string }[]>;

  /**
   * Queued jobs of batches that are `in_progress` and not past `expires_at`
   * (at `now`), oldest first; PostgreSQL locks them `FOR UPDATE SKIP LOCKED`.
   */
  jobListQueuedBatchLines(limit: number, now: Date): Promise<Job[]>;

  /**
   * Retention: deletes up to `limit` batches finished more than `olderThanMs`
   * ago with their lines and files, and uploads left `uploading` for over an
   * hour; answers how many batches and files.
   */
  batchRetentionDelete(p: { olderThanMs: number; limit: number; now: Date | null }): Promise<{ batches: number; files: number }>;
}
