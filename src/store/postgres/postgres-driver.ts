/**
 * The PostgreSQL driver: a `pg.Pool` behind the {@link Driver} interface.
 *
 * - Queries are the named statements of `job-queries.ts`, `attempt-queries.ts`
 *   and `event-queries.ts`, prepared once per pooled connection.
 * - `bigint` columns come back as JS numbers (a pool-local type parser, no
 *   global `pg.types` change); `timestamptz` as `Date`; `json` parsed.
 * - Transactions are READ COMMITTED and serialize through row locks; a
 *   deadlock or serialization failure re-runs the whole function.
 * - Migrations run in one transaction under an advisory lock, each inserting
 *   its `onejob_migrations` row first (graphile-worker style).
 * - Wake-ups use `LISTEN/NOTIFY` on one dedicated connection: `onejob_work`
 *   (new work) and `onejob_job` (a job's state changed, migration 0008).
 * - Connection failures become `OnejobError('database_unavailable')`;
 *   every other database error (constraints included) propagates as is.
 */
import pg from 'pg';
import type { CustomTypesConfig, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { OnejobError } from '../../core/errors.ts';
import type { JobState } from '../../core/states.ts';
import type { Driver, DriverCapabilities, DriverQueries, MigrationResult, SettleWonParams } from '../driver.ts';
import { loadMigrations, MIGRATIONS_DIR } from '../migration-files.ts';
import * as admin from './admin-queries.ts';
import { isConnectionFailure, isTransientDatabaseError } from '../transient-errors.ts';
import * as attempts from './attempt-queries.ts';
import * as certifications from './certification-queries.ts';
import * as events from './event-queries.ts';
import * as jobs from './job-queries.ts';
import * as lookups from './lookup-queries.ts';
import * as fast from './fast-path-queries.ts';
import * as retention from './retention-queries.ts';
import * as streams from './stream-queries.ts';
import type { InsightQueries } from '../insight-queries.ts';
import { insightQueriesOn } from './insight-queries.ts';
import { JobInsertBatcher } from './job-insert-batcher.ts';
import { attemptListByJobBatcher, jobGetByKeyBatcher, settleWonBatcher } from './read-batcher.ts';
import type { Queryable } from './queryable.ts';

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
   * Most rows waiting in the insert batcher, and most keys waiting in each
   * read batcher; past it a call is refused at once with `unavailable`
   * (nothing was sent, so nothing was created). Default 2 000.
   */
  readonly maxQueued?: number | undefined;
  /** `application_name` shown in `pg_stat_activity`. Default `onejob`. */
  readonly applicationName?: string | undefined;
  /**
   * Group commit of autocommit `jobInsert`s (see `job-insert-batcher.ts`): at
   * most this many insert statements on the wire at once; calls arriving
   * meanwhile leave together as one multi-row statement. 0 turns batching
   * off (one statement per call). Default 2: fewer, larger commits beat
   * more parallel ones on a small machine (measured in docs/performance.md),
   * and a second pipeline keeps one slow statement from stalling every create.
   */
  readonly jobInsertPipelines?: number | undefined;
  /**
   * Group commit of the fast path's winning settles (`attemptSettleWon`) over
   * the same pipelines. Default true; false sends one statement per settle
   * (measurements only: docs/performance.md §10).
   */
  readonly batchSettles?: boolean | undefined;
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

/** The channel of work wake-ups. */
export const WORK_CHANNEL = 'onejob_work';

/** The channel of job state changes: `["<owner>", "<job id>", "<state>"]`, sent by the trigger of migration 0008. */
export const JOB_CHANNEL = 'onejob_job';

/** The advisory lock key held while migrating: the ASCII bytes of "onejob". */
export const MIGRATION_LOCK_KEY = 0x6f6e656a6f62;

const CAPABILITIES: DriverCapabilities = {
  supportsListenNotify: true,
};

const INT8_OID = 20;

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

/** Whether `e` says the database could not be reached or the connection broke (see `transient-errors.ts`). */
export function isConnectionError(e: unknown): boolean {
  return isConnectionFailure(e);
}

/** SQLSTATEs after which re-running the whole transaction at once may succeed: serialization failure, deadlock, lock timeout. */
const RETRYABLE_TX_SQLSTATES = new Set(['40001', '40P01', '55P03']);

function isRetryableTransactionError(e: unknown): boolean {
  // Statements inside a transaction come back already mapped: look at what is underneath.
  const raw = e instanceof OnejobError ? e.cause : e;
  return raw instanceof Error && RETRYABLE_TX_SQLSTATES.has((raw as { code?: string }).code ?? '');
}

/** `host:port/database` of a connection string, never its password. */
function describeTarget(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    return `${url.hostname || 'localhost'}:${url.port || '5432'}${url.pathname || ''}`;
  } catch {
    return 'the configured database';
  }
}

function errorMessage(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return errorMessage(e.errors[0]);
  if (e instanceof Error) return e.message || (e as { code?: string }).code || e.name;
  return String(e);
}

/** The `error` listener of a checked-out client: the failure surfaces on its next query instead. */
function ignoreCheckedOutError(): void {}

/** A migration statement: no client-side read timeout either (pg treats 0 as "the connection's default", so a day). */
function migrationQuery(text: string): QueryConfig {
  return { text, query_timeout: 24 * 3_600_000 } as QueryConfig;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The named queries of the three query files, bound to one connection (a pool or a transaction's client). */
function queriesOn(db: Queryable): DriverQueries {
  return {
    dbNow: () => jobs.dbNow(db),
    jobInsert: (row) => jobs.jobInsert(db, row),
    jobInsertLeased: (row, attempt) => fast.jobInsertLeased(db, row, attempt),
    attemptSettleWon: (params) => fast.attemptSettleWon(db, params),
    jobStates: (refs) => jobs.jobStates(db, refs),
    jobGetByKey: (ownerId, key) => jobs.jobGetByKey(db, ownerId, key),
    jobInsertKeyless: (row) => jobs.jobInsertKeyless(db, row),
    jobGetByKeylessFingerprint: (params) => jobs.jobGetByKeylessFingerprint(db, params),
    jobGet: (ownerId, id, forUpdate) => jobs.jobGet(db, ownerId, id, forUpdate),
    jobList: (params) => jobs.jobList(db, params),
    jobUpdateProgress: (params) => jobs.jobUpdateProgress(db, params),
    jobFinish: (params) => jobs.jobFinish(db, params),
    jobStreamClaim: (params) => jobs.jobStreamClaim(db, params),
    jobStreamOwner: (ownerId, id) => jobs.jobStreamOwner(db, ownerId, id),
    streamBatchInsert: (row) => streams.streamBatchInsert(db, row),
    streamBatchList: (ownerId, jobId, attemptNumber, afterSeq) => streams.streamBatchList(db, ownerId, jobId, attemptNumber, afterSeq),
    jobListQueuedForUpdate: (limit) => jobs.jobListQueuedForUpdate(db, limit),
    attemptInsert: (row) => attempts.attemptInsert(db, row),
    attemptListByJob: (ownerId, jobId) => attempts.attemptListByJob(db, ownerId, jobId),
    attemptListByJobs: (ownerId, jobIds) => attempts.attemptListByJobs(db, ownerId, jobIds),
    attemptGet: (ownerId, id) => attempts.attemptGet(db, ownerId, id),
    attemptUpdate: (params) => attempts.attemptUpdate(db, params),
    attemptMarkRunning: (params) => attempts.attemptMarkRunning(db, params),
    attemptClaim: (params) => attempts.attemptClaim(db, params),
    attemptExtendLeases: (params) => attempts.attemptExtendLeases(db, params),
    attemptListLeaseExpired: (now, limit) => attempts.attemptListLeaseExpired(db, now, limit),
    eventInsert: (rows) => events.eventInsert(db, rows),
    eventList: (ownerId, jobId) => events.eventList(db, ownerId, jobId),
    eventListAll: (afterId, limit) => events.eventListAll(db, afterId, limit),
    certificationUpsert: (row) => certifications.certificationUpsert(db, row),
    certificationList: () => certifications.certificationList(db),
    certificationVerdicts: (providers) => certifications.certificationVerdicts(db, providers),
    attemptClaimLookups: (params) => lookups.attemptClaimLookups(db, params),
    attemptDeferLookup: (params) => lookups.attemptDeferLookup(db, params),
    attemptOldestUnknownAt: () => lookups.attemptOldestUnknownAt(db),
    attemptCountInDoubt: () => admin.attemptCountInDoubt(db),
    jobListAll: (params) => admin.jobListAll(db, params),
    jobGetAnyOwner: (id) => admin.jobGetAnyOwner(db, id),
    attemptGetAnyOwner: (id) => admin.attemptGetAnyOwner(db, id),
    maintenanceLeaseAcquire: (params) => retention.maintenanceLeaseAcquire(db, params),
    maintenanceLeaseRelease: (params) => retention.maintenanceLeaseRelease(db, params),
    retentionDeleteBatch: (params) => retention.retentionDeleteBatch(db, params),
  };
}

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
    if (pipelines > 0) {
      const maxQueued = options.maxQueued ?? 2_000;
      const batcher = new JobInsertBatcher(autocommit, { maxInFlight: pipelines, maxQueued, isConnectionError: (e) => isConnectionError(e) || e instanceof OnejobError });
      // The reads every replay makes (by key, then the attempts) are coalesced the same way.
      const byKey = jobGetByKeyBatcher(autocommit, pipelines, maxQueued);
      const attemptsOf = attemptListByJobBatcher(autocommit, pipelines, maxQueued);
      // Concurrent fast-path settles are group-committed the same way (each its own row of one statement).
      const settles = settleWonBatcher(autocommit, pipelines, maxQueued);
      this.queries = {
        ...queriesOn(autocommit),
        jobInsert: async (row) => (await batcher.insert(row))?.job ?? null,
        jobInsertLeased: async (row, attempt) => {
          const r = await batcher.insert(row, attempt);
          return r && r.attempt ? { job: r.job, attempt: r.attempt } : null;
        },
        // Callers sharing one read each get their own copy.
        jobGetByKey: async (ownerId, key) => {
          const job = await byKey.get([ownerId, key]);
          return job && { ...job };
        },
        ...(options.batchSettles === false ? {} : { attemptSettleWon: (params: SettleWonParams) => settles.get(params) }),
        attemptListByJob: async (ownerId, jobId) => (await attemptsOf.get([ownerId, jobId])).map((a) => ({ ...a })),
      };
    } else {
      this.queries = queriesOn(autocommit);
    }
  }

  /**
   * A `database_unavailable` error for a connection failure `cause`, worded by what the server said:
   * a login it refused (SQLSTATE class 28: no such role, a wrong password, pg_hba) or a database it
   * does not have (3D000) is not an unreachable server, and the remedy is in DATABASE_URL.
   */
  #unavailable(cause: unknown): OnejobError {
    const code = (cause as { code?: unknown } | null)?.code;
    const why = typeof code === 'string' && code.startsWith('28')
      ? 'refused the login (check the user and password in DATABASE_URL)'
      : code === '3D000' ? 'has no such database (check the database name in DATABASE_URL)' : 'is unreachable';
    return new OnejobError('database_unavailable', `PostgreSQL at ${this.#target} ${why}: ${errorMessage(cause)}`, { cause });
  }

  /**
   * Transient failures (a lost connection, a timeout, a serialization failure
   * that outlived the retries) → `database_unavailable`, the cause kept;
   * anything else (a constraint, a syntax error) unchanged.
   */
  #mapError(e: unknown): unknown {
    if (e instanceof OnejobError) return e;
    if (isConnectionFailure(e)) return this.#unavailable(e);
    if (isTransientDatabaseError(e)) {
      return new OnejobError('database_unavailable', `PostgreSQL at ${this.#target} could not complete the statement now: ${errorMessage(e)}`, { cause: e });
    }
    return e;
  }

  /** Refuses at once when too many callers already wait for a pooled connection (backpressure). */
  #checkWaiting(): void {
    if (this.#pool.waitingCount >= this.#maxWaiting) {
      throw new OnejobError('unavailable', `${this.#pool.waitingCount} database calls are already waiting for a connection to ${this.#target}`);
    }
  }

  /** `target` with its errors mapped by {@link #mapError}. */
  #mapped(target: { query(config: QueryConfig): Promise<QueryResult> }): Queryable {
    return {
      query: async <R extends QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>> => {
        if (target === this.#pool) this.#checkWaiting();
        try {
          return (await target.query(config)) as QueryResult<R>;
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
      const client = await this.#connect();
      let broken: Error | undefined;
      let failure: unknown;
      try {
        await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
        const result = await fn(queriesOn(this.#mapped(client)));
        await client.query('COMMIT');
        return result;
      } catch (e) {
        failure = e;
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          // The connection is unusable: destroy it instead of returning it to the pool.
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        }
      } finally {
        this.#release(client, broken);
      }
      if (!isRetryableTransactionError(failure) || attempt >= this.#maxTxAttempts) throw this.#mapError(failure);
      await sleep(5 * attempt + Math.random() * 20);
    }
  }

  /** See {@link Driver.readSnapshot}: one `REPEATABLE READ READ ONLY` transaction (no retries needed: it takes no locks). */
  async readSnapshot<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T> {
    const client = await this.#connect();
    let broken: Error | undefined;
    try {
      const db = this.#mapped(client);
      await db.query({ text: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' });
      const result = await fn(queriesOn(db), insightQueriesOn(db));
      await db.query({ text: 'COMMIT' });
      return result;
    } catch (e) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      });
      throw this.#mapError(e);
    } finally {
      this.#release(client, broken);
    }
  }

  /**
   * Applies every pending migration in one transaction holding
   * `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`. Each migration inserts its
   * `onejob_migrations` row before its SQL, so even a migrator that skipped
   * the lock could not apply a version twice. Several processes may call it
   * at once: one applies, the others wait for the lock and find nothing to do.
   *
   * @returns one result per migration file, in version order.
   * @throws OnejobError `internal` naming the migration that failed (nothing is applied), or `database_unavailable`.
   */
  async migrate(): Promise<MigrationResult[]> {
    const files = loadMigrations('postgres', this.#migrationsDir);
    const client = await this.#connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      // A migration may rewrite a large table: none of the serving timeouts apply to it.
      await client.query(migrationQuery('SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0'));
      await client.query({ text: 'SELECT pg_advisory_xact_lock($1)', values: [MIGRATION_LOCK_KEY] });
      await client.query(
        'CREATE TABLE IF NOT EXISTS onejob_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const done = await client.query<{ version: number }>('SELECT version FROM onejob_migrations');
      const applied = new Set(done.rows.map((r) => r.version));
      const results: MigrationResult[] = [];
      for (const file of files) {
        if (applied.has(file.version)) {
          results.push({ version: file.version, name: file.name, status: 'already_applied' });
          continue;
        }
        await client.query({
          text: 'INSERT INTO onejob_migrations (version, name, applied_at) VALUES ($1, $2, now())',
          values: [file.version, file.name],
        });
        try {
          await client.query(migrationQuery(file.sql));
        } catch (e) {
          if (isConnectionError(e)) throw e;
          throw new OnejobError('internal', `migration ${String(file.version).padStart(4, '0')}_${file.name} failed: ${errorMessage(e)}`, { cause: e });
        }
        results.push({ version: file.version, name: file.name, status: 'applied' });
      }
      await client.query('COMMIT');
      return results;
    } catch (e) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw this.#mapError(e);
    } finally {
      this.#release(client, broken);
    }
  }

  /** Versions of migration files not recorded in `onejob_migrations` (all of them when the table is missing). */
  async pendingMigrations(): Promise<number[]> {
    const versions = loadMigrations('postgres', this.#migrationsDir).map((f) => f.version);
    const db = this.#mapped(this.#pool);
    const present = await db.query<{ present: boolean }>({
      text: `SELECT to_regclass('onejob_migrations') IS NOT NULL AS present`,
    });
    if (!present.rows[0]?.present) return versions;
    const done = await db.query<{ version: number }>({ text: 'SELECT version FROM onejob_migrations' });
    const applied = new Set(done.rows.map((r) => r.version));
    return versions.filter((v) => !applied.has(v));
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
    return this.#listener.subscribe(streams.STREAM_CHANNEL, (payload, backend) => {
      if (payload === undefined || (backend !== undefined && this.#ownBackends.has(backend))) return;
      listener(payload);
    });
  }

  /** Closes the LISTEN connection and the pool. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      await this.#listener.stop();
      await this.#pool.end();
    })();
    return this.#closed;
  }
}

/** `["owner", "job id", "state"]` of a job notification, or null when it is not one. */
function parseJobPayload(payload: string): [string, string, JobState] | null {
  try {
    const v: unknown = JSON.parse(payload);
    if (Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'string')) return v as [string, string, JobState];
  } catch {
    // not ours
  }
  return null;
}

/** A subscriber of {@link NotificationListener}: its channel, and what it is called with (undefined: after a reconnect). */
interface Subscriber {
  readonly channel: string;
  /** `backend`: the process id of the server backend that sent the notification. */
  readonly listener: (payload: string | undefined, backend: number | undefined) => void;
}

/**
 * The one LISTEN connection of a driver: shared by every subscription, on
 * each channel subscribed (LISTEN once per channel), reconnecting with
 * backoff (100 ms doubling to 5 s) when lost; after a reconnect every
 * subscriber is called once without a payload (notifications may have been
 * missed meanwhile).
 */
class NotificationListener {
  readonly #config: pg.ClientConfig;
  readonly #unavailable: (cause: unknown) => Error;
  readonly #onBackgroundError: (e: Error) => void;
  readonly #subscribers = new Set<Subscriber>();
  /** Channels LISTENed on the current connection. */
  #listening = new Set<string>();
  #client: pg.Client | null = null;
  #ready: Promise<void> | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #backoffMs = 100;

  constructor(config: pg.ClientConfig, unavailable: (cause: unknown) => Error, onBackgroundError: (e: Error) => void) {
    this.#config = config;
    this.#unavailable = unavailable;
    this.#onBackgroundError = onBackgroundError;
  }

  async subscribe(channel: string, listener: Subscriber['listener']): Promise<() => Promise<void>> {
    const entry: Subscriber = { channel, listener };
    this.#subscribers.add(entry);
    try {
      try {
        await (this.#ready ??= this.#open());
      } catch (e) {
        this.#ready = null; // the next subscription tries to connect again
        throw e;
      }
      await this.#listen(channel);
    } catch (e) {
      this.#subscribers.delete(entry);
      throw e;
    }
    let unsubscribed = false;
    return async () => {
      if (unsubscribed) return;
      unsubscribed = true;
      this.#subscribers.delete(entry);
      if (this.#subscribers.size === 0) await this.stop();
    };
  }

  /** Closes the connection and cancels any reconnect; subscriptions made later open a new one. */
  async stop(): Promise<void> {
    this.#ready = null;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    const client = this.#client;
    this.#client = null;
    this.#listening = new Set();
    if (client) await client.end().catch(() => {});
  }

  /** LISTENs on `channel` on the current connection, once. */
  async #listen(channel: string): Promise<void> {
    const client = this.#client;
    if (!client || this.#listening.has(channel)) return;
    this.#listening.add(channel);
    try {
      await client.query(`LISTEN ${channel}`);
    } catch (e) {
      this.#listening.delete(channel);
      throw this.#unavailable(e);
    }
  }

  /** Connects and LISTENs on every subscribed channel; throws `database_unavailable` on failure. */
  async #open(): Promise<void> {
    const client = new pg.Client(this.#config);
    client.on('error', (e) => this.#lost(client, e));
    client.on('end', () => this.#lost(client, new Error('LISTEN connection ended')));
    client.on('notification', (msg) => this.#fire(msg.channel, msg.payload ?? '', msg.processId));
    this.#client = client;
    this.#listening = new Set();
    try {
      await client.connect();
      for (const channel of new Set([...this.#subscribers].map((s) => s.channel))) {
        this.#listening.add(channel);
        await client.query(`LISTEN ${channel}`);
      }
    } catch (e) {
      if (this.#client === client) this.#client = null;
      await client.end().catch(() => {});
      throw this.#unavailable(e);
    }
    this.#backoffMs = 100;
  }

  /** Calls the subscribers of `channel` (every subscriber, without a payload, when `channel` is null: after a reconnect). */
  #fire(channel: string | null, payload: string | undefined, backend?: number): void {
    for (const s of [...this.#subscribers]) {
      if (channel !== null && s.channel !== channel) continue;
      try {
        s.listener(payload, backend);
      } catch (e) {
        this.#onBackgroundError(e instanceof Error ? e : new Error(String(e)));
      }
    }
  }

  /** The current connection broke: drop it and reconnect, unless it is no longer ours. */
  #lost(client: pg.Client, e: Error): void {
    if (this.#client !== client) return;
    this.#client = null;
    client.end().catch(() => {});
    this.#onBackgroundError(e);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#retryTimer || this.#subscribers.size === 0 || this.#ready === null) return;
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, 5_000);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      if (this.#subscribers.size === 0 || this.#ready === null) return;
      this.#open().then(
        () => this.#fire(null, undefined),
        (err: unknown) => {
          this.#onBackgroundError(err instanceof Error ? err : new Error(String(err)));
          this.#scheduleReconnect();
        },
      );
    }, delay);
  }
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
