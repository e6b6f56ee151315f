#!/usr/bin/env node
/**
 * Measures the two PostgreSQL client libraries on onejob's hot queries:
 * `pg` (node-postgres, the project's dependency) and `postgres` (porsager,
 * NOT a project dependency: install it outside the checkout first).
 *
 *   mkdir -p /tmp/pgcmp && (cd /tmp/pgcmp && npm init -y && npm install postgres)
 *   node bench/driver-choice.mjs            # PGCMP_DIR=/tmp/pgcmp, ADMIN_URL=postgres://postgres@127.0.0.1:5432/test
 *
 * Workloads, each with 32 requests in flight, against a scratch database
 * (created here from the migration, dropped at the end):
 * - insert: the jobInsert statement, INSERT … ON CONFLICT (owner_id,
 *   idempotency_key) DO NOTHING RETURNING <job columns>, every key new;
 * - select: SELECT <job columns> FROM jobs WHERE owner_id = $1 AND id = $2,
 *   random existing rows.
 * Each library runs ROUNDS rounds, alternating which goes first; pool size is
 * POOL (same for both). Reports ops/s and p50/p99 latency per round.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const ADMIN_URL = process.env.ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PGCMP_DIR = process.env.PGCMP_DIR ?? '/tmp/pgcmp';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const POOL = Number(process.env.POOL ?? 10);
const IN_FLIGHT = 32;
const INSERTS = Number(process.env.INSERTS ?? 10_000);
const SELECTS = Number(process.env.SELECTS ?? 30_000);

const postgres = createRequire(join(PGCMP_DIR, 'package.json'))('postgres');
const MIGRATION = readFileSync(fileURLToPath(new URL('../migrations/postgres/0001_init.sql', import.meta.url)), 'utf8');

const JOB_COLUMNS =
  'owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, completed_by, result, error, skipped, created_at, updated_at';
const INSERT_SQL = `INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers,
  state, version, attempt_count, skipped, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, 0, '[]', $9, $9)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING ${JOB_COLUMNS}`;
const SELECT_SQL = `SELECT ${JOB_COLUMNS} FROM jobs WHERE owner_id = $1 AND id = $2`;

const INPUT = { messages: [{ role: 'user', content: 'Summarize the following text in one sentence: ' + 'lorem ipsum '.repeat(20) }], temperature: 0 };
const PROVIDERS = ['primary', 'fallback'];

function newJob(run) {
  return {
    owner: `owner_${Math.floor(Math.random() * 100)}`,
    id: `job_${randomUUID()}`,
    key: `${run}_${randomUUID()}`,
    createdAt: new Date(),
  };
}

/** Runs `total` calls of `op(i)` with IN_FLIGHT at once; returns ops/s and latency percentiles. */
async function measure(total, op) {
  const lat = new Float64Array(total);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t = performance.now();
        await op(i);
        lat[i] = performance.now() - t;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  lat.sort();
  const pct = (p) => lat[Math.min(total - 1, Math.floor(total * p))];
  return { opsPerSec: Math.round(total / seconds), p50: pct(0.5), p99: pct(0.99) };
}

const libraries = {
  pg: (url) => {
    const pool = new pg.Pool({ connectionString: url, max: POOL });
    return {
      async insert(j) {
        const res = await pool.query({
          name: 'bench_job_insert',
          text: INSERT_SQL,
          values: [j.owner, j.id, j.key, 'sha256:x', 'summarize', JSON.stringify(INPUT), null, JSON.stringify(PROVIDERS), j.createdAt],
        });
        if (res.rows.length !== 1) throw new Error('insert skipped');
      },
      async select(j) {
        const res = await pool.query({ name: 'bench_job_get', text: SELECT_SQL, values: [j.owner, j.id] });
        if (res.rows.length !== 1) throw new Error('row missing');
      },
      warm: () => Promise.all(Array.from({ length: POOL }, () => pool.query('SELECT 1'))),
      end: () => pool.end(),
    };
  },
  postgres: (url) => {
    const sql = postgres(url, { max: POOL, onnotice: () => {} });
    return {
      async insert(j) {
        // postgres.js serializes json parameters itself (the server describes them as json).
        const rows = await sql.unsafe(INSERT_SQL, [j.owner, j.id, j.key, 'sha256:x', 'summarize', INPUT, null, PROVIDERS, j.createdAt], { prepare: true });
        if (rows.length !== 1) throw new Error('insert skipped');
      },
      async select(j) {
        const rows = await sql.unsafe(SELECT_SQL, [j.owner, j.id], { prepare: true });
        if (rows.length !== 1) throw new Error('row missing');
      },
      warm: () => Promise.all(Array.from({ length: POOL }, () => sql`SELECT 1`)),
      end: () => sql.end(),
    };
  },
};

const fmt = (r) => `${String(r.opsPerSec).padStart(6)} ops/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms`;

const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
const dbName = `onejob_bench_${randomBytes(5).toString('hex')}`;
await admin.query(`CREATE DATABASE ${dbName}`);
const url = new URL(ADMIN_URL);
url.pathname = `/${dbName}`;
const results = { pg: { insert: [], select: [] }, postgres: { insert: [], select: [] } };
try {
  const setup = new pg.Client({ connectionString: url.toString() });
  await setup.connect();
  await setup.query(MIGRATION);
  await setup.end();

  const { rows: versionRows } = await admin.query('SHOW server_version');
  const pkg = (name, dir) => JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')).version;
  console.log(
    `PostgreSQL ${versionRows[0].server_version}; pg ${pkg('pg', fileURLToPath(new URL('..', import.meta.url)))}, postgres ${pkg('postgres', PGCMP_DIR)}; ` +
      `node ${process.version}; pool ${POOL}; ${IN_FLIGHT} in flight; ${INSERTS} inserts, ${SELECTS} selects per round`,
  );
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? ['pg', 'postgres'] : ['postgres', 'pg'];
    for (const name of order) {
      const lib = libraries[name](url.toString());
      await lib.warm();
      const jobs = Array.from({ length: INSERTS }, () => newJob(`${name}${round}`));
      const ins = await measure(INSERTS, (i) => lib.insert(jobs[i]));
      const sel = await measure(SELECTS, () => lib.select(jobs[Math.floor(Math.random() * jobs.length)]));
      await lib.end();
      results[name].insert.push(ins);
      results[name].select.push(sel);
      console.log(`round ${round} ${name.padEnd(8)} insert ${fmt(ins)} | select ${fmt(sel)}`);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const name of ['pg', 'postgres']) {
    const r = results[name];
    console.log(
      `median ${name.padEnd(8)} insert ${median(r.insert.map((x) => x.opsPerSec))} ops/s (p99 ${median(r.insert.map((x) => x.p99)).toFixed(2)} ms)` +
        ` | select ${median(r.select.map((x) => x.opsPerSec))} ops/s (p99 ${median(r.select.map((x) => x.p99)).toFixed(2)} ms)`,
    );
  }
} finally {
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}
