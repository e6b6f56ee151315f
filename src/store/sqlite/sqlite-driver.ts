/**
 * The SQLite driver (better-sqlite3 or node:sqlite, WAL, `synchronous = FULL`): the embedded default.
 *
 * Split by concern:
 * - `sqlite-connection.ts`: the worker thread that owns the connection
 *   (`sqlite-worker.mjs`), its messages, the gate that keeps everyone else
 *   out of an open transaction, and the restart after the worker dies;
 * - `queries-on.ts`: the named statements of the `*-queries.ts` files as
 *   {@link DriverQueries}; `scripted-writes.ts`: the writes that are scripts;
 * - `group-commit.ts`: scripts in a transaction, and the SQLite lane of
 *   the group commit above the drivers (`../batched-queries.ts`);
 * - `row-mappers.ts`: arguments and rows.
 * This file puts them together: transactions, migrations, the notification
 * stubs (SQLite has no cross-process signal), close.
 *
 * Bounds: the gate, the group-commit queue and the worker's queue each hold
 * at most `maxQueued` calls; one more is refused at once with `unavailable`.
 * Several processes on one file: `busy_timeout` makes a writer wait for the
 * lock; a call that still finds it taken (`SQLITE_BUSY`) runs again, a
 * transaction as a whole.
 *
 * better-sqlite3 is an optional dependency (STYLE §18): only the worker
 * loads it, so a PostgreSQL-only install (`npm install --omit=optional`)
 * never needs it; opening a `sqlite:` database without it, or with a
 * better-sqlite3 that cannot load (built for another Node), runs on
 * `node:sqlite` where this Node has it, else fails with the whole cause and
 * the fix (`sqlite-engine.ts`; {@link SQLITE_MODULE_MISSING} when it is not
 * installed).
 */
import type { Worker } from 'node:worker_threads';
import { OnejobError } from '../../core/errors.ts';
import type { Driver, DriverQueries, MigrationResult } from '../driver.ts';
import type { InsightQueries } from '../insight-queries.ts';
import { loadMigrations } from '../migration-files.ts';
import { batchedQueries } from '../batched-queries.ts';
import { runScriptInOrder, scriptAlone, sqliteLane } from './group-commit.ts';
import { sqliteInsightQueries } from './insight-queries.ts';
import { queriesOn } from './queries-on.ts';
import { toAttempt, toEvent, toJob } from './row-mappers.ts';
import { SQLITE_MODULE_MISSING, SqliteConnection, sqliteModuleInstalled, startWorker, type Kind, type ScriptStep } from './sqlite-connection.ts';
import {
  engineUnavailableMessage, fallbackReasonOf, nodeSqliteExpected, nodeSqliteUnavailableMessage, SqliteEngineLoadError,
  type SqliteEngineChoice, type SqliteEngineInUse,
} from './sqlite-engine.ts';

export { SQLITE_MODULE_MISSING } from './sqlite-connection.ts';

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
  /** The library: `auto` (the default) is better-sqlite3 where it loads, else node:sqlite (sqlite-engine.ts). */
  readonly engine?: SqliteEngineChoice;
}

/**
 * Opens a SQLite database file as a driver: starts its worker, which opens
 * the file and sets WAL, `synchronous = FULL`, foreign keys and the busy timeout.
 *
 * @throws OnejobError `database_unavailable` when the file cannot be opened.
 * @example const driver = await openSqliteDriver({ path: './onejob.db' });
 */
export async function openSqliteDriver(options: SqliteDriverOptions): Promise<Driver> {
  const { worker, engine } = await startOnEngine(options);
  const spawn = async (): Promise<Worker> => {
    try {
      return await startWorker({ ...options, engine: engine.name });
    } catch (e) {
      throw new OnejobError('database_unavailable', `cannot open SQLite database ${options.path}: ${(e as Error).message}`, { cause: e });
    }
  };
  const conn = new SqliteConnection(worker, spawn, options.path, { maxBusyAttempts: options.maxBusyAttempts ?? 4, maxQueued: options.maxQueued ?? 2_000 });
  return new SqliteDriver(conn, engine);
}

/**
 * Why better-sqlite3 could not be loaded in this process, once it could not (later opens go straight to
 * node:sqlite instead of starting a worker that fails the same way); null while it loads, or has not been tried.
 */
let betterSqlite3Failure: string | null = null;

/** Starts the first worker on the engine `options.engine` asks for (see sqlite-engine.ts). */
async function startOnEngine(options: SqliteDriverOptions): Promise<{ worker: Worker; engine: SqliteEngineInUse }> {
  const choice = options.engine ?? 'auto';
  const opened = (e: unknown): OnejobError =>
    e instanceof OnejobError ? e : new OnejobError('database_unavailable', `cannot open SQLite database ${options.path}: ${(e as Error).message}`, { cause: e });
  if (choice === 'node:sqlite') {
    try {
      return { worker: await startWorker({ ...options, engine: 'node:sqlite' }), engine: { name: 'node:sqlite', fallbackReason: null } };
    } catch (e) {
      if (e instanceof SqliteEngineLoadError) throw new OnejobError('config_invalid', nodeSqliteUnavailableMessage(options.path, e.message), { cause: e });
      throw opened(e);
    }
  }
  let betterCause = betterSqlite3Failure ?? (sqliteModuleInstalled() ? null : SQLITE_MODULE_MISSING);
  if (betterCause === null) {
    try {
      return { worker: await startWorker({ ...options, engine: 'better-sqlite3' }), engine: { name: 'better-sqlite3', fallbackReason: null } };
    } catch (e) {
      if (!(e instanceof SqliteEngineLoadError)) throw opened(e);
      betterCause = e.message;
      betterSqlite3Failure = betterCause;
    }
  }
  if (choice === 'better-sqlite3') {
    throw new OnejobError('config_invalid', betterCause === SQLITE_MODULE_MISSING ? SQLITE_MODULE_MISSING : engineUnavailableMessage(options.path, betterCause, null));
  }
  try {
    return { worker: await startWorker({ ...options, engine: 'node:sqlite' }), engine: { name: 'node:sqlite', fallbackReason: fallbackReasonOf(betterCause) } };
  } catch (e) {
    if (!(e instanceof SqliteEngineLoadError)) throw opened(e);
    // Neither loads: a PostgreSQL-only install on a Node without node:sqlite says what to install, in one line, as before.
    if (betterCause === SQLITE_MODULE_MISSING && !nodeSqliteExpected()) throw new OnejobError('config_invalid', SQLITE_MODULE_MISSING);
    throw new OnejobError('config_invalid', engineUnavailableMessage(options.path, betterCause, e.message), { cause: e });
  }
}

/** The engine a driver runs on, when it is a SQLite driver; null otherwise. */
export function sqliteEngineOf(driver: Driver): SqliteEngineInUse | null {
  return driver instanceof SqliteDriver ? driver.engine : null;
}

/** The worker of a SQLite driver (tests and diagnostics: `terminate()` it to see the driver recover). */
export function sqliteWorkerOf(driver: Driver): Worker | null {
  return driver instanceof SqliteDriver ? driver.worker : null;
}

class SqliteDriver implements Driver {
  readonly name = 'sqlite';
  readonly capabilities = { supportsListenNotify: false } as const;
  readonly queries: DriverQueries;
  readonly insights: InsightQueries;
  readonly #conn: SqliteConnection;
  /** The library under the connection, and why when it is the fallback. */
  readonly engine: SqliteEngineInUse;

  constructor(conn: SqliteConnection, engine: SqliteEngineInUse) {
    this.#conn = conn;
    this.engine = engine;
    const exec = (k: Kind, s: string, p: unknown[]) => conn.whileBusy(() => conn.auto({ t: 'q', tx: 0, k, s, p }));
    // The autocommit writes that stand alone go through the group commit.
    this.queries = batchedQueries(queriesOn(exec, (steps) => scriptAlone(conn, steps)), {
      lanes: [sqliteLane(conn)],
      maxQueued: conn.maxQueued,
      // The worker is gone or closed: no call of the batch can succeed alone.
      failsAll: () => true,
      refusal: (queued) => new OnejobError('unavailable', `${queued} writes are already waiting for the SQLite database ${conn.path}`),
      around: (op) => conn.whileBusy(op),
    });
    const insight = (k: Kind) => (sql: string, ...args: unknown[]) => conn.auto<never>({ t: 'q', tx: 0, k, s: sql, p: args });
    this.insights = sqliteInsightQueries({ all: insight('all'), get: insight('get') }, { job: toJob, attempt: toAttempt, event: toEvent });
  }

  /** The current worker. */
  get worker(): Worker {
    return this.#conn.worker;
  }

  /** See {@link SqliteConnection.liveness}. */
  liveness(): string | null {
    return this.#conn.liveness();
  }

  /**
   * Runs `fn` in one `BEGIN IMMEDIATE` transaction. `SQLITE_BUSY` (another
   * process kept the write lock past the busy timeout) rolls back and runs
   * `fn` again (see {@link SqliteConnection.whileBusy}), so `fn` must touch nothing but the database.
   */
  transaction<T>(fn: (q: DriverQueries) => Promise<T>): Promise<T> {
    return this.#conn.whileBusy(() => this.#transactionOnce(fn));
  }

  /** See {@link Driver.readSnapshot}: one transaction, as {@link transaction}. */
  readSnapshot<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    return this.#conn.whileBusy(() => this.#transactionOnce(fn));
  }

  async #transactionOnce<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    const conn = this.#conn;
    return conn.exclusive(async () => {
      const tx = { begun: false, done: false };
      // BEGIN IMMEDIATE travels with the first statement (one round trip fewer); a transaction with no statement sends nothing.
      const exec = (k: Kind, s: string, p: unknown[]): Promise<unknown> => {
        if (tx.done) return Promise.reject(new Error('a statement was issued after its transaction ended'));
        const mode = tx.begun ? 1 : 2;
        tx.begun = true;
        return conn.send({ t: 'q', tx: mode, k, s, p }, true);
      };
      // Inside a transaction a script's steps are plain statements, one after another.
      const q = queriesOn(exec, (steps: ScriptStep[]) => runScriptInOrder(exec, steps));
      const insights = sqliteInsightQueries(
        { all: ((sql: string, ...args: unknown[]) => exec('all', sql, args)) as never, get: ((sql: string, ...args: unknown[]) => exec('get', sql, args)) as never },
        { job: toJob, attempt: toAttempt, event: toEvent },
      );
      try {
        const out = await fn(q, insights);
        tx.done = true;
        if (tx.begun) await conn.send({ t: 'commit' }, true);
        return out;
      } catch (e) {
        tx.done = true;
        if (tx.begun) await conn.send({ t: 'rollback' }, true).catch(() => undefined);
        throw e;
      }
    });
  }

  async migrate(): Promise<MigrationResult[]> {
    const migrations = loadMigrations('sqlite').map((m) => ({ version: m.version, name: m.name, sql: m.sql }));
    return this.#conn.auto<MigrationResult[]>({ t: 'migrate', migrations, now: Date.now() });
  }

  async pendingMigrations(): Promise<number[]> {
    const done = new Set(await this.#conn.auto<number[]>({ t: 'versions' }));
    return loadMigrations('sqlite').map((m) => m.version).filter((v) => !done.has(v));
  }

  async ping(): Promise<void> {
    await this.#conn.auto({ t: 'q', tx: 0, k: 'get', s: 'SELECT 1', p: [] });
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

  close(): Promise<void> {
    return this.#conn.close();
  }
}
