/**
 * The PostgreSQL driver: a `pg.Pool` behind the {@link Driver} interface.
 *
 * - Queries are the named statements of the `*-queries.ts` files (bound to a
 *   connection by `queries-on.ts`), prepared once per pooled connection.
 * - `bigint` columns come back as JS numbers (a pool-local type parser, no
 *   global `pg.types` change); `timestamptz` as `Date`; `json` parsed.
 * - Transactions are READ COMMITTED and serialize through row locks; a
 *   deadlock or serialization failure re-runs the whole function.
 * - Migrations (`migrator.ts`) run in one transaction under an advisory lock,
 *   each inserting its `onejob_migrations` row first (graphile-worker style).
 * - The hot autocommit calls are group-committed by the one batching layer
 *   above the drivers (`../batched-queries.ts`) over this driver's lanes
 *   (`many-queries.ts`: one statement for many calls).
 * - Wake-ups use `LISTEN/NOTIFY` on one dedicated connection
 *   (`notification-listener.ts`): `onejob_work` (new work), `onejob_job` (a
 *   job's state changed, migration 0008) and `onejob_stream`.
 * - The hot tables are analyzed while young (`young-tables.ts`), so that no
 *   prepared statement keeps a generic plan made on an empty table.
 * - Connection failures become `OnejobError('database_unavailable')`
 *   (`pg-errors.ts`); every other database error (constraints included)
 *   propagates as is.
 */
import { isBudgetRefusal } from '../spend-refusal.ts';
import pg from 'pg';
import type { CustomTypesConfig, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { OnejobError } from '../../core/errors.ts';
import type { JobState } from '../../core/states.ts';
import type { Driver, DriverCapabilities, DriverQueries, MigrationResult } from '../driver.ts';
import type { InsightQueries } from '../insight-queries.ts';
import { loadMigrations, MIGRATIONS_DIR } from '../migration-files.ts';
import { insightQueriesOn } from './insight-queries.ts';
import { batchedQueries } from '../batched-queries.ts';
import { postgresLanes } from './many-queries.ts';
import { applyMigrations, pendingMigrationVersions } from './migrator.ts';
import { JOB_CHANNEL, NotificationListener, parseJobPayload, WORK_CHANNEL } from './notification-listener.ts';
import { describeTarget, isConnectionError, isRetryableTransactionError, mapDatabaseError, unavailableError } from './pg-errors.ts';
import { queriesOn } from './queries-on.ts';
import type { Queryable } from './queryable.ts';
import { STREAM_CHANNEL } from './stream-queries.ts';
import { YoungTableStatistics } from './young-tables.ts';

export { JOB_CHANNEL, WORK_CHANNEL } from './notification-listener.ts';
export { MIGRATION_LOCK_KEY } from './migrator.ts';
export { isConnectionError } from './pg-errors.ts';

/** Options of {@link createPostgresDriver}. */
export interface PostgresDriverOptions {
  /** A libpq-style URL, e.g. `postgres://user@host:5432/db`. */
  readonly connectionString: string;
  /** Most pooled connections (the LISTEN connection is extra). Default 10. */
  readonly max?: number | undefined;
  /**
   * How long to wait for a connection (a new one, or a free one of the pool)
   * before failing with `database_unavailable`. Default 5 000 ms.
   */
  readonly connectTimeoutMs?: number | undefined;
  /** The server's `statement_timeout` of every connection (0: none). Default 10 000 ms. Migrations run without it. */
  readonly statementTimeoutMs?: number | undefined;
  /** The server's `lock_timeout` of every connection (0: none). Default 5 000 ms. */
  readonly lockTimeoutMs?: number | undefined;
  /**
   * How long the client waits for any answer to a statement before giving
   * up on the connection (it is then destroyed): the bound when the server,
   * or the network to it, stops answering altogether, which no server-side
   * timeout can see. Default `statementTimeoutMs` + 2 000 ms (0: none).
   */
  readonly queryTimeoutMs?: number | undefined;
  /**
   * Most callers waiting for a pooled connection; one more is refused at once
   * with `unavailable` instead of queueing without bound. Default 200.
   */
  readonly maxWaiting?: number | undefined;
  /**
   * Most calls waiting in each lane of the group commit (inserts, reads by
   * key, attempts of a job, settles; `../batched-queries.ts`); past it a call is refused at once with `unavailable`
   * (nothing was sent, so nothing was created). Default 2 000.
   */
  readonly maxQueued?: number | undefined;
  /** `application_name` shown in `pg_stat_activity`. Default `onejob`. */
  readonly applicationName?: string | undefined;
  /**
   * Group commit of the hot autocommit calls (`../batched-queries.ts`, the
   * statements in `many-queries.ts`): at most this many statements of each
   * lane on the wire at once; calls arriving meanwhile leave together as one
   * multi-row statement. 0 turns batching
   * off (one statement per call). Default 2: fewer, larger commits beat
   * more parallel ones on a small machine (measured in docs/performance.md),
   * and a second pipeline keeps one slow statement from stalling every create.
   */
  readonly jobInsertPipelines?: number | undefined;
  /**
   * The pipelines beyond the first are spares: a lane sends a second
   * statement beside one on the wire only once that one has been out this
   * long (ms); meanwhile calls gather for the next batch. Every statement
   * wakes a backend: with spares a chat request cost about a sixth less CPU
   * than with two pipelines at once (docs/performance.md §17). Default 5;
   * 0 sends a spare at once (the behaviour before).
   */
  readonly spareBatchAfterMs?: number | undefined;
  /**
   * Group commit of the fast path's winning settles (`attemptSettleWon`) over
   * the same pipelines. Default true; false sends one statement per settle
   * (measurements only: docs/performance.md §10).
   */
  readonly batchSettles?: boolean | undefined;
  /**
   * Analyze the hot tables while they are young (`young-tables.ts`): after
   * writes, at most once a second, `ANALYZE` each that grew by as many rows
   * as it held when last analyzed, up to a million rows, so that no prepared
   * statement keeps a plan made on an empty table. Default true; false
   * leaves statistics to autovacuum (measurements only: docs/performance.md §15).
   */
  readonly analyzeYoungTables?: boolean | undefined;
  /** How many times a transaction runs at most when it hits a deadlock or serialization failure. Default 3. */
  readonly maxTransactionAttempts?: number | undefined;
  /** The folder holding `postgres/NNNN_name.sql`. Default: the package's `migrations/`. */
  readonly migrationsDir?: string | undefined;
  /**
   * Errors no caller is waiting for: an idle pooled connection dropped, the
   * LISTEN connection lost or failing to reconnect. Default: ignored (the pool
   * replaces connections and the listener reconnects on its own).
   */
  readonly onBackgroundError?: ((error: Error) => void) | undefined;
}

const CAPABILITIES: DriverCapabilities = {
  supportsListenNotify: true,
};

const INT8_OID = 20;
/** {@link PostgresDriverOptions.spareBatchAfterMs}'s default (ms). */
const SPARE_BATCH_AFTER_MS = 5;

/** `bigint` text → number; refuses values a double cannot hold exactly. */
function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`bigint ${text} does not fit in a JS number`);
  return n;
}

/** The pool's type parsers: pg's defaults, except `bigint` as a number. */
const TYPES: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format)) as CustomTypesConfig['getTypeParser'],
};

/** The `error` listener of a checked-out client: the failure surfaces on its next query instead. */
function ignoreCheckedOutError(): void {}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The PostgreSQL {@link Driver}. Prefer {@link createPostgresDriver}.
 */
export class PostgresDriver implements Driver {
  readonly name = 'postgres';
  readonly capabilities = CAPABILITIES;
  readonly queries: DriverQueries;
  readonly insights: InsightQueries;

  readonly #pool: pg.Pool;
  readonly #target: string;
  readonly #maxTxAttempts: number;
  readonly #migrationsDir: string;
  readonly #listener: NotificationListener;
  readonly #maxWaiting: number;
  /** Backend process ids of this pool's connections (see {@link onJobNotification}). */
  readonly #ownBackends = new Set<number>();
  readonly #young: YoungTableStatistics | null;
  #closed: Promise<void> | null = null;

  constructor(options: PostgresDriverOptions) {
    const onBackgroundError = options.onBackgroundError ?? (() => {});
    this.#target = describeTarget(options.connectionString);
    this.#maxTxAttempts = Math.max(1, options.maxTransactionAttempts ?? 3);
    this.#migrationsDir = options.migrationsDir ?? MIGRATIONS_DIR;
    const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
    const queryTimeoutMs = options.queryTimeoutMs ?? (statementTimeoutMs > 0 ? statementTimeoutMs + 2_000 : 0);
    const clientConfig: pg.ClientConfig = {
      connectionString: options.connectionString,
      application_name: options.applicationName ?? 'onejob',
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
      types: TYPES,
      ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
      ...((options.lockTimeoutMs ?? 5_000) > 0 ? { lock_timeout: options.lockTimeoutMs ?? 5_000 } : {}),
      ...(queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
      // A transaction left open by a stalled client must not hold its row locks for ever.
      idle_in_transaction_session_timeout: Math.max(60_000, queryTimeoutMs * 2),
      // Dead peers (a cut network) are noticed by the kernel, not only by a timeout.
      keepAlive: true,
    };
    this.#maxWaiting = Math.max(1, options.maxWaiting ?? 200);
    this.#pool = new pg.Pool({ ...clientConfig, max: options.max ?? 10 });
    // An idle client's error would otherwise crash the process; the pool drops that client.
    this.#pool.on('error', (e) => onBackgroundError(e));
    // The server processes behind this pool: their own job notifications are not news to this process.
    this.#pool.on('connect', (client) => {
      const pid = (client as { processID?: number }).processID;
      if (pid !== undefined) this.#ownBackends.add(pid);
    });
    this.#pool.on('remove', (client) => {
      const pid = (client as { processID?: number }).processID;
      if (pid !== undefined) this.#ownBackends.delete(pid);
    });
    // The LISTEN connection idles by design: no query timeout on it.
    const { query_timeout: _q, idle_in_transaction_session_timeout: _i, ...listenConfig } = clientConfig;
    this.#listener = new NotificationListener(listenConfig, (e) => this.#unavailable(e), onBackgroundError);
    const autocommit = this.#mapped(this.#pool);
    this.insights = insightQueriesOn(autocommit);
    const pipelines = Math.min(options.jobInsertPipelines ?? 2, options.max ?? 10);
    const queries = pipelines <= 0
      ? queriesOn(autocommit)
      : batchedQueries(queriesOn(autocommit), {
        lanes: postgresLanes(autocommit, { pipelines, spareAfterMs: options.spareBatchAfterMs ?? SPARE_BATCH_AFTER_MS, batchSettles: options.batchSettles !== false }),
        maxQueued: options.maxQueued ?? 2_000,
        // A lost connection (or an error already mapped, such as a timeout) fails the whole batch; anything else is retried call by call.
        failsAll: (e) => isConnectionError(e) || e instanceof OnejobError,
        refusal: (queued) => new OnejobError('unavailable', `${queued} calls are already waiting for the database ${this.#target}`),
      });
    this.#young = options.analyzeYoungTables === false ? null : new YoungTableStatistics(autocommit, onBackgroundError);
    this.queries = this.#young ? countingCreates(queries, this.#young) : queries;
  }

  /** See {@link unavailableError}. */
  #unavailable(cause: unknown): OnejobError {
    return unavailableError(this.#target, cause);
  }

  /** See {@link mapDatabaseError}. */
  #mapError(e: unknown): unknown {
    return mapDatabaseError(this.#target, e);
  }

  /** Refuses at once when too many callers already wait for a pooled connection (backpressure). */
  #checkWaiting(): void {
    if (this.#pool.waitingCount >= this.#maxWaiting) {
      throw new OnejobError('unavailable', `${this.#pool.waitingCount} database calls are already waiting for a connection to ${this.#target}`);
    }
  }

  /**
   * `pool.query`, except that a statement refused by a spend limit (SQLSTATE
   * OJ429, CONTRACT §16) gives its healthy connection back: `pool.query`
   * closes the connection after any error, and a burst of requests past a
   * budget would open a new connection per refusal (80 ms each, measured).
   */
  async #poolQuery(config: QueryConfig): Promise<QueryResult> {
    const client = await this.#pool.connect();
    client.on('error', ignoreCheckedOutError);
    try {
      const res = await client.query(config);
      this.#release(client, undefined);
      return res;
    } catch (e) {
      this.#release(client, isBudgetRefusal(e) ? undefined : (e as Error));
      throw e;
    }
  }

  /** `target` with its errors mapped by {@link #mapError}. */
  #mapped(target: { query(config: QueryConfig): Promise<QueryResult> }): Queryable {
    return {
      query: async <R extends QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>> => {
        if (target === this.#pool) this.#checkWaiting();
        try {
          return (target === this.#pool ? await this.#poolQuery(config) : await target.query(config)) as QueryResult<R>;
        } catch (e) {
          throw this.#mapError(e);
        }
      },
    };
  }

  /**
   * A pooled client for a transaction. While checked out, `pg` leaves the
   * client without an `error` listener, so a connection dropped between two
   * queries would crash the process; this one swallows it (the next query
   * fails and is mapped) until {@link #release}.
   */
  async #connect(): Promise<PoolClient> {
    if (this.#closed) throw new OnejobError('database_unavailable', 'the PostgreSQL driver is closed');
    this.#checkWaiting();
    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (e) {
      throw this.#unavailable(e);
    }
    client.on('error', ignoreCheckedOutError);
    return client;
  }

  /** Returns `client` to the pool, or destroys it when `broken` is given. */
  #release(client: PoolClient, broken: Error | undefined): void {
    client.removeListener('error', ignoreCheckedOutError);
    client.release(broken);
  }

  /**
   * Runs `fn` in one READ COMMITTED transaction on one pooled connection.
   * A deadlock (40P01) or serialization failure (40001) rolls back and runs
   * `fn` again, up to `maxTransactionAttempts` times, so `fn` must have no
   * effects outside the database.
   *
   * @example await driver.transaction(async (q) => { const job = await q.jobGet(owner, id, true); … })
   */
  async transaction<T>(fn: (q: DriverQueries) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#inTransaction('BEGIN ISOLATION LEVEL READ COMMITTED', (client) => fn(queriesOn(this.#mapped(client))));
      } catch (failure) {
        if (!isRetryableTransactionError(failure) || attempt >= this.#maxTxAttempts) throw this.#mapError(failure);
      }
      await sleep(5 * attempt + Math.random() * 20);
    }
  }

  /** See {@link Driver.readSnapshot}: one `REPEATABLE READ READ ONLY` transaction (no retries needed: it takes no locks). */
  async readSnapshot<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    try {
      return await this.#inTransaction('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', (client) => {
        const db = this.#mapped(client);
        return fn(queriesOn(db), insightQueriesOn(db));
      });
    } catch (e) {
      throw this.#mapError(e);
    }
  }

  /**
   * Applies every pending migration in one transaction (see
   * {@link applyMigrations}: under `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`,
   * each migration's row inserted before its SQL). Several processes may call
   * it at once: one applies, the others wait for the lock and find nothing to do.
   *
   * @returns one result per migration file, in version order.
   * @throws OnejobError `internal` naming the migration that failed (nothing is applied), or `database_unavailable`.
   */
  async migrate(): Promise<MigrationResult[]> {
    const files = loadMigrations('postgres', this.#migrationsDir);
    try {
      return await this.#inTransaction('BEGIN', (client) => applyMigrations(client, files));
    } catch (e) {
      throw this.#mapError(e);
    }
  }

  /** Versions of migration files not recorded in `onejob_migrations` (all of them when the table is missing). */
  async pendingMigrations(): Promise<number[]> {
    return pendingMigrationVersions(this.#mapped(this.#pool), loadMigrations('postgres', this.#migrationsDir));
  }

  /**
   * Runs `fn` on one pooled connection between `begin` and COMMIT; on any
   * failure ROLLBACK, and a connection whose ROLLBACK fails is destroyed
   * instead of pooled. Errors come out as they came (the caller maps them).
   */
  async #inTransaction<T>(begin: string, fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#connect();
    let broken: Error | undefined;
    try {
      await client.query(begin);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (e) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        // The connection is unusable: destroy it instead of returning it to the pool.
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw e;
    } finally {
      this.#release(client, broken);
    }
  }

  /** `SELECT 1`. @throws OnejobError `database_unavailable`. */
  async ping(): Promise<void> {
    if (this.#closed) throw new OnejobError('database_unavailable', 'the PostgreSQL driver is closed');
    try {
      await this.#pool.query('SELECT 1');
    } catch (e) {
      throw this.#unavailable(e);
    }
  }

  /** `NOTIFY onejob_work` (autocommit: delivered at once). */
  async notifyWork(): Promise<void> {
    await this.#mapped(this.#pool).query({ text: `NOTIFY ${WORK_CHANNEL}` });
  }

  /**
   * Calls `listener` on every `onejob_work` notification, and once after the
   * LISTEN connection was lost and re-established (notifications may have
   * been missed meanwhile). All subscriptions share one dedicated connection,
   * opened by the first and closed by the last unsubscribe.
   *
   * @throws OnejobError `database_unavailable` when the first LISTEN cannot connect.
   */
  onWork(listener: () => void): Promise<() => Promise<void>> {
    if (this.#closed) return Promise.reject(new OnejobError('database_unavailable', 'the PostgreSQL driver is closed'));
    // After a reconnect (payload undefined) work may have been missed: look anyway.
    return this.#listener.subscribe(WORK_CHANNEL, () => listener());
  }

  /**
   * Calls `listener` on every `onejob_job` notification (a job's state
   * changed, committed) sent by another process: one from this pool's own
   * backends is dropped (its store already announced the change, with the
   * job). Shares the LISTEN connection of
   * {@link onWork}. Notifications missed while it reconnects are not
   * replayed: waiters' periodic re-check covers them.
   */
  async onJobNotification(listener: (ownerId: string, jobId: string, state: JobState) => void): Promise<() => Promise<void>> {
    if (this.#closed) throw new OnejobError('database_unavailable', 'the PostgreSQL driver is closed');
    return this.#listener.subscribe(JOB_CHANNEL, (payload, backend) => {
      // A change made through this driver's own connections: its store already told its listeners, with the job.
      if (payload === undefined || (backend !== undefined && this.#ownBackends.has(backend))) return;
      const parsed = parseJobPayload(payload);
      if (parsed) listener(parsed[0], parsed[1], parsed[2]);
    });
  }

  /**
   * Calls `listener` with the job id of every `onejob_stream` notification (a
   * stream batch appended, committed) sent by another process; one from this
   * pool's own backends is dropped (its store already told its listeners).
   * Shares the LISTEN connection of {@link onWork}; after a reconnect readers'
   * periodic re-read covers what was missed.
   */
  async onStreamNotification(listener: (jobId: string) => void): Promise<() => Promise<void>> {
    if (this.#closed) throw new OnejobError('database_unavailable', 'the PostgreSQL driver is closed');
    return this.#listener.subscribe(STREAM_CHANNEL, (payload, backend) => {
      if (payload === undefined || (backend !== undefined && this.#ownBackends.has(backend))) return;
      listener(payload);
    });
  }

  /** Closes the LISTEN connection and the pool. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      await this.#young?.stop();
      await this.#listener.stop();
      await this.#pool.end();
    })();
    return this.#closed;
  }
}

/** `queries` with every job insert told to `young` (each create writes a job row, and on the fast path its attempt). */
function countingCreates(queries: DriverQueries, young: YoungTableStatistics): DriverQueries {
  const { jobInsert, jobInsertLeased, jobInsertKeyless } = queries;
  return {
    ...queries,
    jobInsert: (row) => (young.noteWrite(), jobInsert(row)),
    jobInsertLeased: (row, attempt) => (young.noteWrite(), jobInsertLeased(row, attempt)),
    jobInsertKeyless: (row) => (young.noteWrite(), jobInsertKeyless(row)),
  };
}

/**
 * Creates the PostgreSQL driver. No connection is opened until the first
 * query; call `ping()` to check the database is reachable.
 *
 * @example
 * const driver = await createPostgresDriver({ connectionString: 'postgres://postgres@127.0.0.1:5432/onejob', max: 20 });
 * await driver.migrate();
 */
export async function createPostgresDriver(options: PostgresDriverOptions): Promise<Driver> {
  return new PostgresDriver(options);
}
