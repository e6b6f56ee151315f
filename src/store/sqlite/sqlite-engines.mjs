/**
 * The two SQLite libraries the worker (`sqlite-worker.mjs`) can run its
 * connection on, behind one small interface: better-sqlite3 (the default,
 * a native module) and `node:sqlite` (built into Node 22.13+, 23.4+, 24,
 * 26: the fallback when better-sqlite3 cannot be loaded, e.g. compiled for
 * another Node ABI). Both bind numbers as REAL and return INTEGER columns as
 * JS numbers, so rows and arguments are the same whichever runs.
 *
 * Plain JavaScript for the same reason as the worker (no loader needed).
 * The engine's name is chosen on the main thread (`sqlite-engine.ts`);
 * this file only loads and wraps it.
 *
 * A connection: `exec(sql)`, `prepare(sql)` → `{ get(...a), all(...a),
 * run(...a) → changes }`, `inTransaction()`, `close()`. Errors carry
 * SQLite's result code as better-sqlite3 names it (`SQLITE_BUSY`,
 * `SQLITE_CONSTRAINT_UNIQUE`, …) in `code`, on both.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** SQLite's primary result codes by number (node:sqlite reports numbers, better-sqlite3 these names). */
const PRIMARY = [
  'SQLITE_OK', 'SQLITE_ERROR', 'SQLITE_INTERNAL', 'SQLITE_PERM', 'SQLITE_ABORT', 'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_NOMEM',
  'SQLITE_READONLY', 'SQLITE_INTERRUPT', 'SQLITE_IOERR', 'SQLITE_CORRUPT', 'SQLITE_NOTFOUND', 'SQLITE_FULL', 'SQLITE_CANTOPEN',
  'SQLITE_PROTOCOL', 'SQLITE_EMPTY', 'SQLITE_SCHEMA', 'SQLITE_TOOBIG', 'SQLITE_CONSTRAINT', 'SQLITE_MISMATCH', 'SQLITE_MISUSE',
  'SQLITE_NOLFS', 'SQLITE_AUTH', 'SQLITE_FORMAT', 'SQLITE_RANGE', 'SQLITE_NOTADB', 'SQLITE_NOTICE', 'SQLITE_WARNING',
];

/** The extended result codes onejob's code or its readers look at (the rest keep their primary name). */
const EXTENDED = new Map([
  [261, 'SQLITE_BUSY_RECOVERY'], [517, 'SQLITE_BUSY_SNAPSHOT'], [773, 'SQLITE_BUSY_TIMEOUT'],
  [262, 'SQLITE_LOCKED_SHAREDCACHE'], [518, 'SQLITE_LOCKED_VTAB'],
  [275, 'SQLITE_CONSTRAINT_CHECK'], [531, 'SQLITE_CONSTRAINT_COMMITHOOK'], [787, 'SQLITE_CONSTRAINT_FOREIGNKEY'],
  [1043, 'SQLITE_CONSTRAINT_FUNCTION'], [1299, 'SQLITE_CONSTRAINT_NOTNULL'], [1555, 'SQLITE_CONSTRAINT_PRIMARYKEY'],
  [1811, 'SQLITE_CONSTRAINT_TRIGGER'], [2067, 'SQLITE_CONSTRAINT_UNIQUE'], [2579, 'SQLITE_CONSTRAINT_ROWID'],
]);

/** better-sqlite3's name of a numeric (extended) result code. */
export function sqliteCodeName(errcode) {
  return EXTENDED.get(errcode) ?? PRIMARY[errcode & 0xff] ?? `SQLITE_${errcode}`;
}

/**
 * Loads an engine's library (for better-sqlite3 also its native module, which
 * it loads only when a database is first opened): throws what the loader
 * threw, whole, when it cannot.
 */
export async function loadEngine(engine) {
  if (engine === 'better-sqlite3') {
    const Database = require('better-sqlite3');
    new Database(':memory:').close();
    return (path) => betterSqlite3(Database, path);
  }
  if (engine === 'node:sqlite') {
    const { DatabaseSync } = await import('node:sqlite');
    return (path) => nodeSqlite(DatabaseSync, path);
  }
  throw new Error(`unknown SQLite engine ${engine}`);
}

function betterSqlite3(Database, path) {
  const db = new Database(path);
  return {
    exec: (sql) => db.exec(sql),
    prepare: (sql) => {
      const s = db.prepare(sql);
      return { get: (...a) => s.get(...a), all: (...a) => s.all(...a), run: (...a) => s.run(...a).changes };
    },
    inTransaction: () => db.inTransaction,
    close: () => db.close(),
  };
}

/** node:sqlite errors as better-sqlite3's: `code` the result code's name. */
function withCode(e) {
  if (e instanceof Error && typeof e.errcode === 'number') {
    const err = new Error(e.message);
    err.name = 'SqliteError';
    err.code = sqliteCodeName(e.errcode);
    return err;
  }
  return e;
}

function translated(f) {
  return (...a) => {
    try {
      return f(...a);
    } catch (e) {
      throw withCode(e);
    }
  };
}

function nodeSqlite(DatabaseSync, path) {
  let db;
  try {
    db = new DatabaseSync(path);
  } catch (e) {
    throw withCode(e);
  }
  // `isTransaction` came in 22.16 and 24.0; before it, BEGIN fails inside a transaction and is undone at once outside one.
  const inTransaction = 'isTransaction' in db
    ? () => db.isTransaction
    : () => {
        try {
          db.exec('BEGIN');
        } catch {
          return true;
        }
        db.exec('ROLLBACK');
        return false;
      };
  return {
    exec: translated((sql) => db.exec(sql)),
    prepare: translated((sql) => {
      const s = db.prepare(sql);
      return { get: translated((...a) => s.get(...a)), all: translated((...a) => s.all(...a)), run: translated((...a) => Number(s.run(...a).changes)) };
    }),
    inTransaction,
    close: () => db.close(),
  };
}
