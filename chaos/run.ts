/**
 * `npm run chaos -- [--minutes N | --ci] [options]`: starts the cluster,
 * runs the workload under faults, fuzzes the API, checks everything, stops
 * everything. The last line of stdout is `operations: N, faults: M,
 * violations: V`; the exit code is 1 on any violation (2 on a setup error).
 *
 * Options:
 *   --minutes N        workload duration (fractions allowed; default 2)
 *   --ci               the short CI mode: 1 minute of workload, a short fuzz, no PostgreSQL restart
 *                      (the database outage still happens: see --db-outage-s)
 *   --clients N        concurrent clients (default 12)
 *   --seed N           random seed (default: from the clock; printed)
 *   --pg-restart / --no-pg-restart   restart PostgreSQL during the run (default: on, except --ci)
 *   --fuzz-rounds N    fuzz rounds (default 3; 0 skips the fuzzer)
 *   --db-outage-s N    one database outage of N s for onejob's processes (chaos/database-outage.ts):
 *                      15 s into the workload with --ci, a third of the way otherwise; default 60, 0 for none
 *   --keep             keep the database (the run directory is always kept)
 *   --ha               run against a Patroni cluster of its own (chaos/patroni-cluster.ts) instead of
 *                      the shared server, with leader faults (chaos/ha-faults.ts) and failover times;
 *                      with --ci: 2.5 minutes, one fault of each kind, one fuzz round
 *   --dir PATH         the run directory (default tmp/chaos/<time>-<seed>)
 *   --tool-agents N    agent-like clients calling the counting tool server through /mcp (chaos/tool-agents.ts; default 3, 0: none)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkRun, formatReport, type CheckReport, type Violation } from './checker.ts';
import { PROVIDER_TIMEOUT_MS, ROUTES, sleep, startCluster, type Cluster } from './cluster.ts';
import { DOUBT_LOOKUPS, DOUBT_WINDOW_MS, DoubtDirector, fakeSubmits, waitForDoubt } from './doubt-cluster.ts';
import { DoubtFaults } from './doubt-faults.ts';
import { runDoubtWorkload } from './doubt-workload.ts';
import { FakeDirector } from './fake-director.ts';
import { FaultScheduler } from './faults.ts';
import { failoverTimes, formatFailoverTimes, HaFaultLoop } from './ha-faults.ts';
import { startPatroniCluster, type PatroniCluster } from './patroni-cluster.ts';
import { runFuzz, type FuzzReport } from './fuzz.ts';
import { readDatabase, readDatabaseNow, saveSnapshots } from './snapshot.ts';
import { runWorkload } from './workload.ts';
import { runToolAgents } from './tool-agents.ts';
import { checkToolCalls, loadToolRun } from './tool-checker.ts';
import { TOOL_CALLS_FILE } from './tool-records.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** A small seeded PRNG (mulberry32), so a seed replays the same choices. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string' }, ci: { type: 'boolean' }, clients: { type: 'string' }, seed: { type: 'string' },
      'pg-restart': { type: 'boolean' }, 'no-pg-restart': { type: 'boolean' }, 'fuzz-rounds': { type: 'string' },
      keep: { type: 'boolean' }, dir: { type: 'string' }, ha: { type: 'boolean' }, 'tool-agents': { type: 'string' }, 'db-outage-s': { type: 'string' },
    },
    strict: true,
  });
  const ci = values.ci === true;
  const haMode = values.ha === true;
  const minutes = values.minutes !== undefined ? Number(values.minutes) : ci ? (haMode ? 2.5 : 1) : haMode ? 4 : 2;
  if (!Number.isFinite(minutes) || minutes <= 0 || minutes > 24 * 60) throw new Error('--minutes must be a positive number');
  const clients = values.clients !== undefined ? Number(values.clients) : 12;
  const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 1_000_000;
  // --ha: the shared server is never restarted; the HA faults take its place.
  const pgRestart = haMode ? false : values['no-pg-restart'] === true ? false : values['pg-restart'] === true ? true : !ci;
  const fuzzRounds = values['fuzz-rounds'] !== undefined ? Number(values['fuzz-rounds']) : haMode && ci ? 1 : 3;
  const durationMs = Math.round(minutes * 60_000);
  const outageMs = Math.round(Number(values['db-outage-s'] ?? 60) * 1000);
  if (!Number.isFinite(outageMs) || outageMs < 0) throw new Error('--db-outage-s must be a number of seconds, 0 for none');
  const dir = values.dir ?? join(ROOT, 'tmp', 'chaos', `${new Date().toISOString().replace(/[:.]/g, '-')}-${seed}`);
  mkdirSync(dir, { recursive: true });

  const t0 = performance.now();
  const clock = (): number => performance.now() - t0;
  const log = (line: string): void => {
    process.stderr.write(`[chaos ${(clock() / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  };
  const random = seededRandom(seed);
  log(`seed ${seed}, ${minutes} min of workload, ${clients} clients, ${haMode ? 'Patroni cluster (--ha)' : `PostgreSQL restarts ${pgRestart ? 'on' : 'off'}`}, database outage ${outageMs / 1000} s, fuzz rounds ${fuzzRounds}; records in ${dir}`);
  writeFileSync(join(dir, 'faults.jsonl'), '');
  writeFileSync(join(dir, 'history.jsonl'), '');

  const leaseMs = 2000;
  let cluster: Cluster | null = null;
  let ha: PatroniCluster | null = null;
  let interrupted = false;
  const onSignal = (sig: string): void => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${sig}: stopping the cluster`);
    void (cluster?.stop(values.keep === true) ?? Promise.resolve())
      .finally(() => ha?.stop())
      .finally(() => process.exit(130));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  // The watchdog kills everything if this process outlives its budget by far.
  const hardDeadline = Date.now() + durationMs + 10 * 60_000;
  if (haMode) ha = await startPatroniCluster({ runDir: dir, hardDeadline, log });
  try {
    cluster = await startCluster({ dir, apis: 2, executors: 2, leaseMs, hardDeadline, log, databaseAdminUrl: ha?.url });
  } catch (e) {
    await ha?.stop();
    throw e;
  }
  const c = cluster;
  try {
    const director = new FakeDirector(c.fakes, random);
    await director.topUp();
    // Doubt (CONTRACT §11): the lookup providers' fake, its faults and clients (chaos/doubt-*.ts), on a PRNG of their own.
    const doubtRandom = seededRandom(seed ^ 0x5eed);
    const doubtDirector = new DoubtDirector(c.doubt, doubtRandom, (p) => c.restart(p));
    await doubtDirector.topUp();
    let topping = true;
    const topUpLoop = (async () => {
      while (topping) {
        await director.topUp().catch((e: unknown) => log(`top-up failed: ${String(e)}`));
        await doubtDirector.topUp().catch((e: unknown) => log(`doubt top-up failed: ${String(e)}`));
        await sleep(1000);
      }
    })();

    const faults = new FaultScheduler({
      cluster: c, director, random, clock, file: join(dir, 'faults.jsonl'),
      everyMs: ci ? 2500 : 3500, leaseMs, until: Date.now() + durationMs, postgresRestart: pgRestart, postgresEveryMs: Math.max(60_000, Math.min(200_000, durationMs / 3)), log,
      databaseOutage: outageMs === 0 ? undefined : { afterMs: ci ? 15_000 : Math.round(durationMs / 3), durationMs: outageMs },
    });
    const until = Date.now() + durationMs;
    const haFaults = ha === null ? null : new HaFaultLoop({ ha, clock, file: join(dir, 'faults.jsonl'), log, steadyMs: ci ? 6000 : 15_000, until, readyzUrl: c.apiUrls[0] });
    const doubtFaults = new DoubtFaults({ director: doubtDirector, random: doubtRandom, clock, file: join(dir, 'faults.jsonl'), everyMs: ci ? 4000 : 5000, killEveryMs: ci ? 20_000 : 40_000, log });
    log('workload and faults start');
    faults.start();
    doubtFaults.start();
    const doubtWork = runDoubtWorkload({ url: c.url, clients: 3, until, historyFile: join(dir, 'history.jsonl'), random: doubtRandom, clock, tag: `r${seed}-doubt` });
    haFaults?.start();
    const progress = setInterval(() => log(`… ${faults.records.length + (haFaults?.records.length ?? 0)} faults so far`), 30_000);
    const [operations, toolOperations] = await Promise.all([runWorkload({
      url: c.url, clients, until, historyFile: join(dir, 'history.jsonl'), random, clock,
      tag: `r${seed}`, apiUrls: c.apiUrls,
    }), runToolAgents({ url: c.url, agents: values['tool-agents'] !== undefined ? Number(values['tool-agents']) : 3, until, file: join(dir, TOOL_CALLS_FILE), random: seededRandom(seed + 1), clock, tag: `r${seed}t` })]);
    log(`tool agents: ${toolOperations} requests through /mcp`);
    const doubtOperations = await doubtWork;
    clearInterval(progress);
    log(`workload done: ${operations} operations (and ${doubtOperations} of the doubt clients); healing`);
    // Both at once: the doubt faults stop injecting while the others finish.
    await Promise.all([faults.stop(), doubtFaults.stop()]);
    await haFaults?.stop();
    topping = false;
    await topUpLoop;
    await director.heal();
    // Liveness: from now on every job must reach an end within its deadlines over the whole chain
    // (provider timeout, lease, the rescuer's 5 s interval, a poll), and no lease may be left to rot.
    const quietSince = await readDatabaseNow(c.database.url);
    const quietAt = Date.now();
    const liveness = { quietSince, boundMs: ROUTES.plain.providers.length * (PROVIDER_TIMEOUT_MS + leaseMs + 5_000) + 2_000, rescueSlackMs: 5_000 + leaseMs };
    // Let late answers and hedges settle (their outcome does not change what must hold).
    await sleep(PROVIDER_TIMEOUT_MS + 2000);

    let fuzz: FuzzReport | null = null;
    if (fuzzRounds > 0) {
      log('fuzzing the API processes');
      fuzz = await runFuzz({
        apiUrls: c.apiUrls, apis: c.apis, databaseUrl: c.database.url,
        requestsPerRound: ci ? 800 : 3000, rounds: fuzzRounds, seed, log,
      });
      writeFileSync(join(dir, 'fuzz.json'), JSON.stringify(fuzz, null, 2));
      log(`fuzz: ${fuzz.requests} requests, ${fuzz.rawCases} raw cases, statuses ${JSON.stringify(fuzz.statuses)}`);
    }

    // The liveness check bites only once its bound has passed since the faults stopped.
    await sleep(Math.max(0, liveness.boundMs - (Date.now() - quietAt)));
    // The doubt rule's window: the snapshot waits until askable doubt has ended, at most the window (chaos/doubt-cluster.ts).
    const doubtLeft = await waitForDoubt(c.database.url, quietAt + DOUBT_WINDOW_MS + 2000, log);
    log(`doubt after ${((Date.now() - quietAt) / 1000).toFixed(0)} s of quiet: ${doubtLeft.askableUnknown} askable attempts unknown, ${doubtLeft.openJobs} doubt-route jobs open`);
    log('reading provider logs and the database');
    const callsBefore = await director.calls();
    const db = await readDatabase(c.database.url);
    const callsAfter = await director.calls();
    const doubt = { lookups: DOUBT_LOOKUPS, windowMs: DOUBT_WINDOW_MS, submits: [...await doubtDirector.submits(), ...await fakeSubmits(c.fakes)] };
    const hedgedRoutes = Object.entries(ROUTES).filter(([, r]) => 'hedgeAfterMs' in r).map(([name]) => name);
    const contractRoutes = Object.entries(ROUTES).filter(([, r]) => 'contract' in r).map(([name]) => name);
    saveSnapshots(dir, { db, callsBefore, callsAfter, hedgedRoutes, contractRoutes, liveness, doubt });
    const history = (await import('./snapshot.ts')).loadRun(dir).history;
    const allFaults = [...faults.records, ...(haFaults?.records ?? []), ...doubtFaults.records];
    const checked = checkRun({ history, faults: allFaults, db, callsBefore, callsAfter, hedgedRoutes, contractRoutes, liveness, doubt });
    const tools = checkToolCalls(loadToolRun(dir, db));
    const report: CheckReport = { ...checked, operations: checked.operations + toolOperations, violations: [...checked.violations, ...tools.violations], notes: { ...checked.notes, ...tools.notes } };
    const failovers = haFaults === null ? [] : failoverTimes(history, haFaults.records);
    if (haFaults !== null) writeFileSync(join(dir, 'failovers.json'), JSON.stringify(failovers, null, 2));
    const merged: CheckReport = {
      operations: report.operations + (fuzz?.requests ?? 0) + (fuzz?.rawCases ?? 0),
      faults: report.faults,
      violations: [
        ...report.violations,
        ...(fuzz?.findings ?? []).map((f): Violation => ({ kind: `fuzz_${f.kind}`, jobId: null, message: f.message, excerpt: f.excerpt })),
      ],
      notes: {
        ...report.notes, workload_operations: report.operations, fuzz_requests: fuzz?.requests ?? 0, fuzz_raw_cases: fuzz?.rawCases ?? 0,
        doubt_workload_operations: doubtOperations,
        jobs: db.jobs.length, attempts: db.attempts.length, events: db.events.length, provider_calls: callsAfter.length,
        ...Object.fromEntries(Object.entries(countBy(allFaults.map((f) => f.kind))).map(([k, n]) => [`fault_${k}`, n])),
        ...(haFaults === null ? {} : {
          failovers: failovers.length,
          failover_max_recovered_ms: Math.max(0, ...failovers.map((f) => f.recoveredMs ?? Number.POSITIVE_INFINITY)),
        }),
      },
    };
    // The 30 s target is a target (bounded by Patroni's ttl), not a promise of onejob's: reported, not a violation.
    const slow = failovers.filter((f) => f.recoveredMs === null || f.recoveredMs > 30_000);
    if (haFaults !== null) (merged.notes as Record<string, number>).failovers_over_30s = slow.length;
    const text = [`seed ${seed}`, ...formatFailoverTimes(failovers), formatReport(merged)].join('\n');
    writeFileSync(join(dir, 'report.txt'), `${text}\n`);
    log(`done in ${(clock() / 1000).toFixed(0)} s; report in ${join(dir, 'report.txt')}`);
    process.stdout.write(`${text}\n`);
    return merged.violations.length === 0 ? 0 : 1;
  } finally {
    await c.stop(values.keep === true);
    await ha?.stop(values.keep === true);
  }
}

function countBy(xs: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`chaos: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
    process.exit(2);
  },
);
