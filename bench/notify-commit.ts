/**
 * `node --import tsx bench/notify-commit.ts [--seconds 10] [--rounds 4] [--connections 128]`
 * (also `npm run bench -- --only notify`): does the `jobs.state` NOTIFY
 * trigger (migration 0008) cost creates and settles when many processes
 * share one PostgreSQL? PostgreSQL takes one cluster-wide lock at the commit
 * of every transaction that queued a notification, so notifying commits
 * serialise (issue 26).
 *
 * The cluster: two API processes (`bench/workers/onejob-server.ts` without an
 * executor: `onejob serve --no-executor`) and two executor processes (the same
 * worker with `--executor`, sent no HTTP), one database, the fake provider in
 * its own process answering at once. Every process LISTENs (JobWatch and the
 * executors subscribe to `onejob_job`). `--connections` clients (autocannon,
 * half on each API process, each in its own process) send `POST /v1/jobs`
 * with fresh keys; the executors claim (a notifying commit: queued →
 * running) and settle (another) every job.
 *
 * Sides, interleaved and rotated per round, each on a fresh database: the
 * trigger as shipped, and the trigger disabled (`ALTER TABLE jobs DISABLE
 * TRIGGER jobs_state_notify`; what waiters in other processes lose then is
 * the point of the measurement, not of the product). Reports per side and
 * round: creates/s (2xx), settles/s (jobs reaching `succeeded` in the
 * window), `xact_commit`/s, and the CPU of the database backends and of the
 * four onejob processes per settled job.
 */
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { runAutocannon } from './lib/autocannon.ts';
import { BENCH_DIR, argMap, startServer, type Started } from './lib/child.ts';
import { cpuMeter } from './lib/cpu.ts';
import { adminQuery, dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { median, round } from './lib/stats.ts';

const W = (name: string): string => resolve(BENCH_DIR, 'workers', name);
const BODY = JSON.stringify({ route: 'summarize', input: { messages: [{ role: 'user', content: 'Summarize: the quick brown fox.' }] } });
const DB = 'onejob_bench_notify';

/** The sides measured: the trigger as migrated, and disabled. */
export const NOTIFY_SIDES = ['trigger', 'no_trigger'] as const;
export type NotifySide = (typeof NOTIFY_SIDES)[number];

export interface NotifyRun {
  readonly side: NotifySide;
  readonly round: number;
  readonly createsPerSecond: number;
  readonly settlesPerSecond: number;
  readonly commitsPerSecond: number;
  readonly databaseCpuMsPerSettle: number | null;
  /** The four onejob processes' CPU per settled job (they handle every notification: each drops its own). */
  readonly processCpuMsPerSettle: number | null;
  readonly createP99Ms: number;
  readonly loadAverage1m: number;
}

async function count(url: string, state: string): Promise<number> {
  return Number((await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM jobs WHERE state = '${state}'`, url))[0]?.n ?? 0);
}

async function commits(): Promise<number> {
  return Number((await adminQuery<{ n: string }>(`SELECT xact_commit AS n FROM pg_stat_database WHERE datname = '${DB}'`))[0]?.n ?? 0);
}

/** One side of one round on a fresh database and a fresh cluster of processes. */
export async function notifyRun(side: NotifySide, roundNo: number, o: { seconds: number; connections: number; providerUrl: string }): Promise<NotifyRun> {
  const url = await recreateDatabase(DB);
  const procs: Started<{ url: string }>[] = [];
  try {
    const common = ['--db', url, '--provider-url', o.providerUrl, '--pool', '10'];
    // The first process migrates; the others start once the schema is there.
    procs.push(await startServer(W('onejob-server.ts'), common));
    if (side === 'no_trigger') await adminQuery('ALTER TABLE jobs DISABLE TRIGGER jobs_state_notify', url);
    procs.push(...(await Promise.all([
      startServer<{ url: string }>(W('onejob-server.ts'), common),
      startServer<{ url: string }>(W('onejob-server.ts'), [...common, '--executor']),
      startServer<{ url: string }>(W('onejob-server.ts'), [...common, '--executor']),
    ])));
    const apis = procs.slice(0, 2);
    const load = (seconds: number, tag: string) => Promise.all(apis.map((p, i) => runAutocannon({
      url: `${p.info.url}/v1/jobs`, connections: o.connections / 2, seconds, method: 'POST',
      headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json', 'idempotency-key': `n-${tag}-${i}-[<id>]` }, body: BODY, idReplacement: true,
    })));
    await load(2, 'warm');
    const settledBefore = await count(url, 'succeeded');
    const commitsBefore = await commits();
    const meter = await cpuMeter(procs.map((p) => p.child.pid!), DB);
    const started = performance.now();
    const runs = await load(o.seconds, 'run');
    const seconds = (performance.now() - started) / 1000;
    const use = await meter.stop();
    const settled = (await count(url, 'succeeded')) - settledBefore;
    const commitsAfter = await commits();
    return {
      side, round: roundNo,
      createsPerSecond: round(runs.reduce((a, r) => a + r.rps, 0), 1),
      settlesPerSecond: round(settled / seconds, 1),
      commitsPerSecond: round((commitsAfter - commitsBefore) / seconds, 1),
      databaseCpuMsPerSettle: settled > 0 ? round(use.databaseMs / settled, 4) : null,
      processCpuMsPerSettle: settled > 0 ? round(use.processMs / settled, 4) : null,
      createP99Ms: Math.max(...runs.map((r) => r.p99)),
      loadAverage1m: round(loadavg()[0]!, 2),
    };
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await dropDatabase(DB);
  }
}

/** Every round, both sides rotated; the medians and the per-round ratios no-trigger ÷ trigger. */
export async function notifySeries(o: { seconds: number; rounds: number; connections: number; log?: (s: string) => void }): Promise<Record<string, unknown>> {
  const fake = await startServer<{ url: string }>(W('fake-provider.ts'), ['--forget']);
  const runs: NotifyRun[] = [];
  try {
    for (let r = 0; r < o.rounds; r++) {
      for (const side of r % 2 === 0 ? NOTIFY_SIDES : [...NOTIFY_SIDES].reverse()) {
        const run = await notifyRun(side, r, { ...o, providerUrl: fake.info.url });
        runs.push(run);
        (o.log ?? console.log)(`round ${r + 1} ${side.padEnd(10)} creates ${run.createsPerSecond}/s, settles ${run.settlesPerSecond}/s, commits ${run.commitsPerSecond}/s, db CPU ${run.databaseCpuMsPerSettle} ms/settle, onejob processes ${run.processCpuMsPerSettle} ms/settle, create p99 ${run.createP99Ms} ms (load ${run.loadAverage1m})`);
      }
    }
  } finally {
    await fake.stop();
  }
  const of = (side: NotifySide, k: keyof NotifyRun): number => median(runs.filter((x) => x.side === side).map((x) => x[k] as number));
  const perRound = (k: keyof NotifyRun): number[] => Array.from({ length: o.rounds }, (_, r) => {
    const a = runs.find((x) => x.round === r && x.side === 'trigger')?.[k] as number;
    const b = runs.find((x) => x.round === r && x.side === 'no_trigger')?.[k] as number;
    return round(b / a, 3);
  });
  const summary = {
    connections: o.connections, seconds: o.seconds, rounds: o.rounds,
    medians: Object.fromEntries(NOTIFY_SIDES.map((s) => [s, { createsPerSecond: of(s, 'createsPerSecond'), settlesPerSecond: of(s, 'settlesPerSecond'), commitsPerSecond: of(s, 'commitsPerSecond'), databaseCpuMsPerSettle: of(s, 'databaseCpuMsPerSettle') }])),
    noTriggerOverTrigger: { creates: perRound('createsPerSecond'), settles: perRound('settlesPerSecond'), databaseCpuPerSettle: perRound('databaseCpuMsPerSettle'), processCpuPerSettle: perRound('processCpuMsPerSettle') },
    runs,
  };
  (o.log ?? console.log)(`medians: ${JSON.stringify(summary.medians)}; no trigger ÷ trigger per round: ${JSON.stringify(summary.noTriggerOverTrigger)}`);
  return summary;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = argMap(process.argv.slice(2));
  await notifySeries({ seconds: Number(args.seconds ?? 10), rounds: Number(args.rounds ?? 4), connections: Number(args.connections ?? 128) });
  process.exit(0);
}
