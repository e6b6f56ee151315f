/**
 * Load worker: keeps `--concurrency` keyed enqueues in flight for
 * `--duration` ms against one system on the local PostgreSQL (or SQLite), in
 * this process, and prints `RESULT <RunSummary>`.
 *
 * Kinds:
 * - `store`: onejob's `JobStore.createJob` (fresh key each), the product's
 *   own pool size unless `--pool` is given;
 * - `raw`: `pg.Pool.query` of the very statement the PostgreSQL driver
 *   prepares for `jobInsert` (`JOB_SQL.insert`), one row per round trip, one
 *   connection per request in flight;
 * - `pgboss`: pg-boss 10 `send(queue, data, { singletonKey })` on a queue
 *   with policy `short` (the policy whose unique index makes a key single);
 * - `graphile`: graphile-worker 0.17 `addJob(task, payload, { jobKey })`.
 *
 * The peers are imported from `bench/.scratch/node_modules` (installed by the
 * benchmark, never by the product).
 */
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { argMap, BENCH_DIR, emitResult } from '../lib/child.ts';
import { Reservoir, summarize } from '../lib/stats.ts';
import { openStore } from '../../src/store/open-store.ts';
import { JOB_SQL } from '../../src/store/postgres/job-queries.ts';

const args = argMap(process.argv.slice(2));
const kind = args.kind ?? 'store';
const url = args.url ?? '';
const concurrency = Number(args.concurrency ?? 32);
const durationMs = Number(args.duration ?? 5000);
const warmupMs = Number(args.warmup ?? 500);
const pool = args.pool ? Number(args.pool) : undefined;
const runId = `${process.pid}-${Date.now().toString(36)}`;
const scratchRequire = createRequire(resolve(BENCH_DIR, '.scratch', 'package.json'));

/** The same input the HTTP benchmark posts. */
export const BENCH_INPUT = { messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] };

type Op = (i: number) => Promise<unknown>;

async function setup(): Promise<{ op: Op; close: () => Promise<void> }> {
  if (kind === 'store') {
    const store = await openStore(url, pool ? { poolSize: pool } : {});
    await store.migrate();
    return {
      op: (i) => store.createJob({ ownerId: 'bench', idempotencyKey: `s-${runId}-${i}`, route: 'summarize', input: BENCH_INPUT, providers: ['primary'] }),
      close: () => store.close(),
    };
  }
  if (kind === 'raw') {
    const p = new pg.Pool({ connectionString: url, max: pool ?? concurrency });
    const input = JSON.stringify(BENCH_INPUT);
    return {
      op: (i) =>
        p.query({
          ...JOB_SQL.insert,
          values: ['bench', `job_raw_${runId}_${i}`, `r-${runId}-${i}`, 'sha256:0', 'summarize', input, null, '["primary"]', new Date(), null],
        }),
      close: () => p.end(),
    };
  }
  if (kind === 'pgboss') {
    const { default: PgBoss } = (await import(scratchRequire.resolve('pg-boss'))) as { default: new (o: object) => PgBossLike };
    const boss = new PgBoss({ connectionString: url, max: pool ?? 10, supervise: false, schedule: false, migrate: true });
    boss.on('error', () => {});
    await boss.start();
    await boss.createQueue('bench', { name: 'bench', policy: 'short' }).catch(() => {});
    return {
      op: (i) => boss.send('bench', BENCH_INPUT, { singletonKey: `b-${runId}-${i}` }),
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  }
  if (kind === 'graphile') {
    const gw = (await import(scratchRequire.resolve('graphile-worker'))) as GraphileLike;
    const utils = await gw.makeWorkerUtils({ connectionString: url, maxPoolSize: pool ?? 10 } as object);
    await utils.migrate();
    return {
      op: (i) => utils.addJob('bench', BENCH_INPUT, { jobKey: `g-${runId}-${i}` }),
      close: () => utils.release(),
    };
  }
  throw new Error(`unknown kind ${kind}`);
}

export interface PgBossLike {
  on(event: string, fn: (e: unknown) => void): void;
  start(): Promise<unknown>;
  stop(o: object): Promise<void>;
  createQueue(name: string, o: object): Promise<void>;
  send(name: string, data: object, o: object): Promise<string | null>;
}
export interface GraphileLike {
  makeWorkerUtils(o: object): Promise<{ migrate(): Promise<void>; addJob(t: string, p: object, o: object): Promise<{ id: string; payload: unknown }>; release(): Promise<void> }>;
}

async function main(): Promise<void> {
  const { op, close } = await setup();
  let i = 0;
  let errors = 0;
  let firstError: string | undefined;
  const lat = new Reservoir();
  let measuring = false;
  let stop = false;
  const worker = async (): Promise<void> => {
    while (!stop) {
      const n = i++;
      const t0 = performance.now();
      try {
        await op(n);
        if (measuring) lat.add(performance.now() - t0);
      } catch (e) {
        if (measuring) errors++;
        firstError ??= String(e);
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  await new Promise((r) => setTimeout(r, warmupMs));
  measuring = true;
  const t0 = performance.now();
  const startOps = lat.seen;
  await new Promise((r) => setTimeout(r, durationMs));
  measuring = false;
  const seconds = (performance.now() - t0) / 1000;
  const ops = lat.seen - startOps;
  stop = true;
  await Promise.all(workers);
  await close();
  const s = summarize(lat.values, seconds, errors);
  emitResult({ ...s, ops, rps: Math.round((ops / seconds) * 10) / 10, kind, concurrency, firstError });
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
