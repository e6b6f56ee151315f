/**
 * The two SQLite libraries behind the worker (src/store/sqlite/sqlite-engines.mjs)
 * report errors alike: another connection's write lock is `SQLITE_BUSY`
 * (transient: the driver runs the call again) and a UNIQUE violation
 * `SQLITE_CONSTRAINT_UNIQUE` (permanent), whichever library runs; rows and
 * `run()`'s change count are the same. node:sqlite is tested wherever this
 * Node has it (22.13+, 24, 26), and must load there.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain JavaScript module without declarations (it runs in the worker)
import { loadEngine } from '../../src/store/sqlite/sqlite-engines.mjs';
import { nodeSqliteExpected } from '../../src/store/sqlite/sqlite-engine.ts';
import { classifyDatabaseError } from '../../src/store/transient-errors.ts';

interface Conn {
  exec(sql: string): void;
  prepare(sql: string): { get(...a: unknown[]): unknown; all(...a: unknown[]): unknown[]; run(...a: unknown[]): number };
  inTransaction(): boolean;
  close(): void;
}
const open = loadEngine as (engine: string) => Promise<(path: string) => Conn>;

const dir = mkdtempSync(join(tmpdir(), 'onejob-engines-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const engines = nodeSqliteExpected() ? ['better-sqlite3', 'node:sqlite'] : ['better-sqlite3'];
for (const engine of engines) {
  describe(`SQLite engine ${engine}`, () => {
    it('rows, change counts, transactions, and SQLite result codes as better-sqlite3 names them', async () => {
      const connect = await open(engine);
      const path = join(dir, `${engine.replace(':', '-')}.db`);
      const a = connect(path);
      const b = connect(path);
      try {
        a.exec('PRAGMA journal_mode = WAL');
        b.exec('PRAGMA busy_timeout = 0');
        a.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, n INTEGER)');
        expect(a.prepare('INSERT INTO t (k, n) VALUES (?, ?)').run('x', 1)).toBe(1);
        expect({ ...(a.prepare('SELECT k, n FROM t WHERE k = ?').get('x') as object) }).toEqual({ k: 'x', n: 1 });
        expect(a.prepare('SELECT k FROM t WHERE k = ?').get('none')).toBeUndefined();
        expect(a.prepare('UPDATE t SET n = n + 1 WHERE k = ?').run('none')).toBe(0);

        const unique = (() => {
          try {
            a.prepare('INSERT INTO t (k, n) VALUES (?, ?)').run('x', 2);
          } catch (e) {
            return e as { code?: string };
          }
          return null;
        })();
        expect(unique?.code).toBe('SQLITE_CONSTRAINT_UNIQUE');
        expect(classifyDatabaseError(unique)).toBe('permanent');

        expect(a.inTransaction()).toBe(false);
        a.exec('BEGIN IMMEDIATE');
        expect(a.inTransaction()).toBe(true);
        const busy = (() => {
          try {
            b.exec('BEGIN IMMEDIATE');
          } catch (e) {
            return e as { code?: string };
          }
          return null;
        })();
        expect(busy?.code).toMatch(/^SQLITE_BUSY/);
        expect(classifyDatabaseError(busy)).toBe('transient');
        a.exec('ROLLBACK');
        expect(a.inTransaction()).toBe(false);
      } finally {
        a.close();
        b.close();
      }
    });
  });
}
