/**
 * The SQLite floor of the floor-corrected ratio (issue 40), measured as
 * pgbench measures PostgreSQL's (`bench/lib/pgbench.ts` at `-c 1`): one
 * client, one row per commit, the SQLite driver's own job insert
 * (`JOB_INSERT` of src/store/sqlite/job-queries.ts, its parameters built by
 * the driver's `jobInsertParams`), a fresh key each, autocommit, on a
 * database file the store migrated, opened with the driver's settings (WAL,
 * `synchronous = FULL`, foreign keys). Each commit is timed; prints `RESULT
 * <RunSummary>` (p50: one durable commit).
 *
 * `--path <file>` (created, migrated; removed afterwards), `--seconds`.
 */
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { openStore } from '../../src/store/open-store.ts';
import { JOB_INSERT } from '../../src/store/sqlite/job-queries.ts';
import { jobInsertParams } from '../../src/store/sqlite/scripted-writes.ts';
import type { JobInsertRow } from '../../src/store/driver.ts';
import { argMap, emitResult } from '../lib/child.ts';
import { Reservoir, summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const path = args.path ?? '';
const seconds = Number(args.seconds ?? 3);
if (!path) throw new Error('sqlite-commit: --path is required');
const clean = (): void => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
};
clean();
const store = await openStore(`sqlite:${path}`);
await store.migrate();
await store.close();

type Db = { pragma(s: string): unknown; prepare(sql: string): { get(p: object): unknown }; close(): void };
const Database = createRequire(import.meta.url)('better-sqlite3') as new (p: string) => Db;
const db = new Database(path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('foreign_keys = ON');
const insert = db.prepare(JOB_INSERT);
const input = { messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] };
const tag = `${process.pid}-${Date.now().toString(36)}`;
const row = (i: number): Record<string, unknown> => {
  const r: JobInsertRow = {
    ownerId: 'bench', id: `job_floor_${tag}_${i}`, idempotencyKey: `floor-${tag}-${i}`, fingerprint: 'sha256:0', route: 'summarize',
    input, metadata: null, providers: ['primary'], createdAt: new Date(), traceContext: null,
  };
  return jobInsertParams(r, 'queued');
};
for (let i = 0; i < 50; i++) insert.get(row(-1 - i)); // warm-up: the statement, the WAL file
const lat = new Reservoir();
const t0 = performance.now();
const until = t0 + seconds * 1000;
for (let i = 0; performance.now() < until; i++) {
  const r = row(i);
  const s = performance.now();
  insert.get(r);
  lat.add(performance.now() - s);
}
const took = (performance.now() - t0) / 1000;
db.close();
clean();
emitResult({ ...summarize(lat.values, took), statement: 'JOB_INSERT (src/store/sqlite/job-queries.ts), autocommit, WAL, synchronous=FULL' });
