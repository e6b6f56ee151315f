/**
 * The SQLite driver's connection: the worker thread that owns the one
 * connection, better-sqlite3's or node:sqlite's (`sqlite-worker.mjs`), the messages posted to it,
 * and the gate that keeps other callers' statements out of an open
 * transaction.
 *
 * better-sqlite3 is synchronous, so the connection lives in a `worker_threads`
 * worker: a commit's WAL sync or a busy-timeout wait blocks that thread,
 * never the event loop. The main thread posts one message per statement (or
 * per group commit, migration, COMMIT/ROLLBACK) and awaits its reply; the
 * worker runs messages one at a time in arrival order.
 *
 * Exclusivity: the store's transactions are async functions whose statements
 * are separate messages, so a transaction holds the gate from its first
 * statement (which carries `BEGIN IMMEDIATE`) to its COMMIT/ROLLBACK reply
 * ({@link SqliteConnection.exclusive}), and nothing else is posted meanwhile.
 * Self-contained requests (autocommit statements, a group commit, migrations)
 * are posted as soon as no transaction holds the gate, without waiting for
 * each other's replies ({@link SqliteConnection.auto}): the worker's queue
 * orders them. Everything waits in one FIFO, so nobody starves.
 *
 * If the worker dies, every waiting call fails with `database_unavailable`
 * and a new worker is started (see {@link SqliteConnection.liveness}).
 */
import { Worker } from 'node:worker_threads';
import { OnejobError } from '../../core/errors.ts';
import { isTransientDatabaseError } from '../transient-errors.ts';
import { SqliteEngineLoadError, type SqliteEngine } from './sqlite-engine.ts';

/** How the worker runs one statement: `each` runs it once per argument list (`p` is then a list of lists). */
export type Kind = 'get' | 'all' | 'run' | 'each';

/**
 * One statement of a script: run only when step `if` applied (returned a
 * row, changed rows); its result is null otherwise.
 */
export interface ScriptStep {
  readonly k: Kind;
  readonly s: string;
  readonly p: unknown[];
  readonly if?: number | undefined;
}

/** Messages to the worker (see sqlite-worker.mjs). Arguments are plain values: strings, numbers (dates as epoch ms), null. */
export type Request = { id?: number } & (
  /** `tx`: 0 autocommit, 1 inside the open transaction, 2 `BEGIN IMMEDIATE` first. */
  | { t: 'q'; tx: 0 | 1 | 2; k: Kind; s: string; p: unknown[] }
  /** Group commit of scripts: one entry per script in the reply (see sqlite-worker.mjs). */
  | { t: 'sb'; scripts: ScriptStep[][] }
  | { t: 'migrate'; migrations: { version: number; name: string; sql: string }[]; now: number }
  | { t: 'commit' | 'rollback' | 'versions' | 'close' }
);
export interface ErrInfo { name: string; message: string; code?: string | undefined }
interface Reply { id: number; v?: unknown; e?: ErrInfo }
/** One script's entry in the reply to an `sb` message. */
export type BatchEntry = { v: unknown[]; e?: undefined } | { e: ErrInfo };

const WORKER_URL = new URL('./sqlite-worker.mjs', import.meta.url);

/** The one-line reason when a `sqlite:` URL is used and better-sqlite3 is not installed. */
export const SQLITE_MODULE_MISSING =
  'a sqlite: database needs the optional dependency better-sqlite3, which is not installed (npm install --omit=optional leaves it out): run `npm install better-sqlite3`, or use a postgres:// URL';

/** Whether better-sqlite3 can be loaded from here (where the worker loads it); resolved, not loaded. */
export function sqliteModuleInstalled(): boolean {
  try {
    import.meta.resolve('better-sqlite3');
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a worker on the file with `engine` and waits until it has opened it.
 *
 * @throws SqliteEngineLoadError when the engine's library cannot be loaded (the caller may fall back);
 *   the error of opening the file otherwise.
 */
export async function startWorker(options: { readonly path: string; readonly busyTimeoutMs?: number | undefined; readonly engine: SqliteEngine }): Promise<Worker> {
  // execArgv: the worker is plain JavaScript and needs no loader (e.g. tsx) from the parent's flags; Node 22 warns
  // that node:sqlite is experimental on every load, a line the user can do nothing about (the banner names the engine).
  const execArgv = options.engine === 'node:sqlite' ? ['--disable-warning=ExperimentalWarning'] : [];
  const worker = new Worker(WORKER_URL, { workerData: { path: options.path, busyTimeoutMs: options.busyTimeoutMs ?? 5000, engine: options.engine }, execArgv });
  let onMessage = (_m: { t: string; e?: ErrInfo }): void => undefined;
  let onError = (_e: Error): void => undefined;
  let onExit = (_code: number): void => undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onMessage = (m) => {
        if (m.t === 'ready') resolve();
        else if (m.t === 'load_failed') reject(new SqliteEngineLoadError(options.engine, m.e?.message ?? 'the library did not load'));
        else reject(toError(m.e ?? { name: 'Error', message: 'the worker did not start' }));
      };
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

/** How a dead worker is started again: the first try at once, then with doubling pauses up to this. */
const RESTART_MAX_PAUSE_MS = 5_000;
/** Failed restarts in a row after which the connection says the process cannot serve (`/healthz` 503). */
const RESTARTS_BEFORE_UNHEALTHY = 3;
/** Deaths within a minute after which it says so too (a worker that dies again as soon as it starts). */
const DEATHS_PER_MINUTE_UNHEALTHY = 5;

export function closedError(): OnejobError {
  return new OnejobError('database_unavailable', 'the SQLite database is closed');
}

/** An error reported by the worker, rebuilt on this thread (SQLite errors keep their class and `code`). */
export function toError(e: ErrInfo): Error {
  const err = new Error(e.message);
  if (e.name !== 'Error') err.name = e.name;
  // SQLite's result code (`SQLITE_BUSY`, …) as better-sqlite3's SqliteError carries it: errors are classified by it.
  if (e.code !== undefined) Object.assign(err, { code: e.code });
  return err;
}

/**
 * One worker and its messages, the gate, and the restart after a death.
 * Bounds: the gate and the worker's queue each hold at most `maxQueued`
 * calls; one more is refused at once with `unavailable`.
 */
export class SqliteConnection {
  readonly path: string;
  readonly maxQueued: number;
  #worker: Worker;
  readonly #spawn: () => Promise<Worker>;
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

  constructor(worker: Worker, spawn: () => Promise<Worker>, path: string, limits: { maxBusyAttempts: number; maxQueued: number }) {
    this.#worker = worker;
    this.#spawn = spawn;
    this.path = path;
    this.#maxBusyAttempts = Math.max(1, limits.maxBusyAttempts);
    this.maxQueued = Math.max(1, limits.maxQueued);
    this.#attach(worker);
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
   * Null while the connection can serve (its worker runs, or a new one is
   * being started after a death); else why not: the worker died and
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
  async whileBusy<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await op();
      } catch (e) {
        if (e instanceof OnejobError || !isTransientDatabaseError(e)) throw e;
        if (attempt >= this.#maxBusyAttempts) {
          throw new OnejobError('database_unavailable', `SQLite database ${this.path} stayed locked by another process: ${(e as Error).message}`, { cause: e });
        }
        await new Promise((r) => setTimeout(r, 10 * attempt + Math.random() * 40));
      }
    }
  }

  /** Throws `unavailable` when `waiting` calls already wait (`what` names them). */
  refuseIfFull(waiting: number, what: string): void {
    if (waiting >= this.maxQueued) throw new OnejobError('unavailable', `${waiting} ${what} are already waiting for the SQLite database ${this.path}`);
  }

  /** Waits for whatever holds or waits for the gate, asks the worker to close its connection, and stops it. Once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Whatever holds or waits for the gate goes first (waiters that start now fail as closed).
    await new Promise<void>((resolve) => this.whenFree(() => (resolve(), false)));
    if (!this.#dead) await this.send({ t: 'close' }, true).catch(() => undefined);
    this.#dead ??= closedError();
    await this.#worker.terminate();
  }

  // ---- messaging ------------------------------------------------------------

  /** Posts `msg` and resolves with the worker's answer. `force`: allowed while closing (a running transaction, the close itself). */
  send<T>(msg: Request, force = false): Promise<T> {
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
    if (!this.#dead) this.#dead = new OnejobError('database_unavailable', `${message} (${this.path})`, cause === undefined ? {} : { cause });
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of waiting) p.reject(this.#dead);
  }

  // ---- the gate ---------------------------------------------------------------

  /** Runs `take` now if nothing holds or waits for the gate, else after everything queued before it; `take` returns whether it now holds the gate. */
  whenFree(take: () => boolean): void {
    if (!this.#held && this.#gate.length === 0) this.#held = take();
    else this.#gate.push(take);
  }

  #release(): void {
    this.#held = false;
    while (!this.#held && this.#gate.length > 0) this.#held = this.#gate.shift()!();
  }

  /** A self-contained request: posted once no transaction holds the gate; does not hold it. */
  auto<T>(msg: Request): Promise<T> {
    try {
      this.refuseIfFull(this.#gate.length, 'calls');
      this.refuseIfFull(this.#pending.size, 'statements');
    } catch (e) {
      return Promise.reject(e);
    }
    if (!this.#held && this.#gate.length === 0) return this.send<T>(msg);
    return new Promise<T>((resolve, reject) => this.#gate.push(() => (this.send<T>(msg).then(resolve, reject), false)));
  }

  /** Holds the gate while `fn` runs (a transaction). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    try {
      this.refuseIfFull(this.#gate.length, 'transactions');
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<T>((resolve, reject) =>
      this.whenFree(() => {
        if (this.#closed || this.#dead) {
          reject(this.#dead ?? closedError());
          return false;
        }
        void fn().then(resolve, reject).finally(() => this.#release());
        return true;
      }),
    );
  }
}
