/**
 * Waiting on jobs, for every request of one process that waits (long-polls,
 * chat completions, streams): one registry entry per job, however many
 * requests wait on it (docs/performance.md, "waiting is free").
 *
 * - A change committed through this process's store arrives with the job as
 *   committed (a settle, a cancel, a create): it is handed to the job's
 *   waiters as is, no read.
 * - A change announced without the job (another process's, by the store's
 *   notifications, or an attempt-level write here) is read once for all of
 *   the job's waiters ({@link coalescedRun}).
 * - The fallback for changes nobody announced (another process on SQLite, a
 *   notification lost with its connection): every `recheckMs`, ONE batched
 *   read of the states of all watched jobs, and a read of only the jobs whose
 *   state moved. No statement per waiter per second.
 */
import type { JobState } from '../core/states.ts';
import type { JobWithAttempts } from '../core/types.ts';
import type { Store } from '../store/store.ts';

/**
 * Wraps `fn` so that calls while it runs coalesce into one more run after
 * it (never two at once, never a change missed).
 *
 * @example const read = coalescedRun(async () => { … }); void read(); void read(); // at most one extra run
 */
export function coalescedRun(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again = false;
  const run = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await fn();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return run;
}

/** What a watcher is told: the job as committed (null: it is gone), or a read that failed. */
export interface JobWatcher {
  readonly onJob: (job: JobWithAttempts | null) => void;
  readonly onError?: ((error: unknown) => void) | undefined;
}

interface Entry {
  readonly ownerId: string;
  readonly jobId: string;
  readonly watchers: Set<JobWatcher>;
  /** The state last handed to the watchers (the fallback sweep reads again only when it moved). */
  state: JobState | undefined;
  /** The job last handed to the watchers: a read that answers later with an older version is dropped. */
  latest: JobWithAttempts | null;
  readonly read: () => Promise<void>;
}

/** Options of {@link JobWatch}. */
export interface JobWatchOptions {
  readonly store: Store;
  /** The fallback sweep's period. */
  readonly recheckMs: number;
}

/** The registry (see the module comment). One per app. */
export class JobWatch {
  readonly #store: Store;
  readonly #recheckMs: number;
  readonly #entries = new Map<string, Entry>();
  #offChanges: (() => void) | null = null;
  #sweepTimer: NodeJS.Timeout | null = null;
  readonly #sweep = coalescedRun(() => this.#sweepOnce());

  constructor(o: JobWatchOptions) {
    this.#store = o.store;
    this.#recheckMs = o.recheckMs;
  }

  /** Jobs watched now (for tests and metrics). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Tells `watcher` of every committed change of the owner's job until the
   * returned function is called. With `readNow` (the default) the job is
   * read once at once (shared with the job's other new watchers), closing
   * the gap between the caller's last read and the subscription; give false
   * when nothing can have changed since (the caller is about to start the
   * only attempt itself). `state`: the state the caller last saw (what the
   * fallback sweep compares with until a change is delivered).
   */
  watch(ownerId: string, jobId: string, watcher: JobWatcher, options: { readNow?: boolean; state?: JobState } = {}): () => void {
    const key = keyOf(ownerId, jobId);
    let entry = this.#entries.get(key);
    if (!entry) {
      const created: Entry = {
        ownerId, jobId, watchers: new Set(), state: undefined, latest: null,
        read: coalescedRun(async () => {
          if (created.watchers.size === 0) return;
          try {
            this.#deliver(created, await this.#store.getJob(ownerId, jobId));
          } catch (error) {
            for (const w of [...created.watchers]) w.onError?.(error);
          }
        }),
      };
      entry = created;
      this.#entries.set(key, entry);
      this.#start();
    }
    entry.watchers.add(watcher);
    entry.state ??= options.state;
    if (options.readNow !== false) void entry.read();
    const e = entry;
    return () => {
      e.watchers.delete(watcher);
      if (e.watchers.size === 0 && this.#entries.get(key) === e) {
        this.#entries.delete(key);
        if (this.#entries.size === 0) this.#stop();
      }
    };
  }

  /** Reads the job again now for its watchers (once, however often asked meanwhile); nothing when nobody watches it. */
  refresh(ownerId: string, jobId: string): void {
    void this.#entries.get(keyOf(ownerId, jobId))?.read();
  }

  /** Stops listening (the app closes). */
  close(): void {
    this.#entries.clear();
    this.#stop();
  }

  #deliver(entry: Entry, job: JobWithAttempts | null): void {
    // A read that began before a change committed and answered after it: the watchers already have the newer job.
    if (job && entry.latest && isOlder(job, entry.latest)) return;
    entry.latest = job;
    entry.state = job?.state;
    for (const w of [...entry.watchers]) w.onJob(job);
  }

  #start(): void {
    if (this.#offChanges) return;
    this.#offChanges = this.#store.onJobChanged((ownerId, jobId, state, job) => {
      const entry = this.#entries.get(keyOf(ownerId, jobId));
      if (!entry) return;
      if (job) this.#deliver(entry, job);
      // A state its watchers already have (an attempt-level change, or the echo of a change made here) asks nothing of them.
      else if (state === undefined || state !== entry.state) void entry.read();
    });
    this.#sweepTimer = setInterval(() => void this.#sweep(), this.#recheckMs);
    this.#sweepTimer.unref();
  }

  #stop(): void {
    this.#offChanges?.();
    this.#offChanges = null;
    if (this.#sweepTimer) clearInterval(this.#sweepTimer);
    this.#sweepTimer = null;
  }

  async #sweepOnce(): Promise<void> {
    const entries = [...this.#entries.values()];
    if (entries.length === 0) return;
    let states: Map<string, JobState>;
    try {
      states = await this.#store.getJobStates(entries.map((e) => ({ ownerId: e.ownerId, jobId: e.jobId })));
    } catch {
      return; // the next sweep tries again; waiters keep what they have
    }
    for (const e of entries) {
      if (e.state === undefined || states.get(e.jobId) !== e.state) void e.read();
    }
  }
}

const ATTEMPT_PROGRESS: Readonly<Record<string, number>> = { starting: 0, running: 1, unknown: 2 };

/**
 * Whether `a` is an earlier version of the job than `b`. Everything compared
 * only ever moves forward: the version (each decision), `updated_at`, the
 * number of attempts, and each attempt's state (starting → running → unknown
 * → a terminal state).
 */
function isOlder(a: JobWithAttempts, b: JobWithAttempts): boolean {
  if (a.version !== b.version) return a.version < b.version;
  if (a.updatedAt.getTime() !== b.updatedAt.getTime()) return a.updatedAt.getTime() < b.updatedAt.getTime();
  if (a.attempts.length !== b.attempts.length) return a.attempts.length < b.attempts.length;
  const progress = (j: JobWithAttempts) => j.attempts.reduce((n, x) => n + (ATTEMPT_PROGRESS[x.state] ?? 3), 0);
  return progress(a) < progress(b);
}

function keyOf(ownerId: string, jobId: string): string {
  return `${ownerId}\u0000${jobId}`;
}
