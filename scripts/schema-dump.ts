/**
 * Writes (or, with --check, compares) the schema each dialect's migrations
 * produce: migrations/schema/postgres.sql (pg_dump --schema-only of a fresh,
 * migrated database) and migrations/schema/sqlite.sql (sqlite_master).
 * CI runs the comparison through test/store/schema-drift.test.ts, so a
 * migration that changes the schema must come with its new dump.
 *
 *   npm run schema:dump     # regenerate both files after adding a migration
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MIGRATIONS_DIR } from '../src/store/migration-files.ts';
import { openStore } from '../src/store/open-store.ts';
import { createPostgresDatabase } from '../test/support/postgres.ts';

/** The PostgreSQL schema of a fresh, migrated database, without comments and settings that vary by run. */
export async function dumpPostgresSchema(): Promise<string> {
  const db = await createPostgresDatabase('onejob_t_schema');
  try {
    const store = await openStore(db.url);
    await store.migrate();
    await store.close();
    const raw = execFileSync('pg_dump', ['--schema-only', '--no-owner', '--no-privileges', '--no-comments', db.url], { encoding: 'utf8' });
    return raw
      .split('\n')
      .filter((l) => !l.startsWith('--') && !l.startsWith('SET ') && !l.startsWith('SELECT pg_catalog.set_config') && !l.startsWith('\\'))
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim() + '\n';
  } finally {
    await db.drop();
  }
}

/** The SQLite schema of a fresh, migrated database file. */
export async function dumpSqliteSchema(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-schema-'));
  try {
    const file = join(dir, 'schema.db');
    const store = await openStore(`sqlite:${file}`);
    await store.migrate();
    await store.close();
    const db = new Database(file, { readonly: true });
    const rows = db.prepare(`SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name`).all() as { sql: string }[];
    db.close();
    return rows.map((r) => `${r.sql};`).join('\n\n') + '\n';
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const SCHEMA_FILES = { postgres: join(MIGRATIONS_DIR, 'schema', 'postgres.sql'), sqlite: join(MIGRATIONS_DIR, 'schema', 'sqlite.sql') } as const;

if (process.argv[1]?.endsWith('schema-dump.ts')) {
  const check = process.argv.includes('--check');
  let drift = false;
  for (const [dialect, dump] of [['postgres', await dumpPostgresSchema()], ['sqlite', await dumpSqliteSchema()]] as const) {
    const file = SCHEMA_FILES[dialect];
    if (check) {
      const same = readFileSync(file, 'utf8') === dump;
      if (!same) drift = true;
      console.log(`${dialect}: ${same ? 'matches' : 'DRIFT'} ${file}`);
    } else {
      writeFileSync(file, dump);
      console.log(`wrote ${file}`);
    }
  }
  if (drift) process.exitCode = 1;
}
