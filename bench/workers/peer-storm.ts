/**
 * The duplicate storm on a queue library, in its own process: `--n`
 * concurrent keyed enqueues with ONE key and the same payload, then one more
 * with a different payload, against pg-boss (`send` with `singletonKey`,
 * queue policy `short`), graphile-worker (`addJob` with `jobKey`), or
 * onejob's store (`createJob`). Prints what the callers got back: how many
 * received the job's id, how many got nothing, rows created, and what the
 * different payload did.
 */
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { argMap, BENCH_DIR, emitResult } from '../lib/child.ts';
import { summarize } from '../lib/stats.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { GraphileLike, PgBossLike } from './enqueue-load.ts';

const args = argMap(process.argv.slice(2));
const kind = args.kind ?? 'store';
const url = args.url!;
const n = Number(args.n ?? 1000);
const key = `storm-${process.pid}-${Date.now().toString(36)}`;
const scratchRequire = createRequire(resolve(BENCH_DIR, '.scratch', 'package.json'));
const payload = { messages: [{ role: 'user', content: 'storm' }] };
const other = { messages: [{ role: 'user', content: 'a different request' }] };

type Answer = { id: string | null; payload?: unknown; error?: string };
let send: (p: object) => Promise<Answer>;
let countRows: () => Promise<number>;
let close: () => Promise<void>;
const admin = new pg.Pool({ connectionString: url, max: 1 });

if (kind === 'pgboss') {
  const { default: PgBoss } = (await import(scratchRequire.resolve('pg-boss'))) as { default: new (o: object) => PgBossLike };
  const boss = new PgBoss({ connectionString: url, max: 10, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue('storm', { name: 'storm', policy: 'short' }).catch(() => {});
  send = async (p) => ({ id: await boss.send('storm', p, { singletonKey: key }) });
  countRows = async () => Number((await admin.query(`SELECT count(*) AS n FROM pgboss.job WHERE name = 'storm' AND singleton_key = $1`, [key])).rows[0].n);
  close = () => boss.stop({ graceful: false, wait: true });
} else if (kind === 'graphile') {
  const gw = (await import(scratchRequire.resolve('graphile-worker'))) as GraphileLike;
  const utils = await gw.makeWorkerUtils({ connectionString: url, maxPoolSize: 10 } as object);
  await utils.migrate();
  send = async (p) => {
    const job = await utils.addJob('storm', p, { jobKey: key });
    return { id: String(job.id), payload: job.payload };
  };
  countRows = async () => Number((await admin.query(`SELECT count(*) AS n FROM graphile_worker._private_jobs WHERE key = $1`, [key])).rows[0].n);
  close = () => utils.release();
} else {
  const store = await openStore(url);
  await store.migrate();
  send = async (p) => {
    try {
      const r = await store.createJob({ ownerId: 'bench', idempotencyKey: key, route: 'summarize', input: p, providers: ['primary'] });
      return { id: r.job.id, payload: r.job.input };
    } catch (e) {
      return { id: null, error: (e as { code?: string }).code ?? String(e) };
    }
  };
  countRows = async () => Number((await admin.query(`SELECT count(*) AS n FROM jobs WHERE owner_id = 'bench' AND idempotency_key = $1`, [key])).rows[0].n);
  close = () => store.close();
}

const lat: number[] = [];
const answers: Answer[] = [];
const t0 = performance.now();
await Promise.all(
  Array.from({ length: n }, async () => {
    const s = performance.now();
    try {
      answers.push(await send(payload));
    } catch (e) {
      answers.push({ id: null, error: String(e).slice(0, 120) });
    }
    lat.push(performance.now() - s);
  }),
);
const seconds = (performance.now() - t0) / 1000;
const withId = answers.filter((a) => a.id !== null);
let differentPayload: Answer;
try {
  differentPayload = await send(other);
} catch (e) {
  differentPayload = { id: null, error: String(e).slice(0, 120) };
}
const replaced = differentPayload.payload !== undefined && JSON.stringify(differentPayload.payload) === JSON.stringify(other);
const rows = await countRows();
await close();
await admin.end();
emitResult({
  kind,
  n,
  rows,
  callersWithId: withId.length,
  callersWithNothing: n - withId.length,
  distinctIds: new Set(withId.map((a) => a.id)).size,
  differentPayload: { gotId: differentPayload.id !== null, error: differentPayload.error ?? null, payloadReplaced: replaced },
  ...summarize(lat, seconds),
});
