/**
 * The stores every store-backed suite runs against: SQLite (a temp file) and
 * PostgreSQL (a fresh database), each migrated.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/core/clock.ts';
import type { SpendPolicy } from '../../src/core/limits.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { SqliteEngineChoice } from '../../src/store/sqlite/sqlite-engine.ts';
import { createPostgresDatabase, postgresSkipReason } from './postgres.ts';

/** One database engine for tests. */
export interface TestDatabase {
  readonly name: 'sqlite' | 'postgres';
  /** Why this engine is skipped, or null. */
  readonly skip: string | null;
  /** A fresh, empty database URL and its cleanup. */
  create(): Promise<{ url: string; cleanup(): Promise<void> }>;
}

/** SQLite and PostgreSQL. */
export const TEST_DATABASES: readonly TestDatabase[] = [
  {
    name: 'sqlite',
    // CI's runs against other PostgreSQL majors (.ci/run, .ci/postgres-line) test the PostgreSQL half only.
    skip: process.env.ONEJOB_TEST_ONLY_POSTGRES === '1' ? 'ONEJOB_TEST_ONLY_POSTGRES=1 (a run against another PostgreSQL major)' : null,
    async create() {
      const dir = mkdtempSync(join(tmpdir(), 'onejob-test-'));
      return { url: `sqlite:${join(dir, 'onejob.db')}`, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'postgres',
    skip: postgresSkipReason(),
    async create() {
      const db = await createPostgresDatabase();
      return { url: db.url, cleanup: () => db.drop() };
    },
  },
];

/** A migrated store on a fresh database of `db`; `cleanup()` closes and drops it. */
export async function createTestStore(
  db: TestDatabase,
  options: { clock?: Clock; databaseClock?: Clock; poolSize?: number; spend?: SpendPolicy; sqliteEngine?: SqliteEngineChoice | undefined } = {},
): Promise<{ store: JobStore; url: string; cleanup(): Promise<void> }> {
  const { url, cleanup } = await db.create();
  const store = await openStore(url, { clock: options.clock, databaseClock: options.databaseClock, poolSize: options.poolSize ?? 20, spend: options.spend, sqliteEngine: options.sqliteEngine });
  await store.migrate();
  return {
    store,
    url,
    async cleanup() {
      await store.close();
      await cleanup();
    },
  };
}
