/**
 * `node --import tsx chaos/scale.ts [--apis 1,2,1] [--seconds 20] [--clients 32] [--executors 2]`:
 * creates/s through HAProxy with 1 vs 2 API processes (`onejob serve
 * --no-executor`) on one PostgreSQL database, the chaos rig's cluster without
 * faults (chaos/cluster.ts). Each phase starts a fresh cluster, warms up for
 * 3 s, then `--clients` concurrent clients send `POST /v1/jobs` with fresh
 * keys (route `plain`; the fakes answer at once) for `--seconds`. Prints one
 * line per phase: creates/s (answered 201), other statuses, latency p50/p99,
 * jobs succeeded by the end, and the machine's load average.
 *
 * Uses the same database server as `npm run chaos` (ONEJOB_CHAOS_ADMIN_URL, …);
 * measure on a quiet machine: the load generator, PostgreSQL and every onejob
 * process share its cores.
 */
import { mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Agent, request } from 'undici';
import { startCluster } from './cluster.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Phase {
  readonly apis: number;
  readonly creates: number;
  readonly seconds: number;
  readonly statuses: Record<string, number>;
  readonly p50: number;
  readonly p99: number;
  readonly succeeded: number;
  readonly load: string;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function phase(apis: number, o: { seconds: number; clients: number; executors: number; dir: string }): Promise<Phase> {
  const dir = join(o.dir, `apis-${apis}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const log = (line: string): void => void process.stderr.write(`[scale] ${line}\n`);
  const cluster = await startCluster({ dir, apis, executors: o.executors, leaseMs: 2000, hardDeadline: Date.now() + 10 * 60_000, log, combinedApis: 0 });
  const agent = new Agent({ connections: o.clients * 2, keepAliveTimeout: 10_000 });
  try {
    let seq = 0;
    const run = async (untilMs: number, record: boolean, latencies: number[], statuses: Record<string, number>): Promise<void> => {
      await Promise.all(Array.from({ length: o.clients }, async (_, i) => {
        const token = ['tok_alice', 'tok_bob', 'tok_carol'][i % 3]!;
        while (Date.now() < untilMs) {
          const key = `scale-${apis}-${i}-${++seq}`;
          const t = performance.now();
          let status = 'network';
          try {
            const res = await request(`${cluster.url}/v1/jobs`, {
              method: 'POST', dispatcher: agent, signal: AbortSignal.timeout(10_000),
              headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' },
              body: JSON.stringify({ route: 'plain', input: { messages: [{ role: 'user', content: `scale ${key}` }] } }),
            });
            await res.body.dump();
            status = String(res.statusCode);
          } catch {
            // counted as network
          }
          if (!record) continue;
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status === '201') latencies.push(performance.now() - t);
        }
      }));
    };
    await run(Date.now() + 3000, false, [], {});
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    const started = performance.now();
    await run(Date.now() + o.seconds * 1000, true, latencies, statuses);
    const seconds = (performance.now() - started) / 1000;
    const load = loadavg().map((x) => x.toFixed(1)).join(' ');
    await new Promise((r) => setTimeout(r, 3000));
    const c = new pg.Client({ connectionString: cluster.database.url });
    await c.connect();
    const { rows } = await c.query<{ n: string }>(`SELECT count(*) AS n FROM jobs WHERE state = 'succeeded'`);
    await c.end();
    latencies.sort((a, b) => a - b);
    return { apis, creates: latencies.length, seconds, statuses, p50: percentile(latencies, 50), p99: percentile(latencies, 99), succeeded: Number(rows[0]!.n), load };
  } finally {
    await agent.close();
    await cluster.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { apis: { type: 'string' }, seconds: { type: 'string' }, clients: { type: 'string' }, executors: { type: 'string' } } });
  const plan = (values.apis ?? '1,2,1').split(',').map(Number);
  const o = { seconds: Number(values.seconds ?? 20), clients: Number(values.clients ?? 32), executors: Number(values.executors ?? 2), dir: join(ROOT, 'tmp', 'scale') };
  for (const apis of plan) {
    const r = await phase(apis, o);
    process.stdout.write(`apis=${r.apis} clients=${o.clients} executors=${o.executors}: ${(r.creates / r.seconds).toFixed(0)} creates/s over ${r.seconds.toFixed(1)} s (statuses ${JSON.stringify(r.statuses)}), 201 latency p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms, ${r.succeeded} jobs succeeded, load ${r.load}\n`);
  }
}

main().then(() => process.exit(0), (e: unknown) => {
  process.stderr.write(`scale: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(2);
});
