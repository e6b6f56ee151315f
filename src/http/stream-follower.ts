/**
 * A job's stream as one sequence of protocol-neutral events (CONTRACT §13),
 * wherever it is: from this process's {@link StreamHub} while the attempt
 * runs here (no database read), else from the stored stream
 * (`stream_events`, migration 0011), read again whenever a batch is
 * announced (PostgreSQL `onejob_stream`, or this process's own store) and,
 * where no announcement can come (SQLite across processes), every
 * `recheckMs`. Both sources number events the same way (`seq` within the
 * attempt's stream), so events are handed on once each and in order,
 * whichever source had them first. Any SSE encoder on top of it gets the
 * same events for the first request, its duplicates, a resume on another
 * process and a replay after the end. See docs/streaming.md.
 */
import type { StreamEvent, StreamHub } from '../executor/stream-hub.ts';
import { streamEventsOfBatch } from '../executor/stream-hub.ts';
import type { StreamBatchRow } from '../store/driver.ts';
import type { Store } from '../store/store.ts';
import { coalescedRun } from './job-watch.ts';

/**
 * One subscription to a store's stream announcements per store, dispatched
 * by job id: an append wakes the followers of its job only, however many
 * streams a process follows. Per job it also counts the announcements
 * (`generation`) and holds the reads in flight, so that the followers of one
 * job that one announcement wakes share one read (see {@link sharedRead}).
 */
interface Announcements {
  readonly byJob: Map<string, Set<() => void>>;
  readonly generation: Map<string, number>;
  /** Reads in flight by (job, attempt, after seq), with the generation they started in. */
  readonly reads: Map<string, { readonly generation: number; readonly rows: Promise<StreamBatchRow[]> }>;
  readonly off: () => void;
}
const announcements = new WeakMap<Store, Announcements>();

/**
 * `store.readStreamBatches`, shared: a read of the same job, attempt and
 * position that started since the job's last announcement is joined instead
 * of sent again. The followers of one job on one process are at the same
 * position once caught up, and one announcement wakes them all in one turn:
 * one statement per batch per process, not one per follower. A read that
 * started before the last announcement may miss its batch, so it is never
 * joined.
 */
function sharedRead(store: Store, ownerId: string, jobId: string, attemptNumber: number | null, afterSeq: number): Promise<StreamBatchRow[]> {
  const registry = announcements.get(store);
  if (!registry) return store.readStreamBatches(ownerId, jobId, attemptNumber, afterSeq);
  const key = `${jobId}\u0000${ownerId}\u0000${attemptNumber ?? ''}\u0000${afterSeq}`;
  const generation = registry.generation.get(jobId) ?? 0;
  const inFlight = registry.reads.get(key);
  if (inFlight && inFlight.generation === generation) return inFlight.rows;
  const rows = store.readStreamBatches(ownerId, jobId, attemptNumber, afterSeq);
  const entry = { generation, rows };
  registry.reads.set(key, entry);
  const forget = (): void => {
    if (registry.reads.get(key) === entry) registry.reads.delete(key);
  };
  rows.then(forget, forget);
  return rows;
}

function onJobStreamAppended(store: Store, jobId: string, wake: () => void): () => void {
  let registry = announcements.get(store);
  if (!registry) {
    const byJob = new Map<string, Set<() => void>>();
    const generation = new Map<string, number>();
    const off = store.onStreamAppended((id) => {
      const set = byJob.get(id);
      if (!set) return;
      generation.set(id, (generation.get(id) ?? 0) + 1);
      for (const w of [...set]) w();
    });
    registry = { byJob, generation, reads: new Map(), off };
    announcements.set(store, registry);
  }
  const r = registry;
  let set = r.byJob.get(jobId);
  if (!set) r.byJob.set(jobId, (set = new Set()));
  set.add(wake);
  return () => {
    const s = r.byJob.get(jobId);
    if (!s) return;
    s.delete(wake);
    if (s.size > 0) return;
    r.byJob.delete(jobId);
    r.generation.delete(jobId);
    for (const key of [...r.reads.keys()]) if (key.startsWith(`${jobId}\u0000`)) r.reads.delete(key);
    if (r.byJob.size === 0 && announcements.get(store) === r) {
      announcements.delete(store);
      r.off();
    }
  };
}

/** Options of {@link JobStreamFollower}. */
export interface JobStreamFollowerOptions {
  readonly store: Store;
  readonly hub: StreamHub;
  readonly ownerId: string;
  readonly jobId: string;
  /**
   * Only the stream of this attempt (a resume names it). Null: the stream
   * live here, else the latest stored one that did not break; after
   * {@link JobStreamFollower.skip}, the next one.
   */
  readonly attemptNumber: number | null;
  /**
   * With `attemptNumber` null: when no stored stream is left that did not
   * break, follow the latest that broke (not one skipped). For a resume by
   * position (`starting_after`), whose client may hold that stream's
   * beginning and is owed its `error`.
   */
  readonly brokenIfNoOther?: boolean | undefined;
  /** Read the stored stream at once. False for a job just created here: its stream comes live or is announced. */
  readonly readNow: boolean;
  /** The re-read interval where no announcement can come (no LISTEN/NOTIFY). */
  readonly recheckMs: number;
  /** Each event, once, in order (may call {@link JobStreamFollower.skip} or `close`). */
  readonly onEvent: (event: StreamEvent) => void;
  /** A read that failed (tried again at the next announcement). */
  readonly onError: (error: unknown) => void;
}

/**
 * Follows one job's stream (see the module comment).
 *
 * @example
 * const f = new JobStreamFollower({ store, hub, ownerId, jobId, attemptNumber: null, readNow: true, recheckMs: 1000, onEvent: (e) => …, onError: log });
 * f.start();
 * // … f.close();
 */
export class JobStreamFollower {
  readonly #o: JobStreamFollowerOptions;
  #attempt: number | null;
  #next = 1;
  readonly #skipped = new Set<number>();
  #closed = false;
  #offHub: () => void = () => {};
  #offStore: () => void = () => {};
  #timer: NodeJS.Timeout | null = null;
  /** Reads the stored stream (coalesced: never two at once, never an announcement missed). */
  readonly refresh: () => Promise<void>;

  constructor(options: JobStreamFollowerOptions) {
    this.#o = options;
    this.#attempt = options.attemptNumber;
    this.refresh = coalescedRun(() => this.#read());
  }

  /** The attempt whose stream is followed (null: none yet). */
  get attemptNumber(): number | null {
    return this.#attempt;
  }

  /** Whether an event of the followed stream has been handed on. */
  get started(): boolean {
    return this.#next > 1;
  }

  /** Subscribes (the hub's buffered events are handed on at once, synchronously), and reads when `readNow`. */
  start(): void {
    const { store, hub, jobId } = this.#o;
    this.#offHub = hub.watch(jobId, (e) => this.#offer(e));
    this.#offStore = onJobStreamAppended(store, jobId, () => void this.refresh());
    if (!store.capabilities.supportsListenNotify) this.#timer = setInterval(() => void this.refresh(), this.#o.recheckMs);
    if (this.#o.readNow) void this.refresh();
  }

  /** The followed stream broke before anything of it was sent: follow the next one (a failover's). */
  skip(): void {
    if (this.#attempt !== null) this.#skipped.add(this.#attempt);
    this.#attempt = null;
    this.#next = 1;
    void this.refresh();
  }

  close(): void {
    this.#closed = true;
    this.#offHub();
    this.#offStore();
    if (this.#timer) clearInterval(this.#timer);
  }

  #offer(e: StreamEvent): void {
    if (this.#closed) return;
    if (this.#attempt === null) {
      if (this.#skipped.has(e.attemptNumber) || e.seq !== 1) return;
      this.#attempt = e.attemptNumber;
    }
    if (e.attemptNumber !== this.#attempt || e.seq !== this.#next) return;
    this.#next++;
    this.#o.onEvent(e);
  }

  async #read(): Promise<void> {
    if (this.#closed) return;
    const { store, hub, ownerId, jobId } = this.#o;
    // The stream runs here: the hub has handed on (and will hand on) every event of it.
    const live = hub.liveAttempt(jobId);
    if (live !== null && (live === this.#attempt || (this.#attempt === null && !this.#skipped.has(live)))) return;
    let rows;
    try {
      rows = await sharedRead(store, ownerId, jobId, this.#attempt, this.#attempt === null ? 0 : this.#next - 1);
    } catch (e) {
      this.#o.onError(e);
      return;
    }
    if (this.#closed) return;
    const events = rows.flatMap((r) => streamEventsOfBatch(r));
    if (this.#attempt === null) {
      // The latest stored stream that did not break (one that broke is no one's to start now).
      const broken = new Set(events.filter((e) => e.type === 'end' && !e.ok).map((e) => e.attemptNumber));
      const unskipped = [...new Set(events.map((e) => e.attemptNumber))].filter((n) => !this.#skipped.has(n));
      let candidates = unskipped.filter((n) => !broken.has(n));
      if (candidates.length === 0 && this.#o.brokenIfNoOther === true) candidates = unskipped;
      if (candidates.length === 0) return;
      const chosen = Math.max(...candidates);
      for (const e of events) if (e.attemptNumber === chosen) this.#offer(e);
      return;
    }
    for (const e of events) this.#offer(e);
  }
}
