/**
 * {@link BatchStore}: files and batches (CONTRACT §17) over a driver, on
 * both engines. Every multi-row step is one transaction of a bounded page;
 * every step is safe to run again after a crash. See docs/batches.md.
 */
import { OnejobError } from '../core/errors.ts';
import type { Clock } from '../core/clock.ts';
import type { Attempt, Job, JobWithAttempts } from '../core/types.ts';
import type { Driver, JobInsertRow } from './driver.ts';
import type { BatchCounts, BatchInsertRow, BatchLineRow, BatchRow, BatchStatus, FileLineRow, FileRow } from './batch-queries.ts';

/** Lines per page: one transaction each, on upload and at line creation. */
export const BATCH_PAGE = 500;

/** A batch with what its Batch object counts. */
export interface BatchView {
  readonly batch: BatchRow;
  readonly counts: BatchCounts;
  readonly costMicros: number | null;
}

/** What a line becomes, decided by the caller (the runner knows the routes). */
export type LineJobRow = Pick<JobInsertRow, 'route' | 'input' | 'metadata' | 'providers' | 'fingerprint'>;

/** The job of a finished line, with its attempts, or null when the line has none. */
export interface FinishedLine {
  readonly line: BatchLineRow;
  readonly job: JobWithAttempts | null;
}

/** The key of a line's job (CONTRACT §17). */
export function lineKey(batchId: string, customId: string): string {
  return `batch:${batchId}:${customId}`;
}

export class BatchStore {
  readonly #driver: Driver;
  readonly #clock: Clock;
  readonly #newId: (prefix: 'job') => string;
  readonly #signalWork: () => void;

  /** `signalWork` wakes the executors (this process's and, where the engine can, the others'). */
  constructor(driver: Driver, clock: Clock, newId: (prefix: 'job') => string, signalWork: () => void) {
    this.#driver = driver;
    this.#clock = clock;
    this.#newId = newId;
    this.#signalWork = signalWork;
  }

  // ---- files ---------------------------------------------------------------

  /** A new upload, `uploading` (invisible) until {@link publishFile}. */
  async beginFile(p: { ownerId: string; id: string; filename: string }): Promise<void> {
    await this.#driver.queries.fileInsert({
      ownerId: p.ownerId, id: p.id, purpose: 'batch', filename: p.filename, bytes: 0, lineCount: 0, endpoints: [],
      status: 'uploading', batchId: null, kind: 'upload', createdAt: this.#clock.now(),
    });
  }

  /** One page of checked lines (one statement). */
  addFileLines(rows: readonly FileLineRow[]): Promise<void> {
    return this.#driver.queries.fileLinesInsert(rows);
  }

  /** Makes an upload visible with its totals. */
  async publishFile(p: { ownerId: string; id: string; bytes: number; lineCount: number; endpoints: readonly string[] }): Promise<FileRow> {
    if (!(await this.#driver.queries.filePublish(p))) throw new OnejobError('internal', `file ${p.id} was not being uploaded`);
    return (await this.#driver.queries.fileGet(p.ownerId, p.id))!;
  }

  /** Deletes an upload and the lines stored so far (a refused upload leaves nothing). */
  discardFile(ownerId: string, id: string): Promise<void> {
    return this.#driver.transaction((q) => q.fileDelete(ownerId, id));
  }

  /** The owner's file, once complete; null otherwise (another owner's, unknown, or still uploading). */
  async getFile(ownerId: string, id: string): Promise<FileRow | null> {
    const f = await this.#driver.queries.fileGet(ownerId, id);
    return f === null || f.status !== 'processed' ? null : f;
  }

  /** A file's content, page by page: an upload's lines as sent, an output or error file's lines. */
  async *fileContent(file: FileRow): AsyncGenerator<string> {
    let after = 0;
    for (;;) {
      const page = file.kind === 'upload'
        ? (await this.#driver.queries.fileLinesPage(file.ownerId, file.id, after, BATCH_PAGE)).map((l) => ({ lineNo: l.lineNo, output: l.line }))
        : await this.#driver.queries.batchOutputPage(file.ownerId, file.batchId!, file.kind === 'output' ? 'output' : 'error', after, BATCH_PAGE);
      if (page.length === 0) return;
      yield page.map((l) => l.output + '\n').join('');
      after = page.at(-1)!.lineNo;
    }
  }

  // ---- batches -------------------------------------------------------------

  /**
   * Creates the batch of (owner, key), or answers the one that key already
   * created for the same request (`created: false`).
   *
   * @throws OnejobError `idempotency_key_reused` when the key's batch was created for another request.
   */
  async createBatch(row: BatchInsertRow): Promise<{ batch: BatchRow; created: boolean }> {
    const q = this.#driver.queries;
    for (let round = 0; round < 3; round++) {
      const inserted = await q.batchInsert(row);
      if (inserted) return { batch: inserted, created: true };
      const existing = await q.batchGetByKey(row.ownerId, row.idempotencyKey);
      if (existing === null) continue; // deleted by retention between the two statements: insert again
      if (existing.fingerprint !== row.fingerprint) throw keyReused(row.idempotencyKey, existing);
      return { batch: existing, created: false };
    }
    throw new OnejobError('unavailable', 'the batch could not be created; retry with the same Idempotency-Key');
  }

  /**
   * The batch an Idempotency-Key already created for this request, or null
   * when the key has none.
   *
   * @throws OnejobError `idempotency_key_reused` when it was created for another request.
   */
  async createBatchReplay(ownerId: string, key: string, print: string): Promise<BatchRow | null> {
    const existing = await this.#driver.queries.batchGetByKey(ownerId, key);
    if (existing !== null && existing.fingerprint !== print) throw keyReused(key, existing);
    return existing;
  }

  getBatch(ownerId: string, id: string): Promise<BatchRow | null> {
    return this.#driver.queries.batchGet(ownerId, id);
  }

  listBatches(p: { ownerId: string; limit: number; after?: { createdAt: Date; id: string } | undefined }): Promise<BatchRow[]> {
    return this.#driver.queries.batchList(p);
  }

  /** A batch with its counts and cost, read in one snapshot. */
  view(batch: BatchRow): Promise<BatchView> {
    return this.#driver.readSnapshot(async (q) => {
      const fresh = (await q.batchGet(batch.ownerId, batch.id)) ?? batch;
      return { batch: fresh, counts: await q.batchCounts(batch.ownerId, batch.id), costMicros: await q.batchCostMicros(batch.ownerId, batch.id) };
    });
  }

  /**
   * Cancel (CONTRACT §17): `validating`/`in_progress` → `cancelling`, which
   * stops the executors' claim of its lines at this commit; the runner
   * cancels the rest. Answers the batch as it is after.
   */
  async cancelBatch(ownerId: string, id: string): Promise<BatchRow | null> {
    const q = this.#driver.queries;
    await q.batchSetStatus({ ownerId, id, from: ['validating', 'in_progress'], to: 'cancelling', now: this.#clock.now() });
    return q.batchGet(ownerId, id);
  }

  // ---- the runner ----------------------------------------------------------

  listOpenBatches(limit: number): Promise<BatchRow[]> {
    return this.#driver.queries.batchListOpen(limit);
  }

  /**
   * Creates the jobs of the batch's next page of lines, in one transaction
   * with their `batch_lines` and the cursor's compare-and-swap: all of the
   * page or none of it. A line whose key another job holds becomes an error
   * line, never a second run. Answers how many lines it created (0: none
   * left, or another runner moved the cursor first).
   */
  async createLinesPage(batch: BatchRow, jobOf: (line: FileLineRow) => LineJobRow, renderTaken: (line: FileLineRow) => string): Promise<number> {
    return this.#driver.transaction(async (q) => {
      const lines = await q.fileLinesPage(batch.ownerId, batch.inputFileId, batch.linesCreated, BATCH_PAGE);
      if (lines.length === 0) return 0;
      const now = this.#clock.now();
      const rows = lines.map((l) => ({
        ...jobOf(l), id: this.#newId('job'), ownerId: batch.ownerId, idempotencyKey: lineKey(batch.id, l.customId), createdAt: now, batchId: batch.id,
      }));
      const inserted = new Set(await q.batchJobsInsert(rows));
      const taken = rows.filter((r) => !inserted.has(r.idempotencyKey));
      const holders = taken.length === 0 ? new Map<string, { id: string; batchId: string | null }>()
        : new Map((await q.jobsByKeys(batch.ownerId, taken.map((r) => r.idempotencyKey))).map((j) => [j.idempotencyKey, j]));
      const out: BatchLineRow[] = lines.map((l, i) => {
        const row = rows[i]!;
        if (inserted.has(row.idempotencyKey)) return { ownerId: batch.ownerId, batchId: batch.id, lineNo: l.lineNo, customId: l.customId, jobId: row.id, outcome: null, output: null };
        const holder = holders.get(row.idempotencyKey);
        // This batch's own job: a page committed by another runner. Roll back: the cursor swap below would fail anyway.
        if (holder?.batchId === batch.id) throw new PageTaken();
        return { ownerId: batch.ownerId, batchId: batch.id, lineNo: l.lineNo, customId: l.customId, jobId: null, outcome: 'error', output: renderTaken(l) };
      });
      await q.batchLinesInsert(out);
      const to = lines.at(-1)!.lineNo;
      if (!(await q.batchAdvanceLines({ ownerId: batch.ownerId, id: batch.id, from: batch.linesCreated, to, now }))) throw new PageTaken();
      return lines.length;
    }).then(async (n) => {
      // New queued work: the executors (of every process) claim it now rather than at their next poll.
      if (n > 0) this.#signalWork();
      return n;
    }, (e: unknown) => {
      if (e instanceof PageTaken) return 0;
      throw e;
    });
  }

  /** Up to `limit` lines without an outcome whose job is finished, with their jobs and attempts. */
  finishedLines(batch: BatchRow, limit: number): Promise<FinishedLine[]> {
    return this.#driver.readSnapshot(async (q) => {
      const lines = await q.batchLinesFinished(batch.ownerId, batch.id, limit);
      const ids = lines.flatMap((l) => (l.jobId === null ? [] : [l.jobId]));
      const jobs = new Map<string, Job>();
      for (const id of ids) {
        const j = await q.jobGet(batch.ownerId, id);
        if (j) jobs.set(id, j);
      }
      const attempts = new Map<string, Attempt[]>();
      for (const a of ids.length === 0 ? [] : await q.attemptListByJobs(batch.ownerId, ids)) {
        const list = attempts.get(a.jobId) ?? [];
        list.push(a);
        attempts.set(a.jobId, list);
      }
      return lines.map((line) => {
        const job = line.jobId === null ? undefined : jobs.get(line.jobId);
        return { line, job: job ? { ...job, attempts: (attempts.get(job.id) ?? []).sort((a, b) => a.number - b.number) } : null };
      });
    });
  }

  /** Records a finished line's output line, once. */
  recordLine(line: BatchLineRow, outcome: 'output' | 'error', output: string): Promise<boolean> {
    return this.#driver.queries.batchLineFinish({ ownerId: line.ownerId, batchId: line.batchId, lineNo: line.lineNo, outcome, output });
  }

  /** Ids of the batch's jobs in these states (at most `limit`). */
  jobIdsInStates(batch: BatchRow, states: readonly Job['state'][], limit: number): Promise<string[]> {
    return this.#driver.queries.batchJobIdsInStates(batch.ownerId, batch.id, states, limit);
  }

  counts(batch: BatchRow): Promise<BatchCounts> {
    return this.#driver.queries.batchCounts(batch.ownerId, batch.id);
  }

  setStatus(batch: BatchRow, from: readonly BatchStatus[], to: BatchStatus): Promise<boolean> {
    return this.#driver.queries.batchSetStatus({ ownerId: batch.ownerId, id: batch.id, from, to, now: this.#clock.now() });
  }

  /**
   * The end of a batch, in one transaction: its output and error files
   * (whose content is its recorded lines) and its final status.
   */
  async finalize(batch: BatchRow, to: 'completed' | 'cancelled' | 'expired', counts: BatchCounts, fileIds: { output: string; error: string }): Promise<boolean> {
    return this.#driver.transaction(async (q) => {
      const now = this.#clock.now();
      const file = async (id: string, kind: 'output' | 'error', lineCount: number): Promise<FileRow> => ({
        ownerId: batch.ownerId, id, purpose: 'batch_output', filename: `batch_${batch.id}_${kind}.jsonl`, bytes: await q.batchOutputBytes(batch.ownerId, batch.id, kind), lineCount,
        endpoints: [], status: 'processed', batchId: batch.id, kind, createdAt: now,
      });
      const outputFileId = counts.outputs > 0 ? fileIds.output : null;
      const errorFileId = counts.errors > 0 ? fileIds.error : null;
      const done = await q.batchSetStatus({ ownerId: batch.ownerId, id: batch.id, from: [batch.status], to, now, outputFileId, errorFileId });
      if (!done) return false;
      if (outputFileId) await q.fileInsert(await file(outputFileId, 'output', counts.outputs));
      if (errorFileId) await q.fileInsert(await file(errorFileId, 'error', counts.errors));
      return true;
    });
  }

  /** Retention (CONTRACT §9): see {@link BatchQueries.batchRetentionDelete}. */
  deleteFinished(p: { olderThanMs: number; limit: number }): Promise<{ batches: number; files: number }> {
    return this.#driver.transaction((q) => q.batchRetentionDelete({ ...p, now: null }));
  }
}

function keyReused(key: string, existing: BatchRow): OnejobError {
  return new OnejobError('idempotency_key_reused', `Idempotency-Key ${JSON.stringify(key)} already created batch ${existing.id} for a different request; use a new key for a new batch`, {
    details: { batch_id: existing.id },
  });
}

/** Another runner committed this page first. */
class PageTaken extends Error {}
