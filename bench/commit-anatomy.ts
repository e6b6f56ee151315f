/**
 * `node --import tsx bench/commit-anatomy.ts [--n 200]`: why is each of the
 * fast path's two commits (the leased create, the winning settle) 2.5× a bare
 * one-row INSERT's? (docs/performance.md §10, issue 26.)
 *
 * One connection, one statement at a time, through the store (its own
 * statements, as the gateway sends them), interleaved in blocks of 20 with
 * a bare autocommit `INSERT` of one row into a table with a text primary key:
 *
 * - the round trip of each (client-side, `pg.Client#query` timed), with
 *   `synchronous_commit` on (the product) and off (the session's setting:
 *   what the WAL flush wait is), and the settle with the `jobs.state` NOTIFY
 *   trigger enabled and disabled;
 * - `EXPLAIN (ANALYZE, BUFFERS, WAL)` of one create and one settle (replayed
 *   with fresh ids inside `BEGIN … ROLLBACK`): execution time without the
 *   commit, the trigger's time, buffers and WAL records/bytes, beside the
 *   bare INSERT's.
 *
 * Prints medians (ms) and the plans. Nothing here changes the product.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { openStore } from '../src/store/open-store.ts';
import { argMap } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { median } from './lib/stats.ts';

const args = argMap(process.argv.slice(2));
const N = Number(args.n ?? 200);
const DB = 'onejob_bench_commit_anatomy';

type Captured = { name: string; text: string; values: unknown[] };
const last = new Map<string, Captured>();
const times = new Map<string, number[]>();
let tag = '';
const origQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown }).query = function (this: unknown, ...a: unknown[]) {
  const q = a[0] as { name?: string; text?: string; values?: unknown[] } | string;
  const name = typeof q === 'object' && q?.name ? q.name : null;
  const s = performance.now();
  const done = (): void => {
    if (name && tag) (times.get(`${tag} ${name}`) ?? times.set(`${tag} ${name}`, []).get(`${tag} ${name}`)!).push(performance.now() - s);
  };
  // pg.Pool#query hands the client a callback; a direct call gets a promise.
  const cbAt = a.findIndex((x) => typeof x === 'function');
  if (cbAt >= 0) {
    const cb = a[cbAt] as (...x: unknown[]) => unknown;
    a[cbAt] = (...x: unknown[]) => (done(), cb(...x));
  }
  const r = origQuery.apply(this, a);
  if (name && typeof q === 'object') {
    last.set(name, { name, text: q.text ?? '', values: q.values ?? (a[1] as unknown[]) ?? [] });
    if (cbAt < 0 && r && typeof (r as Promise<unknown>).then === 'function') void (r as Promise<unknown>).then(done, () => undefined);
  }
  return r;
} as never;

const url = await recreateDatabase(DB);
const store = await openStore(url, { poolSize: 1 });
await store.migrate();
const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query('CREATE TABLE bare (id text PRIMARY KEY, v text)');
const bareOn = new pg.Client({ connectionString: url });
const bareOff = new pg.Client({ connectionString: url, options: '-c synchronous_commit=off' });
await bareOn.connect();
await bareOff.connect();
const storeOff = await openStore(`${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c synchronous_commit=off')}`, { poolSize: 1 });

let k = 0;
const input = { messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] };
async function pair(s: typeof store): Promise<{ jobId: string; attemptId: string; leaseToken: string }> {
  const { claimed } = await s.createJob({ ownerId: 'bench', idempotencyKey: `k${k++}-${randomUUID()}`, route: 'summarize', input, providers: ['primary'], firstAttempt: { leaseOwner: 'exe_bench', leaseMs: 30_000 } });
  const a = claimed!.attempt;
  const r = await s.settleAttempt({
    ownerId: 'bench', attemptId: a.id, jobId: a.jobId, fence: { leaseOwner: 'exe_bench', leaseToken: a.leaseToken! },
    outcome: { state: 'succeeded', result: { content: 'ok' }, usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15 }, costMicros: 3 },
  });
  if (!r.won) throw new Error('settle lost');
  return { jobId: a.jobId, attemptId: a.id, leaseToken: a.leaseToken! };
}
async function bare(c: pg.Client, label: string): Promise<void> {
  const s = performance.now();
  await c.query({ name: 'bare_insert', text: 'INSERT INTO bare (id, v) VALUES ($1, $2)', values: [randomUUID(), 'x'] });
  (times.get(label) ?? times.set(label, []).get(label)!).push(performance.now() - s);
}

// Warm-up (plans cached, connections open).
for (let i = 0; i < 30; i++) {
  await pair(store);
  await pair(storeOff);
  await bare(bareOn, 'warm');
  await bare(bareOff, 'warm');
}
const trigger = async (on: boolean): Promise<void> => void (await admin.query(`ALTER TABLE jobs ${on ? 'ENABLE' : 'DISABLE'} TRIGGER jobs_state_notify`));
for (let block = 0; block < N / 20; block++) {
  for (const step of block % 2 === 0 ? ['on', 'off', 'notrigger'] : ['notrigger', 'off', 'on']) {
    if (step === 'notrigger') await trigger(false);
    for (let i = 0; i < 20; i++) {
      tag = '';
      await bare(step === 'off' ? bareOff : bareOn, `${step === 'off' ? 'sync off' : step === 'on' ? 'sync on' : 'no trigger'} bare_insert`);
      tag = step === 'off' ? 'sync off' : step === 'on' ? 'sync on' : 'no trigger';
      await pair(step === 'off' ? storeOff : store);
      tag = '';
    }
    if (step === 'notrigger') await trigger(true);
  }
}
console.log(`\nround trips, one connection, ${N} each, interleaved in blocks of 20 (medians, ms):`);
for (const [key, xs] of [...times].filter(([k2]) => k2 !== 'warm').sort()) console.log(`  ${key.padEnd(46)} ${median(xs).toFixed(3)}  (n ${xs.length})`);

// EXPLAIN (ANALYZE, BUFFERS, WAL) of one create and one settle, replayed with fresh ids in BEGIN … ROLLBACK.
// Each plan is run 3 times and the last shown: the first call of a session compiles the PL/pgSQL trigger
// function and prepares the foreign key's check, which the product's pooled connections have long done.
const explain = async (label: string, text: string, values: unknown[]): Promise<void> => {
  let rows: string[] = [];
  for (let i = 0; i < 3; i++) {
    await admin.query('BEGIN');
    try {
      const r = await admin.query(`EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF) ${text}`, values);
      rows = r.rows.map((x: Record<string, string>) => `  ${x['QUERY PLAN']}`);
    } finally {
      await admin.query('ROLLBACK');
    }
  }
  console.log(`\n${label} (third run):\n${rows.join('\n')}`);
};
const sub = (values: unknown[], map: Map<string, string>): unknown[] => values.map((v) => (typeof v === 'string' && map.has(v) ? map.get(v) : Array.isArray(v) ? v.map((x) => (typeof x === 'string' && map.has(x) ? map.get(x) : x)) : v));
tag = '';
const x = await pair(store);
const createQ = [...last.values()].find((c) => c.name.startsWith('onejob_job_insert'))!;
const settleQ = [...last.values()].find((c) => c.name.startsWith('onejob_attempt_settle_won'))!;
// A committed, unsettled job for the settle's plan.
const { claimed } = await store.createJob({ ownerId: 'bench', idempotencyKey: `explain-${randomUUID()}`, route: 'summarize', input, providers: ['primary'], firstAttempt: { leaseOwner: 'exe_bench', leaseMs: 30_000 } });
const y = claimed!.attempt;
await explain(`create (${createQ.name}, fresh ids)`, createQ.text, createQ.values.map((v) => (typeof v === 'string' && (v === x.jobId || v === x.attemptId || v === x.leaseToken || v.startsWith('k')) ? `${v}-explain` : Array.isArray(v) ? v.map((e) => (typeof e === 'string' && (e === x.jobId || e === x.attemptId || e === x.leaseToken || e.startsWith('k')) ? `${e}-explain` : e)) : v)));
await explain(`settle (${settleQ.name}, a committed leased job)`, settleQ.text, sub(settleQ.values, new Map([[x.jobId, y.jobId], [x.attemptId, y.id], [x.leaseToken, y.leaseToken!]])));
await explain('bare INSERT of one row', 'INSERT INTO bare (id, v) VALUES ($1, $2)', [randomUUID(), 'x']);

// Plan caching of the named statements: PostgreSQL plans a prepared statement afresh (a custom plan) for its first
// 5 executions, then keeps the generic plan only if its estimated cost is not much above the custom plans'.
{
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  for (const q of [createQ, settleQ]) {
    for (let i = 0; i < 20; i++) {
      const { claimed: cl } = await store.createJob({ ownerId: 'bench', idempotencyKey: `plan-${randomUUID()}`, route: 'summarize', input, providers: ['primary'], firstAttempt: { leaseOwner: 'exe_bench', leaseMs: 30_000 } });
      const z = cl!.attempt;
      const fresh = (v: string): string => `${v}-p${i}`;
      const values = q === settleQ
        ? sub(q.values, new Map([[x.jobId, z.jobId], [x.attemptId, z.id], [x.leaseToken, z.leaseToken!]]))
        : q.values.map((v) => (typeof v === 'string' && (v === x.jobId || v === x.attemptId || v === x.leaseToken || v.startsWith('k')) ? fresh(v) : Array.isArray(v) ? v.map((e) => (typeof e === 'string' && (e === x.jobId || e === x.attemptId || e === x.leaseToken || e.startsWith('k')) ? fresh(e) : e)) : v));
      await c.query('BEGIN');
      await c.query({ name: q.name, text: q.text, values });
      await c.query('ROLLBACK');
    }
  }
  const r = await c.query('SELECT name, generic_plans, custom_plans FROM pg_prepared_statements');
  console.log('\nplan cache after 20 executions of each on one session:', JSON.stringify(r.rows));
  await c.end();
}

await bareOn.end();
await bareOff.end();
await admin.end();
await store.close();
await storeOff.close();
await dropDatabase(DB);
process.exit(0);
