// better-sqlite3 against node:sqlite (Node 22.13+, 24, 26) on the statements onejob's SQLite
// driver runs most: a row inserted with its JSON, read back by primary key, and a settle-like
// UPDATE, each as its own autocommit statement in WAL mode (synchronous=NORMAL, then FULL), and
// the same inserts batched in one transaction (the engines' own cost, no fsync in between).
// Run: node bench/sqlite-engines.mjs   (on a line that has node:sqlite; prints ops/s per engine)
// Not part of `npm run bench`; docs/node-versions.md has the figures and the choice.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const N = Number(process.env.N ?? 5000);
const engines = {
  'better-sqlite3': (path) => {
    const Database = require('better-sqlite3');
    const db = new Database(path);
    return { exec: (sql) => db.exec(sql), prepare: (sql) => db.prepare(sql), close: () => db.close() };
  },
};
try {
  const { DatabaseSync } = await import('node:sqlite');
  engines['node:sqlite'] = (path) => {
    const db = new DatabaseSync(path);
    return { exec: (sql) => db.exec(sql), prepare: (sql) => db.prepare(sql), close: () => db.close() };
  };
} catch {
  console.log(`node:sqlite: not in Node ${process.version}`);
}

const payload = JSON.stringify({ messages: [{ role: 'user', content: 'Summarize: '.padEnd(400, 'x') }] });
function run(open, sync) {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-sqlite-bench-'));
  const db = open(join(dir, 'b.db'));
  db.exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=${sync};
    CREATE TABLE jobs (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, idempotency_key TEXT NOT NULL, input TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, UNIQUE (owner_id, idempotency_key))`);
  const insert = db.prepare('INSERT INTO jobs (id, owner_id, idempotency_key, input, state, version) VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING');
  const select = db.prepare('SELECT * FROM jobs WHERE id = ?');
  const update = db.prepare("UPDATE jobs SET state = 'succeeded', version = version + 1 WHERE id = ? AND version = 1");
  const time = (f) => { const t = process.hrtime.bigint(); f(); return Number(process.hrtime.bigint() - t) / 1e9; };
  const out = {};
  out.insert = N / time(() => { for (let i = 0; i < N; i++) insert.run(`job_${i}`, 'alice', `key-${i}`, payload, 'queued'); });
  out.select = (N * 4) / time(() => { for (let i = 0; i < N * 4; i++) select.get(`job_${i % N}`); });
  out.update = N / time(() => { for (let i = 0; i < N; i++) update.run(`job_${i}`); });
  out.batched = (N * 4) / time(() => { db.exec('BEGIN'); for (let i = 0; i < N * 4; i++) insert.run(`b_${i}`, 'bob', `k-${i}`, payload, 'queued'); db.exec('COMMIT'); });
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return out;
}

console.log(`Node ${process.version}, N=${N}; operations per second (higher is better), best of 3`);
for (const sync of ['NORMAL', 'FULL']) {
  for (const [name, open] of Object.entries(engines)) {
    const best = {};
    for (let r = 0; r < 3; r++) for (const [k, v] of Object.entries(run(open, sync))) best[k] = Math.max(best[k] ?? 0, v);
    console.log(`  synchronous=${sync.padEnd(6)} ${name.padEnd(15)} ${Object.entries(best).map(([k, v]) => `${k} ${Math.round(v).toLocaleString('en')}`).join('  ')}`);
  }
}
