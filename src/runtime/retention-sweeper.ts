/**
 * {@link RetentionSweeper}: the background retention of CONTRACT §9.
 *
 * Every `serve` and `executor` process runs one; at most one of them sweeps
 * a database at a time, the holder of the maintenance lease `retention` (a
 * row in `maintenance_leases`, compared against the database's clock, so it
 * works the same on PostgreSQL and SQLite and a crashed holder's lease simply
 * expires). A sweep deletes finished jobs older than the window in bounded
 * batches, one short transaction each, renewing the lease between batches
 * and stopping as soon as it is lost. `onejob gc` runs the same sweep once,
 * by hand. See docs/retention.md.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { DeleteFinishedJobsResult, Store } from '../store/store.ts';

/** The maintenance lease's name. */
export const RETENTION_LEASE = 'retention';

const DAY_MS = 86_400_000;

/** Options of {@link RetentionSweeper}. */
export interface RetentionSweeperOptions {
  readonly store: Store;
  /** The window: jobs terminal for longer are deleted (`retention.finishedJobsDays`). */
  readonly finishedJobsDays: number;
  /** Time between sweeps of the background loop. Default 300 000 ms (5 min). */
  readonly intervalMs?: number | undefined;
  /** Delay of the first background sweep. Default: a random 0–30 s, so processes started together do not all try at once. */
  readonly firstDelayMs?: number | undefined;
  /** Jobs per batch (one transaction). Default 500. */
  readonly batchSize?: number | undefined;
  /** Pause between two batches, so other writers get the database. Default 20 ms. */
  readonly pauseMs?: number | undefined;
  /** Lease length, renewed before every batch; a holder that dies frees it after this. Default 60 000 ms. */
  readonly leaseMs?: number | undefined;
  /** This process's name as lease holder. Default `sweeper_<uuid>`. */
  readonly holder?: string | undefined;
  readonly logger?: Logger | undefined;
}

/** Options of one {@link RetentionSweeper.sweepOnce}. */
export interface SweepOptions {
  /** Override the window (`onejob gc --older-than`). */
  readonly olderThanMs?: number | undefined;
  /** Wait up to this long for another process's sweep to finish (poll every 250 ms). Default 0: skip. */
  readonly waitForLeaseMs?: number | undefined;
}

/** What one sweep deleted, and the window it used. */
export interface SweepResult extends DeleteFinishedJobsResult {
  readonly olderThanMs: number;
  /** Finished batches deleted with their lines and output files (CONTRACT §17). */
  readonly deletedBatches?: number;
  /** Files deleted: batches' output files, unused input files, uploads cut short over an hour ago. */
  readonly deletedFiles?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The retention loop of one process.
 *
 * @example
 * const sweeper = new RetentionSweeper({ store, finishedJobsDays: config.retention.finishedJobsDays, logger });
 * sweeper.start();            // background, every 5 minutes
 * await sweeper.sweepOnce();  // or by hand: null when another process holds the lease
 * await sweeper.stop();
 */
export class RetentionSweeper {
  readonly holder: string;
  readonly #o: RetentionSweeperOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> | null = null;
  #stopped = false;

  constructor(options: RetentionSweeperOptions) {
    if (!(options.finishedJobsDays > 0)) throw new RangeError('finishedJobsDays must be > 0');
    this.#o = options;
    this.holder = options.holder ?? `sweeper_${randomUUID()}`;
  }

  /** Starts the background loop (idempotent). */
  start(): void {
    if (this.#timer || this.#stopped) return;
    this.#schedule(this.#o.firstDelayMs ?? Math.floor(Math.random() * 30_000));
  }

  /** Stops the loop and waits for a sweep in progress to end (it stops after its current batch). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running?.catch(() => undefined);
  }

  /**
   * One sweep: takes the lease (or waits for it up to `waitForLeaseMs`),
   * deletes batch after batch until nothing old is left, the lease is lost
   * or the sweeper stops, then gives the lease up.
   *
   * @returns what it deleted, or null when another process holds the lease.
   */
  async sweepOnce(options: SweepOptions = {}): Promise<SweepResult | null> {
    const run = this.#sweep(options);
    this.#running = run;
    try {
      return await run;
    } finally {
      if (this.#running === run) this.#running = null;
    }
  }

  async #sweep(options: SweepOptions): Promise<SweepResult | null> {
    const { store } = this.#o;
    const olderThanMs = options.olderThanMs ?? this.#o.finishedJobsDays * DAY_MS;
    const lease = { name: RETENTION_LEASE, holder: this.holder, ttlMs: this.#o.leaseMs ?? 60_000 };
    const waitUntil = Date.now() + (options.waitForLeaseMs ?? 0);
    while (!(await store.tryMaintenanceLease(lease))) {
      if (Date.now() >= waitUntil) return null;
      await sleep(250);
    }
    try {
      const result = await store.deleteFinishedJobs({
        olderThanMs,
        batchSize: this.#o.batchSize,
        beforeBatch: async () => {
          if (this.#stopped) return false;
          await sleep(this.#o.pauseMs ?? 20);
          return store.tryMaintenanceLease(lease);
        },
      });
      // Batches and their files are kept like jobs (CONTRACT §9, §17; docs/batches.md "Retention").
      let batchesDeleted = 0;
      let filesDeleted = 0;
      for (;;) {
        if (this.#stopped || !(await store.tryMaintenanceLease(lease))) break;
        const r = await store.batches.deleteFinished({ olderThanMs, limit: this.#o.batchSize ?? 500 });
        batchesDeleted += r.batches;
        filesDeleted += r.files;
        if (r.batches + r.files === 0) break;
      }
      return { ...result, olderThanMs, deletedBatches: batchesDeleted, deletedFiles: filesDeleted };
    } finally {
      await store.releaseMaintenanceLease(lease).catch(() => undefined);
    }
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.sweepOnce()
        .then((r) => {
          if (r && r.jobs > 0) this.#o.logger?.info({ deleted_jobs: r.jobs, deleted_attempts: r.attempts, deleted_events: r.events, batches: r.batches, by_state: r.jobsByState }, 'retention: deleted finished jobs');
        })
        .catch((err: unknown) => this.#o.logger?.warn({ err }, 'retention sweep failed; trying again at the next interval'))
        .finally(() => {
          if (!this.#stopped) this.#schedule(this.#o.intervalMs ?? 300_000);
        });
    }, delayMs);
    this.#timer.unref();
  }
}
