/**
 * The SQLite driver (better-sqlite3, WAL, `synchronous = FULL`): the embedded default.
 *
 * better-sqlite3 is synchronous, and one connection serves the process. The
 * store's transactions are async functions, so the driver keeps a mutex: a
 * transaction holds it from `BEGIN IMMEDIATE` to `COMMIT`, and every
 * autocommit query waits for it too, so no statement can ever slip into
 * another caller's open transaction. Across processes, `BEGIN IMMEDIATE` and
 * the busy timeout serialize writers.
 */
import Database from 'better-sqlite3';
import { OnejobError } from '../../core/errors.ts';
import type { AttemptState, JobState } from '../../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobEventType } from '../../core/types.ts';
import type {
  AttemptClaimParams, AttemptInsertRow, AttemptUpdateParams, Driver, DriverQueries, EventInsertRow,
  JobFinishParams, JobInsertRow, JobListParams, JobProgressParams, LeaseExtendParams, MigrationResult,
} from '../driver.ts';
import { loadMigrations } from '../migration-files.ts';
import * as A from './attempt-queries.ts';
import * as C from './certification-queries.ts';
import * as E from './event-queries.ts';
import * as J from './job-queries.ts';

/** Options of {@link openSqliteDriver}. */
export interface SqliteDriverOptions {
  /** A file path, or `:memory:`. */
  readonly path: string;
  /** How long a writer waits for another process's lock; default 5000 ms. */
  readonly busyTimeoutMs?: number;
}

type Row = Record<string, unknown>;

/**
 * Opens a SQLite database file as a driver.
 *
 * @example const driver = openSqliteDriver({ path: './onejob.db' });
 */
export function openSqliteDriver(options: SqliteDriverOptions): Driver {
  let db: Database.Database;
  try {
    db = new Database(options.path);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  } catch (e) {
    throw new OnejobError('database_unavailable', `cannot open SQLite database ${options.path}: ${(e as Error).message}`, { cause: e });
  }
  return new SqliteDriver(db);
}

class SqliteDriver implements Driver {
  readonly name = 'sqlite';
  readonly capabilities = { supportsSkipLocked: false, supportsListenNotify: false, supportsConcurrentWriters: false } as const;
  readonly queries: DriverQueries;
  readonly #db: Database.Database;
  readonly #raw: DriverQueries;
  readonly #statements = new Map<string, Database.Statement>();
  #lock: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#raw = this.#makeQueries();
    const raw = this.#raw;
    // Autocommit use: every call waits its turn behind open transactions.
    this.queries = new Proxy(raw, {
      get: (target, prop, receiver) => {
        if (prop === 'jobInsert') return this.#insertGrouped;
        const fn = Reflect.get(target, prop, receiver) as unknown;
        if (typeof fn !== 'function') return fn;
        return (...args: unknown[]) => this.#exclusive(() => (fn as (...a: unknown[]) => Promise<unknown>).apply(target, args));
      },
    });
  }

  async transaction<T>(fn: (q: DriverQueries) => Promise<T>): Promise<T> {
    return this.#exclusive(async () => {
      this.#db.exec('BEGIN IMMEDIATE');
      try {
        const out = await fn(this.#raw);
        this.#db.exec('COMMIT');
        return out;
      } catch (e) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw e;
      }
    });
  }

  async migrate(): Promise<MigrationResult[]> {
    return this.#exclusive(async () => {
      this.#db.exec('BEGIN IMMEDIATE');
      try {
        this.#db.exec(`CREATE TABLE IF NOT EXISTS onejob_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
        const done = new Set((this.#db.prepare('SELECT version FROM onejob_migrations').all() as { version: number }[]).map((r) => r.version));
        const results: MigrationResult[] = [];
        for (const m of loadMigrations('sqlite')) {
          if (done.has(m.version)) {
            results.push({ version: m.version, name: m.name, status: 'already_applied' });
            continue;
          }
          this.#db.prepare('INSERT INTO onejob_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
          this.#db.exec(m.sql);
          results.push({ version: m.version, name: m.name, status: 'applied' });
        }
        this.#db.exec('COMMIT');
        return results;
      } catch (e) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw e;
      }
    });
  }

  async pendingMigrations(): Promise<number[]> {
    return this.#exclusive(async () => {
      const exists = this.#db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'onejob_migrations'`).get();
      const done = exists ? new Set((this.#db.prepare('SELECT version FROM onejob_migrations').all() as { version: number }[]).map((r) => r.version)) : new Set<number>();
      return loadMigrations('sqlite').map((m) => m.version).filter((v) => !done.has(v));
    });
  }

  async ping(): Promise<void> {
    await this.#exclusive(async () => void this.#db.prepare('SELECT 1').get());
  }

  async notifyWork(): Promise<void> {
    // No cross-process signal on SQLite; the store signals its own process and executors poll slowly.
  }

  async onWork(): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#lock;
    this.#db.close();
  }

  /**
   * Group commit of autocommit `jobInsert`s: calls that arrive while another
   * writer holds the lock wait together and are written in ONE `BEGIN
   * IMMEDIATE … COMMIT` (one WAL sync for all of them, `synchronous = FULL`
   * kept). Each row is its own statement, so a failing row (a CHECK, say)
   * fails only its caller; every caller is answered after the COMMIT.
   */
  readonly #insertGrouped = (row: JobInsertRow): Promise<Job | null> =>
    new Promise((resolve, reject) => {
      this.#insertQueue.push({ row, resolve, reject });
      if (this.#insertQueue.length > 1) return;
      void this.#exclusive(async () => {
        const batch = this.#insertQueue;
        this.#insertQueue = [];
        if (batch.length === 1) {
          const only = batch[0]!;
          await this.#raw.jobInsert(only.row).then(only.resolve, only.reject);
          return;
        }
        const outcomes: (() => void)[] = [];
        try {
          this.#db.exec('BEGIN IMMEDIATE');
          for (const p of batch) {
            try {
              const job = await this.#raw.jobInsert(p.row);
              outcomes.push(() => p.resolve(job));
            } catch (e) {
              outcomes.push(() => p.reject(e));
            }
          }
          this.#db.exec('COMMIT');
        } catch (e) {
          if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
          for (const p of batch) p.reject(e);
          return;
        }
        for (const settle of outcomes) settle();
      }).catch((e: unknown) => {
        // The lock could not be taken (closed): fail whoever is still queued.
        const left = this.#insertQueue;
        this.#insertQueue = [];
        for (const p of left) p.reject(e);
      });
    });

  #insertQueue: { readonly row: JobInsertRow; readonly resolve: (j: Job | null) => void; readonly reject: (e: unknown) => void }[] = [];

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(() => {
      if (this.#closed) throw new OnejobError('database_unavailable', 'the SQLite database is closed');
      return fn();
    });
    this.#lock = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  #stmt(sql: string): Database.Statement {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.#db.prepare(sql);
      this.#statements.set(sql, s);
    }
    return s;
  }

  #makeQueries(): DriverQueries {
    const get = (sql: string, ...args: unknown[]) => this.#stmt(sql).get(...args) as Row | undefined;
    const all = (sql: string, ...args: unknown[]) => this.#stmt(sql).all(...args) as Row[];
    const run = (sql: string, ...args: unknown[]) => this.#stmt(sql).run(...args).changes;
    return {
      jobInsert: async (r: JobInsertRow) => {
        const row = get(J.JOB_INSERT, {
          ownerId: r.ownerId, id: r.id, idempotencyKey: r.idempotencyKey, fingerprint: r.fingerprint, route: r.route,
          input: json(r.input), metadata: r.metadata === null ? null : json(r.metadata), providers: json(r.providers), createdAt: r.createdAt.getTime(),
        });
        return row ? toJob(row) : null;
      },
      jobGetByKey: async (ownerId, key) => mapOne(get(J.JOB_GET_BY_KEY, ownerId, key), toJob),
      jobGet: async (ownerId, id) => mapOne(get(J.JOB_GET, ownerId, id), toJob),
      jobList: async (p: JobListParams) =>
        all(J.JOB_LIST, {
          ownerId: p.ownerId, state: p.state ?? null, limit: p.limit,
          afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null,
        }).map(toJob),
      jobUpdateProgress: async (p: JobProgressParams) =>
        run(J.JOB_UPDATE_PROGRESS, { ownerId: p.ownerId, id: p.id, state: p.state, attemptCount: p.attemptCount, skipped: json(p.skipped), updatedAt: p.updatedAt.getTime() }) === 1,
      jobFinish: async (p: JobFinishParams) =>
        run(J.JOB_FINISH, {
          ownerId: p.ownerId, id: p.id, expectedVersion: p.expectedVersion, state: p.state, completedBy: p.completedBy,
          result: json(p.result), error: p.error === null ? null : json(p.error), skipped: json(p.skipped), now: p.now.getTime(),
        }) === 1,
      jobListQueuedForUpdate: async (limit) => all(J.JOB_LIST_QUEUED, limit).map(toJob),

      attemptInsert: async (r: AttemptInsertRow) => {
        run(A.ATTEMPT_INSERT, {
          ownerId: r.ownerId, id: r.id, jobId: r.jobId, number: r.number, provider: r.provider, kind: r.kind, state: r.state,
          baseVersion: r.baseVersion, startedAt: r.startedAt.getTime(), deadlineAt: ms(r.deadlineAt),
          leaseOwner: r.leaseOwner, leaseToken: r.leaseToken, leaseExpiresAt: ms(r.leaseExpiresAt),
        });
      },
      attemptListByJob: async (ownerId, jobId) => all(A.ATTEMPT_LIST_BY_JOB, ownerId, jobId).map(toAttempt),
      attemptListByJobs: async (ownerId, jobIds) => all(A.ATTEMPT_LIST_BY_JOBS, ownerId, json(jobIds)).map(toAttempt),
      attemptGet: async (ownerId, id) => mapOne(get(A.ATTEMPT_GET, ownerId, id), toAttempt),
      attemptUpdate: async (p: AttemptUpdateParams) => {
        const { sql, params } = attemptUpdateSql(p);
        return run(sql, params) === 1;
      },
      attemptClaim: async (p: AttemptClaimParams) =>
        all(A.ATTEMPT_CLAIM, { leaseOwner: p.leaseOwner, leaseExpiresAt: p.leaseExpiresAt.getTime(), limit: p.limit }).map(toAttempt).sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime()),
      attemptExtendLeases: async (p: LeaseExtendParams) =>
        all(A.ATTEMPT_EXTEND_LEASES, { leaseOwner: p.leaseOwner, tokens: json(p.leaseTokens), leaseExpiresAt: p.leaseExpiresAt.getTime(), now: p.now.getTime() }).map((r) => String(r.lease_token)),
      attemptListLeaseExpired: async (now, limit) => all(A.ATTEMPT_LIST_LEASE_EXPIRED, now.getTime(), limit).map(toAttempt),

      eventInsert: async (rows: readonly EventInsertRow[]) => {
        for (const e of rows) {
          run(E.EVENT_INSERT, { ownerId: e.ownerId, jobId: e.jobId, attemptId: e.attemptId, type: e.type, data: json(e.data), at: e.at.getTime() });
        }
      },
      eventList: async (ownerId, jobId) => all(E.EVENT_LIST, ownerId, jobId).map(toEvent),
      eventListAll: async (afterId, limit) => all(E.EVENT_LIST_ALL, afterId, limit).map(toEvent),
      certificationUpsert: async (row) => C.certificationUpsert(run, row),
      certificationList: async () => C.certificationList(all),
    };
  }
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
  if (sets.length === 0) throw new Error('attemptUpdate with nothing to set');
  let where = 'owner_id = @ownerId AND id = @id AND state IN (SELECT value FROM json_each(@fromStates))';
  if (p.fence) {
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
