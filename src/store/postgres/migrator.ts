/**
 * The PostgreSQL migrator: the statements `PostgresDriver.migrate()` runs in
 * its one transaction, and the pending-versions check (see
 * docs/postgres-driver.md, "Migrations"; docs/store.md for the files).
 */
import type { ClientBase, QueryConfig } from 'pg';
import { OnejobError } from '../../core/errors.ts';
import type { MigrationResult } from '../driver.ts';
import type { MigrationFile } from '../migration-files.ts';
import { errorMessage, isConnectionError } from './pg-errors.ts';
import type { Queryable } from './queryable.ts';

/** The advisory lock key held while migrating: the ASCII bytes of "onejob". */
export const MIGRATION_LOCK_KEY = 0x6f6e656a6f62;

/** A migration statement: no client-side read timeout either (pg treats 0 as "the connection's default", so a day). */
function migrationQuery(text: string): QueryConfig {
  return { text, query_timeout: 24 * 3_600_000 } as QueryConfig;
}

/**
 * Applies every file of `files` not yet recorded, on `client`, which must be
 * inside a transaction (the caller's BEGIN … COMMIT): takes
 * `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`, creates `onejob_migrations`
 * inside the lock, and inserts each migration's row before its SQL, so even a
 * migrator that skipped the lock could not apply a version twice.
 *
 * @returns one result per file, in version order.
 * @throws OnejobError `internal` naming the migration that failed; a connection failure as it came.
 */
export async function applyMigrations(client: ClientBase, files: readonly MigrationFile[]): Promise<MigrationResult[]> {
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
  return results;
}

/** Versions of `files` not recorded in `onejob_migrations` (all of them when the table is missing). */
export async function pendingMigrationVersions(db: Queryable, files: readonly MigrationFile[]): Promise<number[]> {
  const versions = files.map((f) => f.version);
  const present = await db.query<{ present: boolean }>({
    text: `SELECT to_regclass('onejob_migrations') IS NOT NULL AS present`,
  });
  if (!present.rows[0]?.present) return versions;
  const done = await db.query<{ version: number }>({ text: 'SELECT version FROM onejob_migrations' });
  const applied = new Set(done.rows.map((r) => r.version));
  return versions.filter((v) => !applied.has(v));
}
