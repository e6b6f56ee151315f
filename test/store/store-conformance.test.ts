/**
 * The store conformance suite on every engine: PostgreSQL, and SQLite on
 * both of its libraries: better-sqlite3 (the default) everywhere, and
 * node:sqlite (the fallback when better-sqlite3 cannot load) on every Node
 * that has it (22.13+, 24, 26: the CI line suites). Each SQLite entry
 * forces its library, so a library that cannot be loaded where it should
 * fails the suite instead of quietly testing the other one.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runStoreConformance } from '../../src/store/conformance/store-conformance.ts';
import { openStore } from '../../src/store/open-store.ts';
import { nodeSqliteExpected, type SqliteEngine } from '../../src/store/sqlite/sqlite-engine.ts';
import { sqliteEngineOf } from '../../src/store/sqlite/sqlite-driver.ts';
import { createTestStore, TEST_DATABASES, type TestDatabase } from '../support/databases.ts';

const entries = TEST_DATABASES.flatMap((db): { db: TestDatabase; label: string; engine: SqliteEngine | undefined }[] => {
  if (db.name !== 'sqlite') return [{ db, label: db.name, engine: undefined }];
  const engines: SqliteEngine[] = nodeSqliteExpected() ? ['better-sqlite3', 'node:sqlite'] : ['better-sqlite3'];
  return engines.map((engine) => ({ db, label: `sqlite on ${engine}`, engine }));
});

for (const { db, label, engine } of entries) {
  runStoreConformance({
    name: label,
    test: { describe, it, expect, beforeEach, afterEach },
    skip: db.skip,
    repetitions: db.name === 'postgres' ? 30 : 10,
    createStore: async (clock) => {
      const t = await createTestStore(db, { clock, databaseClock: clock, sqliteEngine: engine });
      // The store runs on the library this entry names (a fallback would test the other one twice).
      if (engine !== undefined) expect(sqliteEngineOf(t.store.driver)?.name).toBe(engine);
      return { ...t, openAnother: () => openStore(t.url, { clock, databaseClock: clock, poolSize: 20, sqliteEngine: engine }) };
    },
  });
}

describe('the SQLite libraries this Node must run', () => {
  it(`node:sqlite loads wherever Node has it (${process.version}: ${nodeSqliteExpected() ? 'expected' : 'not expected'})`, async () => {
    const specifier = 'node:sqlite'; // a variable: this project's @types/node (20) does not declare it
    const loaded = await import(specifier).then(() => true, () => false);
    expect(loaded).toBe(nodeSqliteExpected());
  });
});
