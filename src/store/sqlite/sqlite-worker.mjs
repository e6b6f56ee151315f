/**
 * The SQLite worker thread: owns the one connection of a driver
 * (better-sqlite3, or node:sqlite where better-sqlite3 cannot load:
 * `sqlite-engines.mjs`) and runs what `sqlite-connection.ts` posts to it,
 * one message at a time, in arrival order. Every blocking call (a commit's WAL sync under
 * `synchronous = FULL`, a busy-timeout wait for another process's lock) blocks
 * this thread, never the main event loop.
 *
 * Plain JavaScript on purpose: it needs no TypeScript loader, so it starts
 * the same under tsx, vitest, `bin/onejob` (tsx registered in the main thread
 * only) and plain `node`. The message shapes are typed on the driver's side
 * (`Request`/`Reply` in sqlite-connection.ts); this file must stay in step.
 *
 * The worker knows nothing of onejob's tables: it prepares the SQL text it is
 * sent (cached, so each statement is prepared once per connection), binds the
 * arguments as given and returns raw rows. It never decides anything; it
 * only refuses to run a statement meant for a transaction when none is open.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadEngine } from './sqlite-engines.mjs';

/** @type {import('node:worker_threads').MessagePort} */
const port = /** @type {any} */ (parentPort);
const { path, busyTimeoutMs, engine } = workerData;

/** The connection (see sqlite-engines.mjs): better-sqlite3's or node:sqlite's. */
let db;
let open;
try {
  open = await loadEngine(engine);
} catch (e) {
  // The library itself cannot be loaded (a native module built for another Node, say): the main thread may fall back.
  port.postMessage({ t: 'load_failed', e: errInfo(e) });
  port.close();
}
if (open) {
  try {
    db = open(path);
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = FULL');
    db.exec('PRAGMA foreign_keys = ON');
    db.exec(`PRAGMA busy_timeout = ${Number(busyTimeoutMs)}`);
    port.postMessage({ t: 'ready' });
  } catch (e) {
    db = undefined;
    port.postMessage({ t: 'open_failed', e: errInfo(e) });
    port.close();
  }
}

/** @type {Map<string, ReturnType<typeof db.prepare>>} */
const statements = new Map();

function stmt(sql) {
  let s = statements.get(sql);
  if (!s) {
    s = db.prepare(sql);
    statements.set(sql, s);
  }
  return s;
}

function errInfo(e) {
  return e instanceof Error
    ? { name: e.name, message: e.message, code: typeof e.code === 'string' ? e.code : undefined }
    : { name: 'Error', message: String(e), code: undefined };
}

function query(kind, sql, args) {
  switch (kind) {
    case 'get':
      return stmt(sql).get(...args);
    case 'all':
      return stmt(sql).all(...args);
    case 'run':
      return stmt(sql).run(...args);
    case 'each': {
      // One statement, several argument lists (e.g. one row each), in order; stops at the first failure.
      const s = stmt(sql);
      for (const a of args) s.run(...a);
      return undefined;
    }
    default:
      throw new Error(`unknown query kind ${kind}`);
  }
}

function rollbackIfOpen() {
  if (db.inTransaction()) db.exec('ROLLBACK');
}

/** Whether a step's result says it applied: a row returned, rows changed, a non-empty list. */
function applied(result) {
  if (result === null || result === undefined) return false;
  if (typeof result === 'number') return result > 0;
  if (Array.isArray(result)) return result.length > 0;
  return true;
}

/**
 * One script: its steps in order; a step with `if: i` runs only when step
 * `i` applied (else its result is null). The conditions are plain data, so
 * a script stays what the driver wrote; the worker decides nothing.
 */
function runSteps(steps) {
  const results = [];
  for (const step of steps) {
    if (step.if !== undefined && !applied(results[step.if])) results.push(null);
    else results.push(query(step.k, step.s, step.p) ?? null);
  }
  return results;
}

/**
 * Group commit: several scripts in ONE `BEGIN IMMEDIATE … COMMIT` (one WAL
 * sync for all). Each script runs in its own savepoint, so a failing script
 * (a CHECK, say) is undone alone and fails only its own entry; a failing
 * BEGIN or COMMIT fails them all.
 */
function scriptBatch(scripts) {
  const out = [];
  db.exec('BEGIN IMMEDIATE');
  try {
    for (const steps of scripts) {
      db.exec('SAVEPOINT onejob_script');
      try {
        out.push({ v: runSteps(steps) });
        db.exec('RELEASE onejob_script');
      } catch (e) {
        db.exec('ROLLBACK TO onejob_script');
        db.exec('RELEASE onejob_script');
        out.push({ e: errInfo(e) });
      }
    }
    db.exec('COMMIT');
  } catch (e) {
    rollbackIfOpen();
    throw e;
  }
  return out;
}

function migrate(migrations, now) {
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec('CREATE TABLE IF NOT EXISTS onejob_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    const done = new Set(db.prepare('SELECT version FROM onejob_migrations').all().map((r) => r.version));
    const results = [];
    for (const m of migrations) {
      if (done.has(m.version)) {
        results.push({ version: m.version, name: m.name, status: 'already_applied' });
        continue;
      }
      db.prepare('INSERT INTO onejob_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now);
      db.exec(m.sql);
      results.push({ version: m.version, name: m.name, status: 'applied' });
    }
    db.exec('COMMIT');
    return results;
  } catch (e) {
    rollbackIfOpen();
    throw e;
  } finally {
    // A migration may change tables that cached statements were prepared against.
    statements.clear();
  }
}

function appliedVersions() {
  const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'onejob_migrations'`).get();
  return exists ? db.prepare('SELECT version FROM onejob_migrations').all().map((r) => r.version) : [];
}

function handle(m) {
  switch (m.t) {
    case 'q':
      // tx: 0 autocommit, 1 inside the caller's open transaction, 2 open it first.
      if (m.tx === 2) db.exec('BEGIN IMMEDIATE');
      else if (m.tx === 1 && !db.inTransaction()) throw new Error('the transaction is no longer open');
      return query(m.k, m.s, m.p);
    case 'sb':
      return scriptBatch(m.scripts);
    case 'commit':
      try {
        db.exec('COMMIT');
      } catch (e) {
        rollbackIfOpen();
        throw e;
      }
      return undefined;
    case 'rollback':
      rollbackIfOpen();
      return undefined;
    case 'migrate':
      return migrate(m.migrations, m.now);
    case 'versions':
      return appliedVersions();
    case 'close':
      db.close();
      return undefined;
    default:
      throw new Error(`unknown request ${m.t}`);
  }
}

if (db) {
  port.on('message', (m) => {
    let reply;
    try {
      reply = { id: m.id, v: handle(m) };
    } catch (e) {
      reply = { id: m.id, e: errInfo(e) };
    }
    port.postMessage(reply);
    if (m.t === 'close') port.close();
  });
}
