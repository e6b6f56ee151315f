/**
 * Opens a {@link Store} from a database URL: `sqlite:<path>` (the embedded
 * default; `sqlite::memory:` for a throwaway database) or `postgres://…` /
 * `postgresql://…`.
 */
import type { Clock } from '../core/clock.ts';
import { OnejobError } from '../core/errors.ts';
import { redactCredentials } from '../core/redact-credentials.ts';
import type { Driver } from './driver.ts';
import { JobStore, type JobStoreOptions } from './job-store.ts';
import { createPostgresDriver } from './postgres/postgres-driver.ts';
import { openSqliteDriver } from './sqlite/sqlite-driver.ts';
import type { SqliteEngineChoice } from './sqlite/sqlite-engine.ts';

/** The database URL used when none is configured. */
export const DEFAULT_DATABASE_URL = 'sqlite:./onejob.db';

/** Options of {@link openStore}. */
export interface OpenStoreOptions {
  /** The host clock (a job's `created_at`); see {@link JobStoreOptions}. */
  readonly clock?: Clock;
  /** Stands in for the database's clock (tests only); see {@link JobStoreOptions}. */
  readonly databaseClock?: Clock;
  /** PostgreSQL pool size; default 10. */
  readonly poolSize?: number;
  /** Spend limits (CONTRACT §16); see {@link JobStoreOptions}. */
  readonly spend?: JobStoreOptions['spend'];
  /** The library of a `sqlite:` database (default `auto`: better-sqlite3, else node:sqlite; see sqlite/sqlite-engine.ts). */
  readonly sqliteEngine?: SqliteEngineChoice;
}

/**
 * Opens the driver named by `url`.
 *
 * @throws OnejobError `config_invalid` for an unsupported URL, `database_unavailable` when it cannot connect.
 */
export async function openDriver(url: string, options: OpenStoreOptions = {}): Promise<Driver> {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '') throw new OnejobError('config_invalid', `database URL "${url}" names no file (try sqlite:./onejob.db)`);
    return openSqliteDriver({ path, engine: options.sqliteEngine });
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    return createPostgresDriver({ connectionString: url, max: options.poolSize });
  }
  throw new OnejobError('config_invalid', `unsupported database URL "${redact(url)}": use sqlite:<path> or postgres://…`);
}

/**
 * Opens the store for `url`. It does not migrate: call `store.migrate()`.
 *
 * @example const store = await openStore('sqlite:./onejob.db'); await store.migrate();
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<JobStore> {
  return new JobStore(await openDriver(url, options), { clock: options.clock, databaseClock: options.databaseClock, spend: options.spend });
}

/** The URL with its userinfo (user and password) redacted, for messages: the one redaction, {@link redactCredentials}. */
export function redact(url: string): string {
  return redactCredentials(url);
}
