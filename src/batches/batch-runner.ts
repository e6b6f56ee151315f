/**
 * {@link BatchRunner}: the bookkeeping of batches (CONTRACT §17) in every
 * process that runs an executor. The lines themselves are jobs the
 * executors run; this loop creates them page by page, records each finished
 * line's output line, expires, cancels and finalizes. One process at a time
 * does it (the maintenance lease `batches`); every step is safe to repeat
 * after a crash (see docs/batches.md, "The runner").
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { OnejobConfig } from '../config/config.ts';
import { isOnejobError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import type { BatchRow, FileLineRow } from '../store/batch-queries.ts';
import { BATCH_PAGE, lineKey, type LineJobRow } from '../store/batch-store.ts';
import type { Store } from '../store/store.ts';
import { isBatchEndpoint, lineJobOf, type BatchEndpoint } from './batch-lines.ts';
import { keyTakenLineOf, outputLineOf } from './batch-output.ts';

/** Most lines of a batch created and not yet started (`queued`): a new page waits below it. */
export const MAX_LINES_AHEAD = 4 * BATCH_PAGE;

/** The maintenance lease's name. */
export const BATCHES_LEASE = 'batches';

/** Options of {@link BatchRunner}. */
export interface BatchRunnerOptions {
  readonly store: Store;
  readonly config: OnejobConfig;
  readonly logger?: Logger | undefined;
  /** Pause between passes while there is work. Default 200 ms. */
  readonly busyMs?: number | undefined;
  /** Pause between passes when the last one did nothing. Default 1 000 ms. */
  readonly idleMs?: number | undefined;
  /** Pages of lines created, and pages of finished lines recorded, per batch and pass. Default 4. */
  readonly pagesPerPass?: number | undefined;
  /** The lease's length; a holder that dies frees it after this. Default 30 000 ms. */
  readonly leaseMs?: number | undefined;
  /** Stands in for the clock (tests): when batches expire. */
  readonly now?: (() => Date) | undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

/**
 * @example
 * const runner = new BatchRunner({ store, config });
 * runner.start();
 * await runner.stop();
 */
export class BatchRunner {
  readonly holder = `batches_${randomUUID()}`;
  readonly #o: BatchRunnerOptions;
  #stopped = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;

  constructor(options: BatchRunnerOptions) {
    this.#o = options;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Runs a pass soon (a new batch, a cancel). */
  wake(): void {
    this.#wake?.();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    await this.#loop;
    await this.#o.store.releaseMaintenanceLease({ name: BATCHES_LEASE, holder: this.holder }).catch(() => undefined);
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      let busy = false;
      try {
        if (await this.#o.store.tryMaintenanceLease({ name: BATCHES_LEASE, holder: this.holder, ttlMs: this.#o.leaseMs ?? 30_000 })) busy = await this.passOnce();
      } catch (err) {
        this.#o.logger?.warn({ err }, 'batch runner pass failed; trying again');
      }
      if (this.#stopped) break;
      await Promise.race([sleep(busy ? this.#o.busyMs ?? 200 : this.#o.idleMs ?? 1_000), new Promise<void>((r) => (this.#wake = r))]);
      this.#wake = null;
    }
  }

  /** One pass over every open batch; true when it moved anything. */
  async passOnce(): Promise<boolean> {
    let moved = false;
    for (const batch of await this.#o.store.batches.listOpenBatches(100)) {
      if (this.#stopped) break;
      moved = (await this.#step(batch)) || moved;
    }
    return moved;
  }

  #now(): Date {
    return this.#o.now?.() ?? new Date();
  }

  async #step(b: BatchRow): Promise<boolean> {
    const batches = this.#o.store.batches;
    let batch = b;
    let moved = false;
    const expired = this.#now().getTime() >= batch.expiresAt.getTime();
    if ((batch.status === 'validating' || batch.status === 'in_progress') && expired) {
      // The executors' claim already stops at expires_at; this stops creating lines and ends the batch.
      if (await batches.setStatus(batch, ['validating', 'in_progress'], 'finalizing')) batch = { ...batch, status: 'finalizing' };
      moved = true;
    }
    if (batch.status === 'cancelling') moved = (await this.#cancelLines(batch, ['queued', 'running', 'unknown'])) || moved;
    if (batch.status === 'finalizing' && expired) moved = (await this.#cancelLines(batch, ['queued'])) || moved;
    if (batch.status === 'validating' || batch.status === 'in_progress') {
      // Lines are created a little ahead of the executors, not all at once: the lines waiting stay few (each pass reads
      // them), and past the window the lines never created are never started.
      let waiting = (await batches.jobIdsInStates(batch, ['queued'], MAX_LINES_AHEAD)).length;
      for (let i = 0; i < (this.#o.pagesPerPass ?? 4) && batch.linesCreated < batch.lineCount && waiting < MAX_LINES_AHEAD; i++) {
        const n = await batches.createLinesPage(batch, (l) => this.#jobOf(batch, l), (l) => keyTakenLineOf(l.customId, lineKey(batch.id, l.customId)).text);
        if (n === 0) break;
        waiting += n;
        moved = true;
        this.#o.logger?.debug({ batch_id: batch.id, lines: n }, 'batch lines created');
        batch = (await batches.getBatch(batch.ownerId, batch.id)) ?? batch;
      }
    }
    moved = (await this.#recordFinished(batch)) || moved;
    return (await this.#finishIfDone(batch, expired)) || moved;
  }

  #jobOf(batch: BatchRow, l: FileLineRow): LineJobRow {
    const route = this.#o.config.routes[l.route];
    const url = l.url as BatchEndpoint;
    const parsed = JSON.parse(l.line) as { body: Record<string, unknown> };
    const job = isBatchEndpoint(url) ? lineJobOf(url, parsed.body) : null;
    if (route === undefined || job === null || !job.ok) {
      // Checked at upload; a route removed from the configuration since fails the line's job at its claim (no provider).
      return { route: l.route, input: parsed.body, metadata: null, providers: route?.providers ?? [], fingerprint: `batch:${batch.id}` };
    }
    return { route: l.route, input: job.input, metadata: job.metadata, providers: route.providers, fingerprint: job.fingerprint };
  }

  async #cancelLines(batch: BatchRow, states: readonly ('queued' | 'running' | 'unknown')[]): Promise<boolean> {
    const ids = await this.#o.store.batches.jobIdsInStates(batch, states, BATCH_PAGE);
    for (const id of ids) {
      try {
        await this.#o.store.cancelJob(batch.ownerId, id, { actor: 'batch' });
      } catch (e) {
        if (!isOnejobError(e, 'job_finished')) throw e;
      }
    }
    return ids.length > 0;
  }

  /** Renders and records the lines whose jobs finished since the last pass. */
  async #recordFinished(batch: BatchRow): Promise<boolean> {
    if (!isBatchEndpoint(batch.endpoint)) return false;
    let moved = false;
    const cancelledAs = batch.status === 'cancelling' ? 'batch_cancelled' : this.#now() >= batch.expiresAt ? 'batch_expired' : 'batch_cancelled';
    for (let i = 0; i < (this.#o.pagesPerPass ?? 4); i++) {
      const finished = await this.#o.store.batches.finishedLines(batch, BATCH_PAGE);
      if (finished.length === 0) break;
      for (const { line, job } of finished) {
        // A line without a job was written with its outcome; a job deleted by retention cannot be rendered: recorded as failed.
        const out = job === null
          ? { outcome: 'error' as const, text: JSON.stringify({ id: `batch_req_${line.customId}`, custom_id: line.customId, response: null, error: { code: 'job_not_found', message: `the job of line ${line.customId} no longer exists` } }) }
          : outputLineOf(batch.endpoint, line.customId, job, this.#o.config, cancelledAs);
        await this.#o.store.batches.recordLine(line, out.outcome, out.text);
      }
      moved = true;
    }
    return moved;
  }

  /** Every created line has its outcome, and no more will be created: the files and the final status. */
  async #finishIfDone(batch: BatchRow, expired: boolean): Promise<boolean> {
    const creating = (batch.status === 'validating' || batch.status === 'in_progress') && batch.linesCreated < batch.lineCount;
    if (creating || batch.finishedAt !== null) return false;
    const counts = await this.#o.store.batches.counts(batch);
    if (counts.outputs + counts.errors < counts.lines) return false;
    const to = batch.status === 'cancelling' ? 'cancelled' : batch.status === 'finalizing' && expired ? 'expired' : 'completed';
    const done = await this.#o.store.batches.finalize(batch, to, counts, { output: newId('file'), error: newId('file') });
    if (done) this.#o.logger?.info({ batch_id: batch.id, status: to, completed: counts.outputs, failed: counts.errors }, 'batch finished');
    return done;
  }
}
