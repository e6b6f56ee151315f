/**
 * `node --import tsx bench/settle-batching.ts [--rounds 3] [--n 3000]`: does
 * the group commit of the fast path's settles pay on PostgreSQL? 32 workers
 * each create a job with its first attempt leased (one statement) and settle
 * it (one statement), as the gateway's fast path does, against the store with
 * settles batched (the default) and not (`batchSettles: false`), interleaved
 * rounds on fresh databases. Prints create+settle pairs per second per round.
 */
import { JobStore } from '../src/store/job-store.ts';
import { createPostgresDriver } from '../src/store/postgres/postgres-driver.ts';
import { argMap } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';

const args = argMap(process.argv.slice(2));
const ROUNDS = Number(args.rounds ?? 3);
const N = Number(args.n ?? 3000);
const WORKERS = 32;

async function once(batchSettles: boolean): Promise<number> {
  const url = await recreateDatabase('onejob_bench_settle_batching');
  const store = new JobStore(await createPostgresDriver({ connectionString: url, max: 10, batchSettles }));
  await store.migrate();
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: WORKERS }, async () => {
    while (next < N) {
      const i = next++;
      const { claimed } = await store.createJob({
        ownerId: 'bench', idempotencyKey: `k${i}`, route: 'summarize', input: { messages: [{ role: 'user', content: 'hi' }] }, providers: ['primary'],
        firstAttempt: { leaseOwner: 'exe_bench', leaseMs: 30_000 },
      });
      const a = claimed!.attempt;
      const r = await store.settleAttempt({
        ownerId: 'bench', attemptId: a.id, jobId: a.jobId, fence: { leaseOwner: 'exe_bench', leaseToken: a.leaseToken! },
        outcome: { state: 'succeeded', result: { content: 'ok' }, usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15 }, costMicros: 3 },
      });
      if (!r.won) throw new Error('a fast-path settle lost');
    }
  }));
  const perSecond = (N / (performance.now() - started)) * 1000;
  await store.close();
  await dropDatabase('onejob_bench_settle_batching');
  return perSecond;
}

const rows: { round: number; batched: number; single: number }[] = [];
await once(true); // warm-up
for (let round = 1; round <= ROUNDS; round++) {
  const batched = await once(true);
  const single = await once(false);
  rows.push({ round, batched: Math.round(batched), single: Math.round(single) });
  console.log(`round ${round}: settles batched ${Math.round(batched)}/s, one statement each ${Math.round(single)}/s (${(batched / single).toFixed(2)}×)`);
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`median: batched ${med(rows.map((r) => r.batched))}/s, single ${med(rows.map((r) => r.single))}/s`);
