/**
 * The SQLite driver (better-sqlite3, WAL, `synchronous = FULL`): the embedded default.
 *
 * better-sqlite3 is synchronous, so the connection lives in a `worker_threads`
 * worker (`sqlite-worker.mjs`): a commit's WAL sync or a busy-timeout wait
 * blocks that thread, never the event loop. The main thread posts one message
 * per statement (or per group commit, migration, COMMIT/ROLLBACK) and awaits
 * its reply; the worker runs messages one at a time in arrival order.
 *
 * Exclusivity: the store's transactions are async functions whose statements
 * are separate messages, so a transaction holds a gate from its first
 * statement (which carries `BEGIN IMMEDIATE`) to its COMMIT/ROLLBACK reply,
 * and nothing else is posted meanwhile. Self-contained requests (autocommit
 * statements, a group commit, migrations) are posted as soon as no
 * transaction holds the gate, without waiting for each other's replies: the
 * worker's queue orders them. Everything waits in one FIFO, so nobody starves.
 * Across processes, `BEGIN IMMEDIATE` and the busy timeout serialize writers.
 *
 * Bounds: the gate, the group-commit queue and the worker's queue each hold
 * at most `maxQueued` calls; one more is refused at once with `unavailable`.
 * Several processes on one file: `busy_timeout` makes a writer wait for the
 * lock; a call that still finds it taken (`SQLITE_BUSY`) runs again, a
 * transaction as a whole.
 *
 * better-sqlite3 is an optional dependency (STYLE §18): only the worker
 * loads it, so a PostgreSQL-only install (`npm install --omit=optional`)
 * never needs it; opening a `sqlite:` database without it fails with one
 * line that says so ({@link SQLITE_MODULE_MISSING}).
 *
 * If the worker dies, every waiting call fails with `database_unavailable`
 * and the driver starts a new worker (see {@link SqliteDriver.liveness}).
 */
import { Worker } from 'node:worker_threads';
import { OnejobError } from '../../core/errors.ts';
import type { AttemptState, JobState } from '../../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobEventType } from '../../core/types.ts';
import type {
  JobStreamClaimParams,
  AttemptClaimParams, AttemptInsertRow, AttemptUpdateParams, Driver, DriverQueries, EventInsertRow,
  FirstAttemptRow, JobFinishParams, JobInsertRow, JobListParams, JobProgressParams, LeaseExtendParams, LookupClaimParams, LookupDeferParams, MarkRunningParams, MigrationResult, SettleWonParams,
} from '../driver.ts';
import { loadMigrations } from '../migration-files.ts';
import { isTransientDatabaseError } from '../transient-errors.ts';
import * as A from './attempt-queries.ts';
import * as AD from './admin-queries.ts';
import * as C from './certification-queries.ts';
import * as R from './retention-queries.ts';
import * as S from './stream-queries.ts';
import * as E from './event-queries.ts';
import * as J from './job-queries.ts';
import * as L from './lookup-queries.ts';
import type { InsightQueries } from '../insight-queries.ts';
import { sqliteInsightQueries } from './insight-queries.ts';

/** Options of {@link openSqliteDriver}. */
export interface SqliteDriverOptions {
  /** A file path, or `:memory:`. */
  readonly path: string;
  /** How long a writer waits for another process's lock (`busy_timeout`); default 5000 ms. */
  readonly busyTimeoutMs?: number;
  /**
   * How many times a call runs at most when another process still holds the
   * lock after `busyTimeoutMs` (`SQLITE_BUSY`): a transaction re-runs as a
   * whole, after a short jittered pause. Default 4.
   */
  readonly maxBusyAttempts?: number;
  /**
   * Most calls waiting for the connection (the gate, the group-commit queue
   * and the worker's queue, each); one more is refused at once with
   * `unavailable`, nothing sent. Default 2 000.
   */
  readonly maxQueued?: number;
}

type Row = Record<string, unknown>;

/** How the worker runs one statement: `each` runs it once per argument list (`p` is then a list of lists). */
type Kind = 'get' | 'all' | 'run' | 'each';

/** Messages to the worker (see sqlite-worker.mjs). Arguments are plain values: strings, numbers (dates as epoch ms), null. */
type Request = { id?: number } & (
  /** `tx`: 0 autocommit, 1 inside the open transaction, 2 `BEGIN IMMEDIATE` first. */
  | { t: 'q'; tx: 0 | 1 | 2; k: Kind; s: string; p: unknown[] }
  /** Group commit of `INSERT … RETURNING` rows: one entry per row in the reply. */
  /** Group commit of scripts: one entry per script in the reply (see sqlite-worker.mjs). */
  | { t: 'sb'; scripts: ScriptStep[][] }
  | { t: 'migrate'; migrations: { version: number; name: string; sql: string }[]; now: number }
  | { t: 'commit' | 'rollback' | 'versions' | 'close' }
);
interface ErrInfo { name: string; message: string; code?: string | undefined }
interface Reply { id: number; v?: unknown; e?: ErrInfo }
type BatchEntry = { v: unknown[]; e?: undefined } | { e: ErrInfo };

/**
 * One statement of a script: run only when step `if` applied (returned a
 * row, changed rows); its result is null otherwise.
 */
interface ScriptStep {
  readonly k: Kind;
  readonly s: string;
  readonly p: unknown[];
  readonly if?: number | undefined;
}

/** Group-commit batches of autocommit scripts on their way at once (more: smaller batches, more syncs). */
const INSERT_PIPELINES = 1;

const WORKER_URL = new URL('./sqlite-worker.mjs', import.meta.url);

/** The one-line reason when a `sqlite:` URL is used and better-sqlite3 is not installed. */
export const SQLITE_MODULE_MISSING =
  'a sqlite: database needs the optional dependency better-sqlite3, which is not installed (npm install --omit=optional leaves it out): run `npm install better-sqlite3`, or use a postgres:// URL';

/** Whether better-sqlite3 can be loaded from here (where the worker loads it); resolved, not loaded. */
function sqliteModuleInstalled(): boolean {
  try {
    import.meta.resolve('better-sqlite3');
    return true;
  } catch {
    return false;
  }
}

/**
 * Opens a SQLite database file as a driver: starts its worker, which opens
 * the file and sets WAL, `synchronous = FULL`, foreign keys and the busy timeout.
 *
 * @throws OnejobError `database_unavailable` when the file cannot be opened.
 * @example const driver = await openSqliteDriver({ path: './onejob.db' });
 */
export async function openSqliteDriver(options: SqliteDriverOptions): Promise<Driver> {
  if (!sqliteModuleInstalled()) throw new OnejobError('config_invalid', SQLITE_MODULE_MISSING);
  const spawn = async (): Promise<Worker> => {
    try {
      return await startWorker(options);
    } catch (e) {
      // One line: a native module that failed to load explains itself over many.
      throw new OnejobError('database_unavailable', `cannot open SQLite database ${options.path}: ${(e as Error).message.split('\n')[0]}`, { cause: e });
    }
  };
  return new SqliteDriver(await spawn(), spawn, options.path, { maxBusyAttempts: options.maxBusyAttempts ?? 4, maxQueued: options.maxQueued ?? 2_000 });
}

/** Starts a worker on the file and waits until it has opened it. */
async function startWorker(options: SqliteDriverOptions): Promise<Worker> {
  // execArgv []: the worker is plain JavaScript and needs no loader (e.g. tsx) from the parent's flags.
  const worker = new Worker(WORKER_URL, { workerData: { path: options.path, busyTimeoutMs: options.busyTimeoutMs ?? 5000 }, execArgv: [] });
  let onMessage = (_m: { t: string; e?: ErrInfo }): void => undefined;
  let onError = (_e: Error): void => undefined;
  let onExit = (_code: number): void => undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onMessage = (m) => (m.t === 'ready' ? resolve() : reject(toError(m.e ?? { name: 'Error', message: 'the worker did not start' })));
      onError = reject;
      onExit = (code) => reject(new Error(`the SQLite worker exited (code ${code})`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
    });
  } catch (e) {
    await worker.terminate();
    throw e;
  } finally {
    // Only our own listeners: the Worker keeps internal ones (its port's referencing) that must stay.
    worker.off('message', onMessage).off('error', onError).off('exit', onExit);
  }
  return worker;
}

/** How a driver's dead worker is started again: the first try at once, then with doubling pauses up to this. */
const RESTART_MAX_PAUSE_MS = 5_000;
/** Failed restarts in a row after which the driver says the process cannot serve (`/healthz` 503). */
const RESTARTS_BEFORE_UNHEALTHY = 3;
/** Deaths within a minute after which the driver says so too (a worker that dies again as soon as it starts). */
const DEATHS_PER_MINUTE_UNHEALTHY = 5;

/** The worker of a SQLite driver (tests and diagnostics: `terminate()` it to see the driver recover). */
export function sqliteWorkerOf(driver: Driver): Worker | null {
  return driver instanceof SqliteDriver ? driver.worker : null;
}

class SqliteDriver implements Driver {
  readonly name = 'sqlite';
  readonly capabilities = { supportsListenNotify: false } as const;
  readonly queries: DriverQueries;
  readonly insights: InsightQueries;
  #worker: Worker;
  readonly #spawn: () => Promise<Worker>;
  readonly #path: string;
  /** A new worker is being started after the last one died. */
  #restarting = false;
  /** Restarts that failed since the last worker that started. */
  #failedRestarts = 0;
  #lastRestartError: string | null = null;
  /** When workers died (ms), the last minute's. */
  #deaths: number[] = [];
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  #nextId = 1;
  /** Set once the worker is gone (crashed or closed): every request fails with it. */
  #dead: OnejobError | null = null;
  #closed = false;
  /** A transaction holds the connection (between its first statement and its COMMIT/ROLLBACK reply). */
  #held = false;
  /** FIFO of work waiting for the gate; each entry returns whether it now holds it. */
  #gate: (() => boolean)[] = [];
  readonly #maxBusyAttempts: number;
  readonly #maxQueued: number;

  constructor(worker: Worker, spawn: () => Promise<Worker>, path: string, limits: { maxBusyAttempts: number; maxQueued: number }) {
    this.#worker = worker;
    this.#spawn = spawn;
    this.#path = path;
    this.#maxBusyAttempts = Math.max(1, limits.maxBusyAttempts);
    this.#maxQueued = Math.max(1, limits.maxQueued);
    this.#attach(worker);
    const auto = this.#makeQueries((k, s, p) => this.#whileBusy(() => this.#auto({ t: 'q', tx: 0, k, s, p })));
    // The autocommit writes that stand alone go through the group commit.
    this.queries = { ...auto, ...scriptedWrites(this.#grouped) };
    const exec = (k: Kind) => (sql: string, ...args: unknown[]) => this.#auto<never>({ t: 'q', tx: 0, k, s: sql, p: args });
    this.insights = sqliteInsightQueries({ all: exec('all'), get: exec('get') }, { job: toJob, attempt: toAttempt, event: toEvent });
  }

  /** The current worker. */
  get worker(): Worker {
    return this.#worker;
  }

  /** Listens to `worker`; events of a worker that is no longer the current one are ignored. */
  #attach(worker: Worker): void {
    const current = () => worker === this.#worker;
    worker.on('message', (r: Reply) => current() && this.#onReply(r));
    worker.on('error', (e) => current() && this.#died(`the SQLite worker failed: ${e.message}`, e));
    worker.on('messageerror', (e) => {
      if (!current()) return;
      this.#died(`a reply from the SQLite worker could not be read: ${e.message}`, e);
      void worker.terminate();
    });
    worker.on('exit', (code) => current() && this.#died(`the SQLite worker exited (code ${code})`, undefined));
    worker.unref(); // referenced only while a reply is awaited, like a socket with a request on it
  }

  /** The worker died: fail what waits for it, and (unless closing) start a new one. */
  #died(message: string, cause: unknown): void {
    this.#fail(this.#closed ? message : `${message}; starting a new one`, cause);
    if (this.#closed) return;
    const now = Date.now();
    this.#deaths = [...this.#deaths.filter((t) => now - t < 60_000), now];
    void this.#restart();
  }

  /** Starts workers until one opens the file (pauses doubling up to {@link RESTART_MAX_PAUSE_MS}). */
  async #restart(): Promise<void> {
    if (this.#restarting) return;
    this.#restarting = true;
    let pauseMs = 100;
    try {
      while (!this.#closed) {
        try {
          const worker = await this.#spawn();
          if (this.#closed) {
            await worker.terminate();
            return;
          }
          this.#worker = worker;
          this.#attach(worker);
          this.#dead = null;
          this.#failedRestarts = 0;
          this.#lastRestartError = null;
          return;
        } catch (e) {
          this.#failedRestarts++;
          this.#lastRestartError = (e as Error).message;
          await new Promise((r) => setTimeout(r, pauseMs).unref());
          pauseMs = Math.min(pauseMs * 2, RESTART_MAX_PAUSE_MS);
        }
      }
    } finally {
      this.#restarting = false;
    }
  }

  /**
   * Null while the driver can serve (its worker runs, or a new one is being
   * started after a death); else why not: the worker died and
   * {@link RESTARTS_BEFORE_UNHEALTHY} restarts in a row failed, or workers
   * died {@link DEATHS_PER_MINUTE_UNHEALTHY} times within a minute.
   */
  liveness(): string | null {
    if (this.#closed) return null;
    if (this.#failedRestarts >= RESTARTS_BEFORE_UNHEALTHY) {
      return `the SQLite worker died and ${this.#failedRestarts} restarts failed (last: ${this.#lastRestartError ?? 'unknown'})`;
    }
    const now = Date.now();
    const recent = this.#deaths.filter((t) => now - t < 60_000).length;
    if (recent >= DEATHS_PER_MINUTE_UNHEALTHY) return `the SQLite worker died ${recent} times in the last minute`;
    return null;
  }

  /**
   * Runs `op` again while it fails with `SQLITE_BUSY`/`SQLITE_LOCKED` (another
   * process held the lock past the busy timeout), at most `maxBusyAttempts`
   * times; a transient failure that remains becomes `database_unavailable`.
   */
  async #whileBusy<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await op();
      } catch (e) {
        if (e instanceof OnejobError || !isTransientDatabaseError(e)) throw e;
        if (attempt >= this.#maxBusyAttempts) {
          throw new OnejobError('database_unavailable', `SQLite database ${this.#path} stayed locked by another process: ${(e as Error).message}`, { cause: e });
        }
        await new Promise((r) => setTimeout(r, 10 * attempt + Math.random() * 40));
      }
    }
  }

  #refuseIfFull(waiting: number, what: string): void {
    if (waiting >= this.#maxQueued) throw new OnejobError('unavailable', `${waiting} ${what} are already waiting for the SQLite database ${this.#path}`);
  }

  /**
   * Runs `fn` in one `BEGIN IMMEDIATE` transaction. `SQLITE_BUSY` (another
   * process kept the write lock past the busy timeout) rolls back and runs
   * `fn` again (see {@link #whileBusy}), so `fn` must touch nothing but the database.
   */
  transaction<T>(fn: (q: DriverQueries) => Promise<T>): Promise<T> {
    return this.#whileBusy(() => this.#transactionOnce(fn));
  }

  /** See {@link Driver.readSnapshot}: one transaction, as {@link transaction}. */
  readSnapshot<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    return this.#whileBusy(() => this.#transactionOnce(fn));
  }

  async #transactionOnce<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    return this.#exclusive(async () => {
      const tx = { begun: false, done: false };
      // BEGIN IMMEDIATE travels with the first statement (one round trip fewer); a transaction with no statement sends nothing.
      const exec = (k: Kind, s: string, p: unknown[]): Promise<unknown> => {
        if (tx.done) return Promise.reject(new Error('a statement was issued after its transaction ended'));
        const mode = tx.begun ? 1 : 2;
        tx.begun = true;
        return this.#send({ t: 'q', tx: mode, k, s, p }, true);
      };
      const q = this.#makeQueries(exec);
      const insights = sqliteInsightQueries(
        { all: ((sql: string, ...args: unknown[]) => exec('all', sql, args)) as never, get: ((sql: string, ...args: unknown[]) => exec('get', sql, args)) as never },
        { job: toJob, attempt: toAttempt, event: toEvent },
      );
      try {
        const out = await fn(q, insights);
        tx.done = true;
        if (tx.begun) await this.#send({ t: 'commit' }, true);
        return out;
      } catch (e) {
        tx.done = true;
        if (tx.begun) await this.#send({ t: 'rollback' }, true).catch(() => undefined);
        throw e;
      }
    });
  }

  async migrate(): Promise<MigrationResult[]> {
    const migrations = loadMigrations('sqlite').map((m) => ({ version: m.version, name: m.name, sql: m.sql }));
    return this.#auto<MigrationResult[]>({ t: 'migrate', migrations, now: Date.now() });
  }

  async pendingMigrations(): Promise<number[]> {
    const done = new Set(await this.#auto<number[]>({ t: 'versions' }));
    return loadMigrations('sqlite').map((m) => m.version).filter((v) => !done.has(v));
  }

  async ping(): Promise<void> {
    await this.#auto({ t: 'q', tx: 0, k: 'get', s: 'SELECT 1', p: [] });
  }

  async notifyWork(): Promise<void> {
    // No cross-process signal on SQLite; the store signals its own process and executors poll slowly.
  }

  async onWork(): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  async onJobNotification(): Promise<null> {
    // No cross-process signal: waiters re-check the states of their jobs periodically (one batched read).
    return null;
  }

  async onStreamNotification(): Promise<null> {
    // No cross-process signal: a stream's readers elsewhere re-read its batches periodically.
    return null;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Whatever holds or waits for the gate goes first (waiters that start now fail as closed).
    await new Promise<void>((resolve) => this.#whenFree(() => (resolve(), false)));
    if (!this.#dead) await this.#send({ t: 'close' }, true).catch(() => undefined);
    this.#dead ??= new OnejobError('database_unavailable', 'the SQLite database is closed');
    await this.#worker.terminate();
  }

  // ---- messaging ------------------------------------------------------------

  /** Posts `msg` and resolves with the worker's answer. `force`: allowed while closing (a running transaction, the close itself). */
  #send<T>(msg: Request, force = false): Promise<T> {
    if (this.#dead) return Promise.reject(this.#dead);
    if (this.#closed && !force) return Promise.reject(closedError());
    return new Promise<T>((resolve, reject) => {
      const id = this.#nextId++;
      msg.id = id;
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (this.#pending.size === 1) this.#worker.ref();
      try {
        this.#worker.postMessage(msg);
      } catch (e) {
        this.#settled(id);
        reject(e);
      }
    });
  }

  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.unref();
  }

  #onReply(r: Reply): void {
    const p = this.#pending.get(r.id);
    if (!p) return;
    this.#settled(r.id);
    if (r.e) p.reject(toError(r.e));
    else p.resolve(r.v);
  }

  /** The worker is gone: fail everyone waiting, and everyone after. */
  #fail(message: string, cause: unknown): void {
    if (!this.#dead) this.#dead = new OnejobError('database_unavailable', `${message} (${this.#path})`, cause === undefined ? {} : { cause });
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of waiting) p.reject(this.#dead);
  }

  // ---- the gate ---------------------------------------------------------------

  /** Runs `take` now if nothing holds or waits for the gate, else after everything queued before it. */
  #whenFree(take: () => boolean): void {
    if (!this.#held && this.#gate.length === 0) this.#held = take();
    else this.#gate.push(take);
  }

  #release(): void {
    this.#held = false;
    while (!this.#held && this.#gate.length > 0) this.#held = this.#gate.shift()!();
  }

  /** A self-contained request: posted once no transaction holds the gate; does not hold it. */
  #auto<T>(msg: Request): Promise<T> {
    try {
      this.#refuseIfFull(this.#gate.length, 'calls');
      this.#refuseIfFull(this.#pending.size, 'statements');
    } catch (e) {
      return Promise.reject(e);
    }
    if (!this.#held && this.#gate.length === 0) return this.#send<T>(msg);
    return new Promise<T>((resolve, reject) => this.#gate.push(() => (this.#send<T>(msg).then(resolve, reject), false)));
  }

  /** Holds the gate while `fn` runs (a transaction). */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    try {
      this.#refuseIfFull(this.#gate.length, 'transactions');
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<T>((resolve, reject) =>
      this.#whenFree(() => {
        if (this.#closed || this.#dead) {
          reject(this.#dead ?? closedError());
          return false;
        }
        void fn().then(resolve, reject).finally(() => this.#release());
        return true;
      }),
    );
  }

  /**
   * Group commit of autocommit scripts (a job insert, the fast path's create
   * and settle): calls that arrive while a batch is on its way (or while a
   * transaction holds the gate) wait together and go as ONE message, written
   * by the worker in one `BEGIN IMMEDIATE … COMMIT` (one WAL sync for all of
   * them, `synchronous = FULL` kept). Each script runs in its own savepoint,
   * so a failing one (a CHECK, say) fails only its caller; every caller is
   * answered after the COMMIT.
   */
  readonly #grouped = (steps: ScriptStep[]): Promise<unknown[]> =>
    this.#whileBusy(() => new Promise((resolve, reject) => {
      if (this.#scriptQueue.length >= this.#maxQueued) {
        reject(new OnejobError('unavailable', `${this.#scriptQueue.length} writes are already waiting for the SQLite database ${this.#path}`));
        return;
      }
      this.#scriptQueue.push({ steps, resolve, reject });
      this.#pumpScripts();
    }));

  #scriptQueue: { readonly steps: ScriptStep[]; readonly resolve: (results: unknown[]) => void; readonly reject: (e: unknown) => void }[] = [];
  #scriptBatchesOut = 0;
  #scriptBatchWaiting = false;

  #pumpScripts(): void {
    if (this.#scriptBatchWaiting || this.#scriptBatchesOut >= INSERT_PIPELINES || this.#scriptQueue.length === 0) return;
    this.#scriptBatchWaiting = true;
    this.#scriptBatchesOut++;
    this.#whenFree(() => {
      this.#scriptBatchWaiting = false;
      const batch = this.#scriptQueue;
      this.#scriptQueue = [];
      this.#send<BatchEntry[]>({ t: 'sb', scripts: batch.map((p) => p.steps) })
        .then(
          (entries) => {
            batch.forEach((p, i) => {
              const r = entries[i];
              if (!r) p.reject(new Error('the SQLite worker answered fewer scripts than sent'));
              else if (r.e) p.reject(toError(r.e));
              else p.resolve(r.v);
            });
          },
          (e: unknown) => {
            for (const p of batch) p.reject(e);
          },
        )
        .finally(() => {
          this.#scriptBatchesOut--;
          this.#pumpScripts();
        });
      return false;
    });
  }

  // ---- queries ------------------------------------------------------------------

  /** The named queries over `exec` (autocommit, or one transaction's). */
  #makeQueries(exec: (k: Kind, sql: string, args: unknown[]) => Promise<unknown>): DriverQueries {
    // Inside a transaction a script's steps are plain statements, one after another.
    const script = async (steps: ScriptStep[]): Promise<unknown[]> => {
      const results: unknown[] = [];
      for (const step of steps) results.push(step.if !== undefined && !stepApplied(results[step.if]) ? null : ((await exec(step.k, step.s, step.p)) ?? null));
      return results;
    };
    const get = (sql: string, ...args: unknown[]) => exec('get', sql, args) as Promise<Row | undefined>;
    const all = (sql: string, ...args: unknown[]) => exec('all', sql, args) as Promise<Row[]>;
    const run = (sql: string, ...args: unknown[]) => exec('run', sql, args) as Promise<number>;
    return {
      dbNow: async () => new Date(Number((await get(J.DB_NOW))!.now)),
      ...scriptedWrites(script),
      jobStates: async (refs) =>
        refs.length === 0 ? [] : (await all(J.JOB_STATES, { refs: json(refs.map((r) => [r.ownerId, r.jobId])) })).map((r) => ({ id: String(r.id), state: r.state as JobState })),
      jobGetByKey: async (ownerId, key) => mapOne(await get(J.JOB_GET_BY_KEY, ownerId, key), toJob),
      jobGetByKeylessFingerprint: async (p) =>
        mapOne(await get(J.JOB_GET_BY_KEYLESS_FINGERPRINT, { ownerId: p.ownerId, fingerprint: p.fingerprint, windowMs: p.windowMs, now: ms(p.now) }), toJob),
      jobGet: async (ownerId, id) => mapOne(await get(J.JOB_GET, ownerId, id), toJob),
      jobList: async (p: JobListParams) =>
        (await all(J.JOB_LIST, {
          ownerId: p.ownerId, state: p.state ?? null, limit: p.limit,
          afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null,
        })).map(toJob),
      jobUpdateProgress: async (p: JobProgressParams) =>
        (await run(J.JOB_UPDATE_PROGRESS, { ownerId: p.ownerId, id: p.id, state: p.state, attemptCount: p.attemptCount, skipped: json(p.skipped), updatedAt: p.updatedAt.getTime() })) === 1,
      jobFinish: async (p: JobFinishParams) =>
        (await run(J.JOB_FINISH, {
          ownerId: p.ownerId, id: p.id, expectedVersion: p.expectedVersion, state: p.state, completedBy: p.completedBy,
          result: json(p.result), error: p.error === null ? null : json(p.error), skipped: json(p.skipped), now: p.now.getTime(),
        })) === 1,
      jobStreamOwner: async (ownerId, id) => ((await get(J.JOB_STREAM_OWNER, ownerId, id))?.stream_attempt_id as string | null | undefined) ?? null,
      streamBatchInsert: async (r) => void (await run(S.STREAM_BATCH_INSERT, { ownerId: r.ownerId, jobId: r.jobId, attemptNumber: r.attemptNumber, seq: r.seq, events: r.events })),
      streamBatchList: async (ownerId, jobId, attemptNumber, afterSeq) =>
        (await all(S.STREAM_BATCH_LIST, { ownerId, jobId, attemptNumber, afterSeq })).map((r) => ({
          ownerId: String(r.owner_id), jobId: String(r.job_id), attemptNumber: Number(r.attempt_number), seq: Number(r.seq), events: String(r.events),
        })),
      jobListQueuedForUpdate: async (limit) => (await all(J.JOB_LIST_QUEUED, limit)).map(toJob),

      attemptInsert: async (r: AttemptInsertRow) => {
        await run(A.ATTEMPT_INSERT, {
          ownerId: r.ownerId, id: r.id, jobId: r.jobId, number: r.number, provider: r.provider, kind: r.kind, state: r.state,
          baseVersion: r.baseVersion, startedAt: r.startedAt.getTime(), deadlineAt: ms(r.deadlineAt),
          leaseOwner: r.leaseOwner, leaseToken: r.leaseToken, leaseExpiresAt: ms(r.leaseExpiresAt),
        });
      },
      attemptListByJob: async (ownerId, jobId) => (await all(A.ATTEMPT_LIST_BY_JOB, ownerId, jobId)).map(toAttempt),
      attemptListByJobs: async (ownerId, jobIds) => (await all(A.ATTEMPT_LIST_BY_JOBS, ownerId, json(jobIds))).map(toAttempt),
      attemptGet: async (ownerId, id) => mapOne(await get(A.ATTEMPT_GET, ownerId, id), toAttempt),
      attemptUpdate: async (p: AttemptUpdateParams) => {
        const { sql, params } = attemptUpdateSql(p);
        return (await run(sql, params)) === 1;
      },
      attemptClaim: async (p: AttemptClaimParams) =>
        (await all(A.ATTEMPT_CLAIM, { leaseOwner: p.leaseOwner, leaseExpiresAt: p.leaseExpiresAt.getTime(), limit: p.limit, now: p.now.getTime() }))
          .map(toAttempt).sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime()),
      attemptExtendLeases: async (p: LeaseExtendParams) =>
        (await all(A.ATTEMPT_EXTEND_LEASES, { leaseOwner: p.leaseOwner, tokens: json(p.leaseTokens), leaseExpiresAt: p.leaseExpiresAt.getTime(), now: p.now.getTime() }))
          .map((r) => String(r.lease_token)),
      attemptListLeaseExpired: async (now, limit) => (await all(A.ATTEMPT_LIST_LEASE_EXPIRED, { now: now.getTime(), limit })).map(toAttempt),

      eventInsert: async (rows: readonly EventInsertRow[]) => {
        if (rows.length === 0) return;
        // One message for all rows; the worker runs them in order and stops at the first failure.
        await exec('each', E.EVENT_INSERT, rows.map((e) => [{ ownerId: e.ownerId, jobId: e.jobId, attemptId: e.attemptId, type: e.type, data: json(e.data), at: e.at.getTime() }]));
      },
      eventList: async (ownerId, jobId) => (await all(E.EVENT_LIST, ownerId, jobId)).map(toEvent),
      eventListAll: async (afterId, limit) => (await all(E.EVENT_LIST_ALL, afterId, limit)).map(toEvent),
      certificationUpsert: async (row) => void (await run(C.CERTIFICATION_UPSERT, C.certificationParams(row))),
      certificationList: async () => (await all(C.CERTIFICATION_LIST)).map(C.toCertification),
      certificationVerdicts: async (providers) => (providers.length === 0 ? [] : (await all(C.CERTIFICATION_VERDICTS, json(providers))).map(C.toVerdict)),

      attemptClaimLookups: async (p: LookupClaimParams) =>
        p.providers.length === 0 || p.limit <= 0
          ? []
          : (await all(L.LOOKUP_CLAIM, {
              holder: p.holder, providers: json(p.providers), limit: p.limit, leaseMs: p.leaseMs, firstCheckMs: p.firstCheckMs, now: ms(p.now),
            })).map(toAttempt),
      attemptDeferLookup: async (p: LookupDeferParams) =>
        (await run(L.LOOKUP_DEFER, {
          ownerId: p.ownerId, id: p.id, holder: p.holder, backoffBaseMs: p.backoffBaseMs, backoffMaxMs: p.backoffMaxMs, now: ms(p.now),
        })) === 1,
      attemptOldestUnknownAt: async () => date((await get(L.LOOKUP_OLDEST_UNKNOWN))?.at),
      attemptCountInDoubt: async () => Number((await get(AD.ATTEMPT_COUNT_IN_DOUBT))?.n ?? 0),
      jobListAll: async (p) =>
        (await all(AD.JOB_LIST_ALL, {
          state: p.state ?? null, limit: p.limit, afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null,
        })).map(toJob),
      jobGetAnyOwner: async (id) => mapOne(await get(AD.JOB_GET_ANY_OWNER, id), toJob),
      attemptGetAnyOwner: async (id) => mapOne(await get(AD.ATTEMPT_GET_ANY_OWNER, id), toAttempt),

      maintenanceLeaseAcquire: async (p) => (await get(R.MAINTENANCE_LEASE_ACQUIRE, { name: p.name, holder: p.holder, ttlMs: p.ttlMs })) !== undefined,
      maintenanceLeaseRelease: async (p) => void (await run(R.MAINTENANCE_LEASE_RELEASE, p.name, p.holder)),
      retentionDeleteBatch: async (p) => {
        const cutoff = Number((await get(R.RETENTION_CUTOFF, { olderThanMs: p.olderThanMs }))!.cutoff);
        const args = { cutoff, limit: p.limit };
        const jobsByState: Record<string, number> = {};
        for (const r of await all(R.RETENTION_COUNT, args)) jobsByState[String(r.state)] = Number(r.n);
        const events = await run(R.RETENTION_DELETE_EVENTS, args);
        await run(R.RETENTION_DELETE_STREAM, args);
        const attempts = await run(R.RETENTION_DELETE_ATTEMPTS, args);
        const jobs = await run(R.RETENTION_DELETE_JOBS, args);
        return { jobsByState, jobs, attempts, events };
      },
    };
  }
}

/** Whether a script step applied (the worker's `applied`, on this side). */
function stepApplied(result: unknown): boolean {
  if (result === null || result === undefined) return false;
  if (typeof result === 'number') return result > 0;
  if (Array.isArray(result)) return result.length > 0;
  return true;
}

/**
 * The writes that are scripts: the job insert, and the fast path's create
 * with its first attempt and winning settle (see `DriverQueries`), over
 * `script` (the group commit, or a transaction's statements).
 */
function scriptedWrites(
  script: (steps: ScriptStep[]) => Promise<unknown[]>,
): Pick<DriverQueries, 'jobInsert' | 'jobInsertKeyless' | 'jobInsertLeased' | 'attemptSettleWon' | 'jobStreamClaim' | 'attemptMarkRunning'> {
  return {
    jobStreamClaim: async (p: JobStreamClaimParams) => {
      const now = (p.now ?? new Date()).getTime();
      const [claimed] = await script([
        { k: 'run', s: J.JOB_STREAM_CLAIM, p: [{ ownerId: p.ownerId, id: p.id, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now }] },
        { k: 'run', s: E.EVENT_INSERT, if: 0, p: [{ ownerId: p.ownerId, jobId: p.id, attemptId: p.attemptId, type: 'attempt.stream_claimed', data: '{}', at: now }] },
        { k: 'run', s: A.ATTEMPT_CLEAR_DEADLINE, if: 0, p: [{ ownerId: p.ownerId, attemptId: p.attemptId }] },
      ]);
      return claimed === 1;
    },
    attemptMarkRunning: async (p: MarkRunningParams) => {
      const now = (p.now ?? new Date()).getTime();
      const deadlineAt = p.timeoutMs === null ? null : now + p.timeoutMs;
      const [marked] = await script([
        { k: 'get', s: A.ATTEMPT_MARK_RUNNING, p: [{ ownerId: p.ownerId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now, deadlineAt }] },
        {
          k: 'run', s: A.ATTEMPT_RUNNING_EVENT, if: 0,
          p: [{ ownerId: p.ownerId, attemptId: p.attemptId, data: json({ deadline_at: deadlineAt === null ? null : new Date(deadlineAt).toISOString() }), at: now }],
        },
      ]);
      return Boolean(marked);
    },
    jobInsert: async (r: JobInsertRow) => {
      const [job] = await script([{ k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'queued')] }]);
      return job ? toJob(job as Row) : null;
    },
    jobInsertKeyless: async (r) => {
      const [job] = await script([{ k: 'get', s: J.JOB_INSERT_KEYLESS, p: [{ ...jobInsertParams(r, 'queued'), keylessFingerprint: r.keylessFingerprint }] }]);
      return job ? toJob(job as Row) : null;
    },
    jobInsertLeased: async (r: JobInsertRow, a: FirstAttemptRow) => {
      const now = (a.now ?? new Date()).getTime();
      const [job, attempt] = await script([
        { k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'running')] },
        {
          k: 'get', s: A.ATTEMPT_INSERT_RETURNING, if: 0,
          p: [{
            ownerId: r.ownerId, id: a.id, jobId: r.id, number: 1, provider: a.provider, kind: 'first', state: 'starting', baseVersion: 0,
            startedAt: now, deadlineAt: null, leaseOwner: a.leaseOwner, leaseToken: a.leaseToken, leaseExpiresAt: now + a.leaseMs,
          }],
        },
        {
          k: 'run', s: E.EVENT_INSERT, if: 1,
          p: [{ ownerId: r.ownerId, jobId: r.id, attemptId: a.id, type: 'attempt.started', data: json({ number: 1, provider: a.provider, kind: 'first', lease_owner: a.leaseOwner }), at: now }],
        },
      ]);
      return job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null;
    },
    attemptSettleWon: async (p: SettleWonParams) => {
      const now = (p.now ?? new Date()).getTime();
      const withUsage = p.usage !== undefined;
      const event = (type: string) => [{ ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, type, data: json({ actor: p.actor }), at: now }];
      const [attempt, job] = await script([
        {
          k: 'get', s: A.ATTEMPT_SETTLE_WON,
          p: [{
            ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now,
            withUsage: withUsage ? 1 : 0, promptTokens: p.usage?.promptTokens ?? null, completionTokens: p.usage?.completionTokens ?? null,
            totalTokens: p.usage?.totalTokens ?? null, costMicros: withUsage ? (p.costMicros ?? null) : null,
            providerRequestId: p.providerRequestId ?? null,
          }],
        },
        { k: 'get', s: J.JOB_SETTLE_WON, if: 0, p: [{ ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, result: json(p.result), now }] },
        { k: 'each', s: E.EVENT_INSERT, if: 1, p: [event('attempt.succeeded'), event('job.succeeded')] },
      ]);
      return job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null;
    },
  };
}

function jobInsertParams(r: JobInsertRow, state: 'queued' | 'running'): Record<string, unknown> {
  return {
    ownerId: r.ownerId, id: r.id, idempotencyKey: r.idempotencyKey, fingerprint: r.fingerprint, route: r.route,
    input: json(r.input), metadata: r.metadata === null ? null : json(r.metadata), providers: json(r.providers), createdAt: r.createdAt.getTime(),
    traceContext: r.traceContext ?? null, state, attemptCount: state === 'running' ? 1 : 0,
  };
}

function closedError(): OnejobError {
  return new OnejobError('database_unavailable', 'the SQLite database is closed');
}

/** An error reported by the worker, rebuilt on this thread (SQLite errors keep their class and `code`). */
function toError(e: ErrInfo): Error {
  const err = new Error(e.message);
  if (e.name !== 'Error') err.name = e.name;
  // SQLite's result code (`SQLITE_BUSY`, …) as better-sqlite3's SqliteError carries it: errors are classified by it.
  if (e.code !== undefined) Object.assign(err, { code: e.code });
  return err;
}

/** Builds the guarded UPDATE of {@link DriverQueries.attemptUpdate}. */
function attemptUpdateSql(p: AttemptUpdateParams): { sql: string; params: Record<string, unknown> } {
  const sets: string[] = [];
  const params: Record<string, unknown> = { ownerId: p.ownerId, id: p.id, fromStates: json(p.fromStates) };
  const s = p.set;
  if (s.state !== undefined) (sets.push('state = @state'), (params.state = s.state));
  if (s.startedAt !== undefined) (sets.push('started_at = @startedAt'), (params.startedAt = s.startedAt.getTime()));
  if (s.deadlineAt !== undefined) (sets.push('deadline_at = @deadlineAt'), (params.deadlineAt = ms(s.deadlineAt)));
  if (s.finishedAt !== undefined) (sets.push('finished_at = @finishedAt'), (params.finishedAt = ms(s.finishedAt)));
  if (s.error !== undefined) (sets.push('error = @error'), (params.error = s.error === null ? null : json(s.error)));
  if (s.leaseExpiresAt !== undefined) (sets.push('lease_expires_at = @leaseExpiresAt'), (params.leaseExpiresAt = s.leaseExpiresAt.getTime()));
  if (s.releaseLease) sets.push('lease_owner = NULL', 'lease_expires_at = NULL');
  if (s.usage !== undefined) {
    sets.push('prompt_tokens = @promptTokens', 'completion_tokens = @completionTokens', 'total_tokens = @totalTokens');
    Object.assign(params, { promptTokens: s.usage?.promptTokens ?? null, completionTokens: s.usage?.completionTokens ?? null, totalTokens: s.usage?.totalTokens ?? null });
  }
  if (s.costMicros !== undefined) (sets.push('cost_micros = @costMicros'), (params.costMicros = s.costMicros));
  if (s.providerRequestId !== undefined) (sets.push('provider_request_id = @providerRequestId'), (params.providerRequestId = s.providerRequestId));
  if (s.resolvedBy !== undefined) (sets.push('resolved_by = @resolvedBy'), (params.resolvedBy = s.resolvedBy));
  if (s.unknownAt !== undefined) (sets.push('unknown_at = @unknownAt'), (params.unknownAt = ms(s.unknownAt)));
  if (s.lookupNextAt !== undefined) (sets.push('lookup_next_at = @lookupNextAt'), (params.lookupNextAt = ms(s.lookupNextAt)));
  if (sets.length === 0) throw new Error('attemptUpdate with nothing to set');
  let where = 'owner_id = @ownerId AND id = @id AND state IN (SELECT value FROM json_each(@fromStates))';
  if (p.fence && p.fence.now === null) {
    // The token alone (an answer whose lease ran out while nobody else took the attempt).
    where += ' AND (lease_owner = @leaseOwner OR lease_owner IS NULL) AND lease_token = @leaseToken';
    params.leaseOwner = p.fence.leaseOwner;
    params.leaseToken = p.fence.leaseToken;
  } else if (p.fence && p.fence.now !== null) {
    where += ' AND lease_owner = @leaseOwner AND lease_token = @leaseToken AND lease_expires_at > @now';
    params.leaseOwner = p.fence.leaseOwner;
    params.leaseToken = p.fence.leaseToken;
    params.now = p.fence.now.getTime();
  }
  return { sql: `UPDATE attempts SET ${sets.join(', ')} WHERE ${where}`, params };
}

function json(v: unknown): string {
  return JSON.stringify(v === undefined ? null : v);
}
function parse(v: unknown): unknown {
  return v === null || v === undefined ? null : JSON.parse(String(v));
}
function ms(d: Date | null | undefined): number | null {
  return d ? d.getTime() : null;
}
function date(v: unknown): Date | null {
  return v === null || v === undefined ? null : new Date(Number(v));
}
function mapOne<T>(row: Row | undefined, f: (r: Row) => T): T | null {
  return row ? f(row) : null;
}

function toJob(r: Row): Job {
  return {
    id: String(r.id),
    ownerId: String(r.owner_id),
    idempotencyKey: String(r.idempotency_key),
    fingerprint: String(r.fingerprint),
    route: String(r.route),
    input: parse(r.input),
    metadata: parse(r.metadata) as Job['metadata'],
    providers: parse(r.providers) as string[],
    state: r.state as JobState,
    version: Number(r.version),
    completedBy: (r.completed_by as string | null) ?? null,
    result: parse(r.result),
    error: parse(r.error) as Job['error'],
    skipped: parse(r.skipped) as Job['skipped'],
    createdAt: date(r.created_at)!,
    updatedAt: date(r.updated_at)!,
    traceContext: (r.trace_context as string | null | undefined) ?? null,
  };
}

function toAttempt(r: Row): Attempt {
  return {
    id: String(r.id),
    ownerId: String(r.owner_id),
    jobId: String(r.job_id),
    number: Number(r.number),
    provider: String(r.provider),
    kind: r.kind as AttemptKind,
    state: r.state as AttemptState,
    baseVersion: Number(r.base_version),
    startedAt: date(r.started_at)!,
    deadlineAt: date(r.deadline_at),
    finishedAt: date(r.finished_at),
    error: parse(r.error) as Attempt['error'],
    leaseOwner: (r.lease_owner as string | null) ?? null,
    leaseToken: (r.lease_token as string | null) ?? null,
    leaseExpiresAt: date(r.lease_expires_at),
    usage: r.prompt_tokens === null || r.prompt_tokens === undefined
      ? null
      : { promptTokens: Number(r.prompt_tokens), completionTokens: Number(r.completion_tokens ?? 0), totalTokens: Number(r.total_tokens ?? 0) },
    costMicros: r.cost_micros === null || r.cost_micros === undefined ? null : Number(r.cost_micros),
    providerRequestId: (r.provider_request_id as string | null | undefined) ?? null,
    resolvedBy: (r.resolved_by as Attempt['resolvedBy'] | undefined) ?? null,
    unknownAt: date(r.unknown_at),
    lookupNextAt: date(r.lookup_next_at),
    lookupLastAt: date(r.lookup_last_at),
  };
}

function toEvent(r: Row): JobEvent {
  return {
    id: Number(r.id),
    ownerId: String(r.owner_id),
    jobId: String(r.job_id),
    attemptId: (r.attempt_id as string | null) ?? null,
    type: r.type as JobEventType,
    data: parse(r.data) as Record<string, unknown>,
    at: date(r.at)!,
  };
}
