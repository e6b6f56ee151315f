/**
 * `npm run bench` (quick, about 6 minutes before the durable peers and the floor probes, which add about 2: docs/performance.md) / `npm run bench -- --full`.
 *
 * Measures onejob side by side with its anchors in ONE run, interleaving the
 * sides of every comparison (A, B, A, B…) so the machine's drift hits both:
 *
 * 1. keyed creation: `POST /v1/jobs` over HTTP (autocannon, own process) and
 *    the store alone, against pgbench running the driver's own `jobInsert`
 *    statement at the same concurrency; SQLite over HTTP too;
 * 2. duplicate storm: 1,000 concurrent creates of one key vs of distinct keys;
 * 3. gateway overhead: `POST /v1/chat/completions` through onejob vs the fake
 *    provider directly vs the Portkey gateway;
 * 4. provider executions under a timeout (1 s primary, 200 ms timeout, a fallback);
 * 5. peers' keyed enqueue: pg-boss and graphile-worker vs the store vs raw `pg`;
 * 3s. streaming: time to first token at one connection (onejob on PostgreSQL
 *    and SQLite, Portkey, the fake provider direct), parity checked;
 * 3r. resumed streams and duplicates: time to first token on the executor's
 *    process and on another (bench/stream-resume.ts), parity checked;
 * 4 also prices every provider execution (usage from the fakes, onejob's
 *    `pricing`): spend on winners and on what did not win, per request;
 * W. "waiting is free": one onejob process holding 2,004 long-polls and 2,000
 *    chat requests on a slow provider (and a tenth of that): RSS, event-loop
 *    delay, statements per second, and who wakes when one job changes. In
 *    the full run and `--only waiting`, not in quick mode.
 *
 * 4r. the timeout scenario again with an `openai-responses` primary (doubt
 *    resolved by the reconciler's lookup, bench/timeout-responses.ts);
 *
 * N. NOTIFY at commit (`bench/notify-commit.ts`): two API processes and two
 *    executors at 128 connections, the `jobs.state` trigger on and off. Only
 *    with `--only notify`.
 * D. durable peers (`bench/durable-peers.ts`, issue 40): one keyed LLM call
 *    per intent, durable before and after it, through onejob, DBOS Transact,
 *    Restate and pg-boss: req/s at 32 connections, added p50 at one, CPU per
 *    request, a duplicate check. Every mode, and `--only durable-peers`.
 * F. the floor (issue 40), in the chat series: pgbench's one-row commit at
 *    one client and the SQLite job insert's (synchronous=FULL); onejob's
 *    added p50 minus two of them ÷ Portkey's added p50.
 * The chat series (3) runs three rounds in every mode and reports the CPU per
 * request of each side (`bench/lib/cpu.ts`) and each ratio's spread across
 * rounds (`bench/lib/chat-spread.ts`).
 *
 * `--only create,storm,chat,stream,timeout,waiting,doubt,notify,durable-peers` runs only those sections
 * and writes bench/results/<date>-only-<sections>.{json,md} (never latest.*).
 *
 * After every onejob series a parity check runs (`bench/lib/parity.ts`): job
 * rows = requests answered 2xx (plus at most the requests a timed run cut off
 * in flight), provider calls = jobs. The bench exits 1 when one fails.
 *
 * Writes bench/results/<date>.json, latest.json, latest.md and latest.svg.
 * The peers are installed into bench/.scratch (git-ignored), never into the
 * product's package.json.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, totalmem, platform, release } from 'node:os';
import { resolve } from 'node:path';
import { runAutocannon } from './lib/autocannon.ts';
import { BENCH_DIR, runCommand, runWorker, startServer, type Started } from './lib/child.ts';
import { adminQuery, dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { runPgbench } from './lib/pgbench.ts';
import { checkParity, countJobs, settled, type ParityCheck } from './lib/parity.ts';
import { renderMarkdown, renderSvg } from './lib/report.ts';
import { median, round, type RunSummary } from './lib/stats.ts';
import { sectionTimeoutResponses } from './timeout-responses.ts';
import { sectionStreamResume } from './stream-resume.ts';
import { cpuMeter, perRequest } from './lib/cpu.ts';
import { chatSpread, type ChatCpu } from './lib/chat-spread.ts';
import { notifySeries } from './notify-commit.ts';
import { DURABLE_PEERS, sectionDurablePeers } from './durable-peers.ts';

const FULL = process.argv.includes('--full');
const KEEP = process.argv.includes('--keep');
/** `--only a,b`: run only these sections (`SECTIONS`). */
const ONLY = ((): Set<string> | null => {
  const i = process.argv.indexOf('--only');
  return i >= 0 ? new Set((process.argv[i + 1] ?? '').split(',').filter(Boolean)) : null;
})();
const SECTIONS = ['create', 'storm', 'chat', 'stream', 'timeout', 'waiting', 'doubt', 'notify', 'durable-peers'] as const;
/** The waiting series (about 80 s) is in the full run and `--only waiting`, not in quick mode (which stays about 6 minutes). */
const want = (name: (typeof SECTIONS)[number]): boolean => (ONLY ? ONLY.has(name) : (name !== 'waiting' || FULL) && name !== 'notify');
const SECONDS = FULL ? 15 : 3;
const ROUNDS = FULL ? 3 : 2;
/** The chat series runs three rounds in quick mode too, so one noisy minute does not decide its ratios (issue 26). */
const CHAT_ROUNDS = Math.max(3, ROUNDS);
const CONCURRENCY = 32;
/**
 * Seconds of load each HTTP server gets once, unrecorded, before its first
 * timed run: a fresh process's first second is JIT compilation (quick mode's
 * 3 s runs of `POST /v1/jobs` were a fifth slower in the round that met a cold
 * server), which pgbench, a C program, never pays. Every HTTP side gets it,
 * the peers' too.
 */
const WARM_UP_SECONDS = 1;
const STORM_N = 1000;
const TIMEOUT_REQUESTS = FULL ? 20 : 6;
const PEERS = { 'pg-boss': '10.4.2', 'graphile-worker': '0.17.3', '@portkey-ai/gateway': '1.15.2' } as const;
const SCRATCH = resolve(BENCH_DIR, '.scratch');
const DB = 'onejob_bench_main';
const started = Date.now();
const log = (msg: string): void => void process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}\n`);
const W = (name: string): string => resolve(BENCH_DIR, 'workers', name);

type Samples = Record<string, RunSummary[]>;
const samples: Samples = {};
const record = (name: string, s: RunSummary): void => {
  (samples[name] ??= []).push(s);
  log(`${name.padEnd(26)} ${String(s.rps).padStart(9)}/s  p50 ${s.p50} ms  p99 ${s.p99} ms${s.errors ? `  errors ${s.errors}` : ''}`);
};
type Counted = RunSummary & { answered2xx: number; cutOff: number };
const parity: ParityCheck[] = [];
/**
 * Runs one onejob series, then checks parity on `db`: the jobs it created
 * against its 2xx answers and, with `calls` (the fake provider's running
 * total), against the provider executions once every job has settled.
 */
async function withParity(series: string, db: string, run: () => Promise<Counted>, calls?: () => Promise<number>): Promise<RunSummary> {
  if (calls) await new Promise((r) => setTimeout(r, 250)); // the previous side's stragglers reach the provider first
  const rowsBefore = await countJobs(db);
  const callsBefore = calls ? await calls() : 0;
  const s = await run();
  if (calls) {
    const open = await settled(db);
    if (open > 0) log(`   ${series}: ${open} jobs still queued or running after 20 s`);
  }
  const rows = (await countJobs(db)) - rowsBefore;
  const providerCalls = calls ? (await calls()) - callsBefore : null;
  const check = checkParity({ series, answered2xx: s.answered2xx, cutOff: s.cutOff, rows, providerCalls });
  parity.push(check);
  log(`   parity ${series}: ${check.ok ? 'ok' : 'FAILED'}: ${s.answered2xx} answered 2xx (+${s.cutOff} cut off), ${rows} jobs` +
    `${providerCalls === null ? '' : `, ${providerCalls} provider calls`}${check.ok ? '' : ` — ${check.problems.join('; ')}`}`);
  return s;
}

/** The median run of a series (by rate), or null. */
const med = (name: string): RunSummary | null => {
  const runs = samples[name];
  if (!runs || runs.length === 0) return null;
  const m = median(runs.map((r) => r.rps));
  return { ...runs.reduce((best, r) => (Math.abs(r.rps - m) < Math.abs(best.rps - m) ? r : best)), rps: round(m, 1) };
};

async function ensurePeers(): Promise<void> {
  const have = Object.keys(PEERS).every((p) => existsSync(resolve(SCRATCH, 'node_modules', p, 'package.json')));
  if (have) return;
  log('installing the peers into bench/.scratch (pg-boss, graphile-worker, @portkey-ai/gateway)…');
  mkdirSync(SCRATCH, { recursive: true });
  if (!existsSync(resolve(SCRATCH, 'package.json'))) writeFileSync(resolve(SCRATCH, 'package.json'), '{"name":"onejob-bench-peers","private":true,"version":"0.0.0"}\n');
  await runCommand('npm', ['i', '-E', '--no-audit', '--no-fund', '--prefix', SCRATCH, ...Object.entries(PEERS).map(([n, v]) => `${n}@${v}`)]);
}

async function machine(): Promise<Record<string, unknown>> {
  const pgVersion = (await adminQuery<{ v: string }>('SELECT version() AS v'))[0]?.v ?? '?';
  const settings = await adminQuery<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit','fsync','max_connections','shared_buffers','wal_sync_method','commit_delay')`,
  );
  return {
    nproc: cpus().length,
    cpu: cpus()[0]?.model ?? '?',
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    freeMemoryGiB: round(freemem() / 2 ** 30, 1),
    os: `${platform()} ${release()}`,
    node: process.version,
    postgres: pgVersion,
    postgresSettings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
    sqlite: 'better-sqlite3, WAL, synchronous=FULL',
    loadAverageAtStart: loadavg().map((x) => round(x, 2)),
    mode: FULL ? 'full' : 'quick',
    secondsPerRun: SECONDS,
    warmUpSecondsPerHttpServer: WARM_UP_SECONDS,
    rounds: ROUNDS,
    concurrency: CONCURRENCY,
  };
}

const CREATE_BODY = JSON.stringify({ route: 'summarize', input: { messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] } });
const CHAT_BODY = JSON.stringify({ model: 'summarize', messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] });
const AUTH = { authorization: 'Bearer tok_bench', 'content-type': 'application/json' };

/** Rotates `items` by `r` so each side goes first in turn. */
const rotate = <T>(items: readonly T[], r: number): T[] => items.map((_, i) => items[(i + r) % items.length]!);

// ---------------------------------------------------------------------------

async function section1and5(url: string, sqliteUrl: string): Promise<void> {
  log('1+5: keyed creation — pgbench, HTTP (PostgreSQL, SQLite), store alone, raw pg, pg-boss, graphile-worker');
  const pgServer = await startServer<{ url: string }>(W('onejob-server.ts'), ['--db', url]);
  const sqliteServer = await startServer<{ url: string }>(W('onejob-server.ts'), ['--db', sqliteUrl]);
  const enqueue = (kind: string, db = url) => async (): Promise<RunSummary> =>
    runWorker<RunSummary>(W('enqueue-load.ts'), ['--kind', kind, '--url', db, '--concurrency', String(CONCURRENCY), '--duration', String(SECONDS * 1000)]);
  const http = (server: Started<{ url: string }>, seconds = SECONDS) => async (): Promise<Counted> =>
    runAutocannon({
      url: `${server.info.url}/v1/jobs`, connections: CONCURRENCY, seconds, method: 'POST',
      headers: { ...AUTH, 'idempotency-key': 'ac-[<id>]' }, body: CREATE_BODY, idReplacement: true,
    });
  const sides: [string, () => Promise<RunSummary>][] = [
    ['pgbench_insert', () => runPgbench({ dbName: DB, clients: CONCURRENCY, seconds: SECONDS })],
    ['http_create_pg', () => withParity('http_create_pg', url, http(pgServer))],
    ['store_create_pg', enqueue('store')],
    ['raw_pg_insert', enqueue('raw')],
    ['pgboss_send', enqueue('pgboss')],
    ['graphile_add_job', enqueue('graphile')],
    ['http_create_sqlite', () => withParity('http_create_sqlite', sqliteUrl, http(sqliteServer))],
  ];
  try {
    for (const server of [pgServer, sqliteServer]) await http(server, WARM_UP_SECONDS)();
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, run] of rotate(sides, r)) record(name, await run());
    }
  } finally {
    await pgServer.stop();
    await sqliteServer.stop();
  }
}

async function section2(url: string): Promise<Record<string, unknown>> {
  log(`2: duplicate storm — ${STORM_N} concurrent creates of one key vs distinct keys (HTTP, PostgreSQL)`);
  const server = await startServer<{ url: string }>(W('onejob-server.ts'), ['--db', url, '--pool', '10']);
  const runs: Record<string, unknown>[] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const mode of r % 2 === 0 ? ['same', 'distinct'] : ['distinct', 'same']) {
        const res = await runWorker<RunSummary & { key: string; statuses: Record<string, number>; distinctIds: number; callersWithId: number }>(
          W('http-storm.ts'), ['--url', server.info.url, '--n', String(STORM_N), '--mode', mode]);
        const rows = Number(
          (await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM jobs WHERE owner_id = 'bench' AND idempotency_key ${mode === 'same' ? `= '${res.key}'` : `LIKE '${res.key}-%'`}`, url))[0]?.n,
        );
        runs.push({ ...res, rows });
        record(`storm_${mode}`, res);
        log(`   rows ${rows}, distinct ids ${res.distinctIds}, callers with an id ${res.callersWithId}, statuses ${JSON.stringify(res.statuses)}`);
      }
    }
  } finally {
    await server.stop();
  }
  log('2: the same storm on the queue libraries (what the losers get back)');
  const peers: Record<string, unknown> = {};
  for (const kind of ['store', 'pgboss', 'graphile']) {
    peers[kind] = await runWorker(W('peer-storm.ts'), ['--kind', kind, '--url', url, '--n', String(STORM_N)]);
    log(`   ${kind}: ${JSON.stringify(peers[kind])}`);
  }
  return { runs, peers };
}

function startPortkey(): Promise<Started<{ url: string }>> {
  return startServer<{ url: string }>(
    resolve(SCRATCH, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js'),
    ['--headless', '--port=0'],
    { NODE_ENV: 'production' },
    { tsx: false, nodeArgs: ['--import', resolve(BENCH_DIR, 'workers', 'portkey.mjs')], cwd: SCRATCH },
  );
}

const portkeyHeaders = (config: unknown): Record<string, string> => ({ 'content-type': 'application/json', 'x-portkey-config': JSON.stringify(config) });

async function section3(): Promise<Record<string, unknown>> {
  log('3: gateway overhead — fake provider direct vs Portkey vs onejob /v1/chat/completions');
  // A database of its own: the executor must not pick up the queued jobs of the creation runs.
  const url = await recreateDatabase(`${DB}_chat`);
  const sqlitePath = resolve(SCRATCH, 'bench-chat-sqlite.db');
  for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
  const sqliteUrl = `sqlite:${sqlitePath}`;
  const fake = await startServer<{ url: string; countUrl: string }>(W('fake-provider.ts'), ['--forget']);
  const calls = async (): Promise<number> => ((await (await fetch(fake.info.countUrl)).json()) as { calls: number }).calls;
  const portkey = await startPortkey();
  type OnejobChat = Started<{ url: string; chat: boolean; executor: boolean }>;
  const onejobs: { suffix: string; db: string; server: OnejobChat }[] = [];
  const notes: string[] = [];
  for (const [suffix, db] of [['', url], ['_sqlite', sqliteUrl]] as const) {
    try {
      const server: OnejobChat = await startServer(W('onejob-server.ts'), ['--db', db, '--provider-url', fake.info.url, '--executor', '--pool', '10']);
      if (!server.info.chat) notes.push('this build has no POST /v1/chat/completions yet: the onejob side was not measured');
      onejobs.push({ suffix, db, server });
    } catch (e) {
      notes.push(`onejob${suffix} with an executor could not start: ${String(e).split('\n')[0]}`);
    }
  }
  const pkConfig = { provider: 'openai', api_key: 'sk-bench', custom_host: `${fake.info.url}/v1` };
  const directBody = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] });
  const direct = (seconds: number) => () => runAutocannon({ url: `${fake.info.url}/v1/chat/completions`, connections: CONCURRENCY, seconds, method: 'POST', headers: { 'content-type': 'application/json' }, body: directBody });
  const viaPortkey = (seconds: number) => () => runAutocannon({ url: `${portkey.info.url}/v1/chat/completions`, connections: CONCURRENCY, seconds, method: 'POST', headers: portkeyHeaders(pkConfig), body: directBody });
  const sides: [string, () => Promise<RunSummary>][] = [['chat_direct', direct(SECONDS)], ['chat_portkey', viaPortkey(SECONDS)]];
  const warmUps = [direct(WARM_UP_SECONDS), viaPortkey(WARM_UP_SECONDS)];
  const probe = (path: string, base: string, headers: Record<string, string>, body: string, fresh = false) => async (): Promise<Counted> =>
    runWorker<Counted>(W('latency-probe.ts'), ['--url', base, '--path', path, '--n', String(FULL ? 3000 : 400), '--headers', JSON.stringify(headers), '--body', body, ...(fresh ? ['--fresh-key', 'true'] : [])]);
  const probes: [string, () => Promise<RunSummary>][] = [
    ['chat_direct_c1', probe('/v1/chat/completions', fake.info.url, { 'content-type': 'application/json' }, directBody)],
    ['chat_portkey_c1', probe('/v1/chat/completions', portkey.info.url, portkeyHeaders(pkConfig), directBody)],
    // The floor of the floor-corrected ratio (issue 40): one durable one-row commit at one client, the drivers' own job insert.
    ['floor_pg_commit_c1', () => runPgbench({ dbName: DB, clients: 1, seconds: SECONDS })],
    ['floor_sqlite_commit_c1', () => runWorker<RunSummary>(W('sqlite-commit.ts'), ['--path', resolve(SCRATCH, 'bench-floor-sqlite.db'), '--seconds', String(SECONDS)])],
  ];
  for (const { suffix, db, server } of onejobs) {
    if (!server.info.chat) continue;
    const base = server.info.url;
    const load = (seconds = SECONDS) => () => runAutocannon({ url: `${base}/v1/chat/completions`, connections: CONCURRENCY, seconds, method: 'POST', headers: { ...AUTH, 'idempotency-key': 'chat-[<id>]' }, body: CHAT_BODY, idReplacement: true });
    sides.push([`chat_onejob${suffix}`, () => withParity(`chat_onejob${suffix}`, db, load(), calls)]);
    warmUps.push(load(WARM_UP_SECONDS));
    probes.push([`chat_onejob${suffix}_c1`, () => withParity(`chat_onejob${suffix}_c1`, db, probe('/v1/chat/completions', base, AUTH, CHAT_BODY, true), calls)]);
  }
  // CPU per request of every 32-connection side: its server process (and, for onejob on PostgreSQL, its database backends).
  const cpuOf: Record<string, { pids: number[]; db?: string }> = { chat_direct: { pids: [fake.child.pid!] }, chat_portkey: { pids: [portkey.child.pid!] } };
  for (const { suffix, db, server } of onejobs) cpuOf[`chat_onejob${suffix}`] = { pids: [server.child.pid!], ...(db.startsWith('postgres') ? { db: `${DB}_chat` } : {}) };
  const cpu: Record<string, ChatCpu[]> = {};
  try {
    for (const warmUp of warmUps) await warmUp();
    for (let r = 0; r < CHAT_ROUNDS; r++) {
      for (const [name, run] of rotate(sides, r)) {
        const meter = cpuOf[name] ? await cpuMeter(cpuOf[name]!.pids, cpuOf[name]!.db) : null;
        const s = await run();
        record(name, s);
        if (meter) {
          const use = await meter.stop();
          (cpu[name] ??= []).push({ round: r, requests: s.ops, ...use, perRequest: perRequest(use, s.ops), loadAverage1m: round(loadavg()[0]!, 2) });
          log(`   ${name} CPU per request: ${JSON.stringify(perRequest(use, s.ops))} ms (${use.backends} backends${use.backendsLost ? `, ${use.backendsLost} lost` : ''}; load ${loadavg()[0]!.toFixed(2)})`);
        }
      }
      for (const [name, run] of rotate(probes, r)) record(name, await run());
    }
  } finally {
    chatCpu = cpu;
    for (const o of onejobs) await o.server.stop();
    await portkey.stop();
    await fake.stop();
    if (!KEEP) for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
  }
  return { notes, onejobChat: onejobs.some((o) => o.server.info.chat), rounds: CHAT_ROUNDS, cpu };
}

/** The chat series' CPU per round (set by section3). */
let chatCpu: Record<string, ChatCpu[]> = {};

const STREAM_CHUNKS = ['The', ' quick', ' brown', ' fox'];

/**
 * Two timings of the fake's stream: content every 5 ms (series `stream_*`,
 * every mode), and every 50 ms (`stream50_*`, the full run and `--only
 * stream`): a gateway's fixed cost before its first byte can hide behind a
 * provider's own time to first token, and 50 ms shows whether it does.
 */
async function sectionStream(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { stream: await streamTiming('stream', 5, FULL ? 400 : 100, FULL ? 50 : 20) };
  if (FULL || ONLY?.has('stream')) out.stream50 = await streamTiming('stream50', 50, FULL ? 60 : 30, 5);
  return out;
}

async function streamTiming(prefix: string, STREAM_CHUNK_DELAY_MS: number, n: number, warmup: number): Promise<Record<string, unknown>> {
  log(`3s: streaming — time to first token, 1 connection: fake provider direct vs Portkey vs onejob (stream: true), chunks every ${STREAM_CHUNK_DELAY_MS} ms`);
  const url = await recreateDatabase(`${DB}_stream`);
  const sqlitePath = resolve(SCRATCH, 'bench-stream-sqlite.db');
  for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
  const sqliteUrl = `sqlite:${sqlitePath}`;
  const fake = await startServer<{ url: string; countUrl: string }>(W('fake-provider.ts'), [
    '--forget', '--behaviour', JSON.stringify({ chunks: STREAM_CHUNKS, chunkDelayMs: STREAM_CHUNK_DELAY_MS, usage: { prompt_tokens: 20, completion_tokens: 4 } }),
  ]);
  const calls = async (): Promise<number> => ((await (await fetch(fake.info.countUrl)).json()) as { calls: number }).calls;
  const portkey = await startPortkey();
  type OnejobChat = Started<{ url: string; chat: boolean }>;
  const onejobs: { suffix: string; db: string; server: OnejobChat }[] = [];
  const notes: string[] = [];
  for (const [suffix, db] of [['', url], ['_sqlite', sqliteUrl]] as const) {
    try {
      onejobs.push({ suffix, db, server: await startServer(W('onejob-server.ts'), ['--db', db, '--provider-url', fake.info.url, '--executor', '--pool', '10']) });
    } catch (e) {
      notes.push(`onejob${suffix} with an executor could not start: ${String(e).split('\n')[0]}`);
    }
  }
  const messages = [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }];
  const directBody = JSON.stringify({ model: 'fake-model', stream: true, messages });
  const onejobBody = JSON.stringify({ model: 'summarize', stream: true, messages });
  const pkConfig = { provider: 'openai', api_key: 'sk-bench', custom_host: `${fake.info.url}/v1` };
  const probe = (base: string, headers: Record<string, string>, body: string, fresh = false) => async (): Promise<Counted> =>
    runWorker<Counted>(W('stream-probe.ts'), ['--url', base, '--n', String(n), '--warmup', String(warmup), '--headers', JSON.stringify(headers), '--body', body, ...(fresh ? ['--fresh-key', 'true'] : [])]);
  const probes: [string, () => Promise<RunSummary>][] = [
    [`${prefix}_direct_c1`, probe(fake.info.url, {}, directBody)],
    [`${prefix}_portkey_c1`, probe(portkey.info.url, portkeyHeaders(pkConfig), directBody)],
  ];
  for (const { suffix, db, server } of onejobs) {
    probes.push([`${prefix}_onejob${suffix}_c1`, () => withParity(`${prefix}_onejob${suffix}_c1`, db, probe(server.info.url, AUTH, onejobBody, true), calls)]);
  }
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, run] of rotate(probes, r)) {
        const s = await run();
        record(name, s);
        const first = (s as { firstError?: string }).firstError;
        if (first) log(`   ${name}: ${s.errors} failed streams, first: ${first}`);
      }
    }
  } finally {
    for (const o of onejobs) await o.server.stop();
    await portkey.stop();
    await fake.stop();
    if (!KEEP) for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
    if (!KEEP) await dropDatabase(`${DB}_stream`);
  }
  return { notes, chunks: STREAM_CHUNKS, chunkDelayMs: STREAM_CHUNK_DELAY_MS, requestsPerRun: n };
}

async function countCalls(base: string): Promise<number> {
  const res = await fetch(`${base}/calls`);
  const body = (await res.json()) as unknown;
  const calls = Array.isArray(body) ? body : ((body as { calls?: unknown[]; data?: unknown[] }).calls ?? (body as { data?: unknown[] }).data ?? []);
  return calls.length;
}

async function resetCalls(base: string): Promise<void> {
  await fetch(`${base}/reset`, { method: 'POST' });
}

/** Usage every fake provider reports in section 4, and the price onejob is configured with (USD per million tokens). */
const TIMEOUT_USAGE = { prompt_tokens: 1000, completion_tokens: 500 };
const TIMEOUT_PRICING = { inputPerMTok: 2.5, outputPerMTok: 10 };
/** One provider call priced from that usage: what every execution costs, on every side. */
const PER_CALL_USD = (TIMEOUT_USAGE.prompt_tokens * TIMEOUT_PRICING.inputPerMTok + TIMEOUT_USAGE.completion_tokens * TIMEOUT_PRICING.outputPerMTok) / 1e6;

interface CostSplit { totalUsd: number; winnersUsd: number; nonWinnersUsd: number; totalUsdPerRequest: number; winnersUsdPerRequest: number; nonWinnersUsdPerRequest: number; source: string; [k: string]: unknown }
const usd = (x: number): number => round(x, 6);
function split(total: number, winners: number, requests: number, source: string, extra: Record<string, unknown> = {}): CostSplit {
  return {
    totalUsd: usd(total), winnersUsd: usd(winners), nonWinnersUsd: usd(total - winners),
    totalUsdPerRequest: usd(total / requests), winnersUsdPerRequest: usd(winners / requests), nonWinnersUsdPerRequest: usd((total - winners) / requests),
    source, ...extra,
  };
}

async function section4(): Promise<Record<string, unknown>> {
  log(`4: provider executions and their cost under a timeout — primary answers after 1 s, 200 ms timeout, a fallback (${TIMEOUT_REQUESTS} requests each; every call reports ${JSON.stringify(TIMEOUT_USAGE)}, priced ${JSON.stringify(TIMEOUT_PRICING)} = $${PER_CALL_USD} per call)`);
  const usage = JSON.stringify({ usage: TIMEOUT_USAGE });
  const primary = await startServer<{ url: string }>(W('fake-provider.ts'), ['--delay-ms', '1000', '--behaviour', usage]);
  const fallback = await startServer<{ url: string }>(W('fake-provider.ts'), ['--behaviour', usage]);
  const portkey = await startPortkey();
  const out: Record<string, unknown> = {};
  const body = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'timeout scenario' }] });
  const script = (base: string, behaviour: object): Promise<Response> =>
    fetch(`${base}/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ default: behaviour }) });
  const reset = async (): Promise<void> => {
    // A reset forgets the default behaviour too: restore both (the primary's delay, everyone's usage).
    await resetCalls(primary.info.url);
    await resetCalls(fallback.info.url);
    await script(primary.info.url, { reply: 'slow', delayMs: 1000, usage: TIMEOUT_USAGE });
    await script(fallback.info.url, { reply: 'ok', usage: TIMEOUT_USAGE });
  };
  type Sent = { status: number; jobId?: string | null };
  const measure = async (name: string, send: (i: number) => Promise<Sent>): Promise<Sent[]> => {
    await reset();
    const statuses: Record<string, number> = {};
    const sent = await Promise.all(Array.from({ length: TIMEOUT_REQUESTS }, async (_, i) => {
      const r = await send(i);
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      return r;
    }));
    await new Promise((r) => setTimeout(r, 1500)); // late answers and anything still starting
    const p = await countCalls(primary.info.url);
    const f = await countCalls(fallback.info.url);
    const ok = sent.filter((r) => r.status === 200).length;
    out[name] = {
      requests: TIMEOUT_REQUESTS, primaryCalls: p, fallbackCalls: f, providerCallsPerRequest: round((p + f) / TIMEOUT_REQUESTS, 2), statuses,
      // Priced the same way on every side: each provider call × the per-call price; a request answered 200 had one winning call.
      cost: split((p + f) * PER_CALL_USD, ok * PER_CALL_USD, TIMEOUT_REQUESTS, 'provider calls × per-call price (winner: one call per request answered 200)'),
    };
    return sent;
  };
  const target = (u: string, extra: object = {}): object => ({ provider: 'openai', api_key: 'sk-bench', custom_host: `${u}/v1`, ...extra });
  try {
    const pk = (config: object) => async (): Promise<Sent> => {
      const res = await fetch(`${portkey.info.url}/v1/chat/completions`, { method: 'POST', headers: portkeyHeaders(config), body });
      await res.arrayBuffer();
      return { status: res.status };
    };
    for (const [name, config] of [
      ['portkey_fallback', { strategy: { mode: 'fallback' }, targets: [target(primary.info.url, { request_timeout: 200 }), target(fallback.info.url)] }],
      ['portkey_fallback_retries', {
        strategy: { mode: 'fallback' },
        retry: { attempts: 1, on_status_codes: [408, 429, 500, 502, 503, 504] },
        targets: [target(primary.info.url, { request_timeout: 200 }), target(fallback.info.url)],
      }],
    ] as const) {
      await measure(name, pk(config));
      log(`   ${name}: ${JSON.stringify(out[name])}`);
    }
    for (const [name, hedge] of [['onejob', null], ['onejob_hedge_100ms', 100]] as const) {
      let server: Started<{ url: string; chat: boolean }> | null = null;
      const url = await recreateDatabase(`${DB}_timeout`);
      try {
        server = await startServer(W('onejob-server.ts'), [
          '--db', url, '--provider-url', primary.info.url, '--fallback-url', fallback.info.url, '--timeout-ms', '200', '--executor', '--grace-ms', '3000',
          '--pricing', `${TIMEOUT_PRICING.inputPerMTok},${TIMEOUT_PRICING.outputPerMTok}`,
          ...(hedge ? ['--hedge-ms', String(hedge)] : []),
        ]);
      } catch (e) {
        out[name] = { error: `could not start onejob with an executor: ${String(e).split('\n')[0]}` };
        log(`   ${name}: ${String((out[name] as { error: string }).error)}`);
        continue;
      }
      const base = server.info.url;
      const tag = `${name}-${Date.now().toString(36)}`;
      // Through the chat endpoint when this build has it; else the jobs API with a long-poll (the same executor path).
      const via = server.info.chat ? 'chat' : 'jobs';
      const sentAt = new Date(Date.now() - 1000).toISOString();
      const sent = await measure(name, async (i) => {
        if (via === 'chat') {
          const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { ...AUTH, 'idempotency-key': `${tag}-${i}` }, body: CHAT_BODY });
          await res.arrayBuffer();
          return { status: res.status, jobId: res.headers.get('onejob-job-id') };
        }
        const res = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: { ...AUTH, 'idempotency-key': `${tag}-${i}` }, body: CREATE_BODY });
        const job = (await res.json()) as { id: string };
        const done = await fetch(`${base}/v1/jobs/${job.id}?wait=5`, { headers: AUTH });
        const j = (await done.json()) as { state: string };
        return { status: j.state === 'succeeded' ? 200 : j.state === 'unknown' ? 409 : 502, jobId: job.id };
      });
      const o = out[name] as Record<string, unknown>;
      o.via = via === 'chat' ? 'POST /v1/chat/completions' : 'POST /v1/jobs + GET /v1/jobs/{id}?wait=5';
      // onejob's own account (CONTRACT §8): every attempt's cost_usd; the winner is the succeeded attempt.
      try {
        let total = 0;
        let winners = 0;
        let unpriced = 0;
        const attemptStates: Record<string, number> = {};
        const jobStates: Record<string, number> = {};
        for (const r of sent) {
          if (!r.jobId) continue;
          const job = (await (await fetch(`${base}/v1/jobs/${r.jobId}`, { headers: AUTH })).json()) as { state: string; cost_usd: number | null; attempts: { state: string; cost_usd: number | null }[] };
          jobStates[job.state] = (jobStates[job.state] ?? 0) + 1;
          for (const a of job.attempts) {
            attemptStates[a.state] = (attemptStates[a.state] ?? 0) + 1;
            if (a.cost_usd === null) unpriced++;
            total += a.cost_usd ?? 0;
            if (a.state === 'succeeded') winners += a.cost_usd ?? 0;
          }
        }
        const usageRes = await fetch(`${base}/v1/usage?since=${encodeURIComponent(sentAt)}`, { headers: AUTH });
        const usageRows = usageRes.ok ? ((await usageRes.json()) as { data: { outcome: string; attempts: number; cost_usd: number | null }[] }).data : [];
        // Priced from the provider calls, a request's call won when its job succeeded (a late answer can win after a 409).
        const p = o.primaryCalls as number;
        const f = o.fallbackCalls as number;
        o.costByProviderCalls = split((p + f) * PER_CALL_USD, (jobStates.succeeded ?? 0) * PER_CALL_USD, TIMEOUT_REQUESTS, 'provider calls × per-call price (winner: one call per job that succeeded)');
        o.cost = split(total, winners, TIMEOUT_REQUESTS, "the jobs' attempts' cost_usd (GET /v1/jobs/{id}); winner: the succeeded attempt", {
          attemptStates, jobStates, attemptsWithoutCost: unpriced,
          usageEndpoint: usageRes.ok ? usageRows : `GET /v1/usage answered ${usageRes.status}`,
          usageEndpointTotalUsd: usd(usageRows.reduce((a, r) => a + (r.cost_usd ?? 0), 0)),
        });
      } catch (e) {
        o.costError = String(e).split('\n')[0];
      }
      log(`   ${name}: ${JSON.stringify(o)}`);
      await server.stop();
    }
  } finally {
    await portkey.stop();
    await primary.stop();
    await fallback.stop();
  }
  return { ...out, perCallUsd: PER_CALL_USD, usagePerCall: TIMEOUT_USAGE, pricing: TIMEOUT_PRICING };
}

/** The tiers of the waiting series: the target (2,000 + 2,000) and a tenth of it, where the steady state is visible. */
const WAITING_TIERS = [[200, 200], [2000, 2000]] as const;

async function sectionWaiting(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [jobs, chats] of WAITING_TIERS) out[`${jobs}+${chats}`] = await waitingTier(jobs, chats);
  return out;
}

async function waitingTier(jobs: number, chats: number): Promise<Record<string, unknown>> {
  log(`W: waiting is free — one onejob process (PostgreSQL) holding ${jobs} GET /v1/jobs/{id}?wait=60 (+4 on the first job) and ${chats} chat requests on a provider that answers after 120 s`);
  // The server holds two sockets per waiter (client, provider), the client one: check the open-file limit first.
  const needed = 2 * (jobs + chats + 4) + 500;
  const limit = Number(/Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? Number.POSITIVE_INFINITY);
  if (limit < needed) {
    throw new Error(`the open-file limit is ${limit}, the waiting series needs about ${needed}: run \`ulimit -n ${needed}\` (up to the hard limit, \`ulimit -Hn\`) in this shell first`);
  }
  const dbName = `${DB}_waiting`;
  const url = await recreateDatabase(dbName);
  const fake = await startServer<{ url: string; countUrl: string }>(W('fake-provider.ts'), ['--delay-ms', '120000']);
  let server: Started<{ url: string; pid: number; observeUrl: string }> | null = null;
  try {
    server = await startServer(W('onejob-server.ts'), [
      '--db', url, '--provider-url', fake.info.url, '--timeout-ms', '300000', '--executor', '--observe',
      // Every attempt in flight at once: the waiters wait on the provider, not on the executor's queue.
      '--concurrency', String(jobs + chats + 100),
    ]);
    const res = await runWorker<Record<string, unknown>>(W('waiters.ts'), [
      '--url', server.info.url, '--observe-url', server.info.observeUrl, '--count-url', fake.info.countUrl, '--db-name', dbName,
      '--jobs', String(jobs), '--chats', String(chats), '--own', '5', '--window', String(FULL ? 20 : 10),
    ], {}, 180_000);
    log(`   waiting: ${JSON.stringify(res.waiting)}`);
    log(`   wake: ${JSON.stringify(res.wake)}`);
    return res;
  } finally {
    await server?.stop();
    await fake.stop();
    if (!KEEP) await dropDatabase(dbName);
  }
}

// ---------------------------------------------------------------------------

function ratio(a: number | undefined, b: number | undefined, digits = 3): number | null {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  return round(a / b, digits);
}

async function main(): Promise<void> {
  await ensurePeers();
  const info = await machine();
  log(`machine: ${info.nproc} CPUs, ${info.memoryGiB} GiB, ${String(info.postgres).split(' on ')[0]}, Node ${info.node}; ${FULL ? 'full' : 'quick'} mode`);
  const url = await recreateDatabase(DB);
  const sqlitePath = resolve(SCRATCH, 'bench-sqlite.db');
  for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
  const sqliteUrl = `sqlite:${sqlitePath}`;
  // Migrate once so pgbench finds the table before any server starts.
  await runWorker(W('enqueue-load.ts'), ['--kind', 'store', '--url', url, '--concurrency', '1', '--duration', '10', '--warmup', '0']);

  const errors: Record<string, string> = {};
  const attempt = async <T>(name: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn();
    } catch (e) {
      errors[name] = String(e instanceof Error ? e.message : e).slice(0, 2000);
      log(`${name} failed: ${errors[name]!.split('\n')[0]}`);
      return null;
    }
  };
  if (ONLY) for (const name of ONLY) if (!(SECTIONS as readonly string[]).includes(name)) throw new Error(`--only: unknown section ${name} (known: ${SECTIONS.join(', ')})`);
  if (want('create')) await attempt('create', () => section1and5(url, sqliteUrl));
  const storm = want('storm') ? await attempt('storm', () => section2(url)) : null;
  const chat = want('chat') ? await attempt('chat', () => section3()) : null;
  const stream = want('stream') ? await attempt('stream', () => sectionStream()) : null;
  const streamResume = want('stream') ? await attempt('stream_resume', () => sectionStreamResume({ full: FULL, keep: KEEP, db: `${DB}_resume`, rounds: FULL ? ROUNDS : 1, log, worker: W, auth: AUTH, record, withParity })) : null;
  const timeout = want('timeout') ? await attempt('timeout', () => section4()) : null;
  const waiting = want('waiting') ? await attempt('waiting', () => sectionWaiting()) : null;
  // 4r: the timeout scenario with an openai-responses primary (CONTRACT §11, bench/timeout-responses.ts).
  const doubt = want('doubt') ? await attempt('doubt', () => sectionTimeoutResponses({ requests: FULL ? 50 : 20, startPortkey, portkeyHeaders, database: `${DB}_doubt`, log })) : null;
  const dr = (doubt ?? {}) as Record<string, { providerExecutionsPerRequest?: number; succeededWithoutPerson?: number; requests?: number; doubtToResolutionMs?: { p50: number | null; p99: number | null } }>;
  // NOTIFY at commit (bench/notify-commit.ts): two API processes, two executors, the jobs.state trigger on and off; `--only notify`.
  const notify = want('notify') ? await attempt('notify', () => notifySeries({ seconds: FULL ? 15 : 8, rounds: FULL ? 4 : 2, connections: 128, log })) : null;
  // D: the durable peers (issue 40, bench/durable-peers.ts): DBOS Transact, Restate, pg-boss on the same intent.
  const durablePeers = want('durable-peers')
    ? await attempt('durable-peers', () => sectionDurablePeers({
      keep: KEEP, db: `${DB}_durable`, seconds: SECONDS, rounds: ROUNDS, warmUpSeconds: WARM_UP_SECONDS, concurrency: CONCURRENCY,
      // Quick mode: 200 requests per one-connection probe after 100 unrecorded (five sides, two rounds), so quick mode stays under 9 minutes.
      probeRequests: FULL ? 3000 : 200, probeWarmup: FULL ? 200 : 100, log, worker: W, auth: AUTH, record, withParity,
    }))
    : null;

  const m = (n: string): RunSummary | null => med(n);
  const stormSame = m('storm_same');
  const stormDistinct = m('storm_distinct');
  const stormRuns = (storm?.runs ?? []) as { mode: string; rows: number; distinctIds: number; callersWithId: number }[];
  const sameRuns = stormRuns.filter((r) => r.mode === 'same');
  const t = (timeout ?? {}) as Record<string, { providerCallsPerRequest?: number }>;
  const c1 = { direct: m('chat_direct_c1'), portkey: m('chat_portkey_c1'), onejob: m('chat_onejob_c1'), onejobSqlite: m('chat_onejob_sqlite_c1') };
  const addedPortkey = c1.portkey && c1.direct ? round(c1.portkey.p50 - c1.direct.p50, 3) : null;
  const addedOnejob = c1.onejob && c1.direct ? round(c1.onejob.p50 - c1.direct.p50, 3) : null;
  const addedOnejobSqlite = c1.onejobSqlite && c1.direct ? round(c1.onejobSqlite.p50 - c1.direct.p50, 3) : null;
  const ttftOf = (prefix: string): Record<string, number | null> => {
    const st = { direct: m(`${prefix}_direct_c1`), portkey: m(`${prefix}_portkey_c1`), onejob: m(`${prefix}_onejob_c1`), onejobSqlite: m(`${prefix}_onejob_sqlite_c1`) };
    const addedTtft = (side: RunSummary | null, q: 'p50' | 'p99'): number | null => (side && st.direct ? round(side[q] - st.direct[q], 3) : null);
    return {
      portkey_p50: addedTtft(st.portkey, 'p50'), onejob_p50: addedTtft(st.onejob, 'p50'), onejob_sqlite_p50: addedTtft(st.onejobSqlite, 'p50'),
      portkey_p99: addedTtft(st.portkey, 'p99'), onejob_p99: addedTtft(st.onejob, 'p99'), onejob_sqlite_p99: addedTtft(st.onejobSqlite, 'p99'),
    };
  };
  const ttftAdded = ttftOf('stream');
  const ttftAdded50 = ttftOf('stream50');
  const ttftRatio = (t: Record<string, number | null>, side: string): number | null => (t[side] != null && t.portkey_p50 != null ? ratio(t[side]!, t.portkey_p50!) : null);
  const cost = (timeout ?? {}) as Record<string, { cost?: { nonWinnersUsdPerRequest?: number } }>;
  type WaitTier = { waiting?: WaitFigures; wake?: { otherWaitersAnswered?: number; ownWaitersAnswered?: number; ownWaiters?: number } };
  const w = ((waiting ?? {}) as Record<string, WaitTier>)['2000+2000'] ?? null;
  const wSmall = ((waiting ?? {}) as Record<string, WaitTier>)['200+200'] ?? null;
  const spread = chatSpread(samples, chatCpu);
  // The floor (issue 40): two one-row durable commits at one client, PostgreSQL (pgbench -c 1) and SQLite (synchronous=FULL).
  const floorMs = {
    postgres: m('floor_pg_commit_c1') ? round(2 * m('floor_pg_commit_c1')!.p50, 3) : null,
    sqlite: m('floor_sqlite_commit_c1') ? round(2 * m('floor_sqlite_commit_c1')!.p50, 3) : null,
  };
  const beyondFloor = (added: number | null, floor: number | null): number | null => (added !== null && floor !== null && addedPortkey !== null ? ratio(added - floor, addedPortkey) : null);
  const durable = durableFigures(m, (durablePeers ?? {}) as DurableResult);
  const ratios = {
    create_http_vs_pgbench: ratio(m('http_create_pg')?.rps, m('pgbench_insert')?.rps),
    store_vs_pgbench: ratio(m('store_create_pg')?.rps, m('pgbench_insert')?.rps),
    store_vs_pgboss: ratio(m('store_create_pg')?.rps, m('pgboss_send')?.rps),
    store_vs_graphile: ratio(m('store_create_pg')?.rps, m('graphile_add_job')?.rps),
    store_vs_raw_insert: ratio(m('store_create_pg')?.rps, m('raw_pg_insert')?.rps),
    create_http_sqlite_vs_pg: ratio(m('http_create_sqlite')?.rps, m('http_create_pg')?.rps),
    chat_rps_vs_portkey: ratio(m('chat_onejob')?.rps, m('chat_portkey')?.rps),
    chat_added_p50_vs_portkey: addedOnejob !== null && addedPortkey !== null ? ratio(addedOnejob, addedPortkey) : null,
    chat_rps_vs_portkey_sqlite: ratio(m('chat_onejob_sqlite')?.rps, m('chat_portkey')?.rps),
    chat_added_p50_vs_portkey_sqlite: addedOnejobSqlite !== null && addedPortkey !== null ? ratio(addedOnejobSqlite, addedPortkey) : null,
    chat_added_p50_beyond_floor_vs_portkey: beyondFloor(addedOnejob, floorMs.postgres),
    chat_added_p50_beyond_floor_vs_portkey_sqlite: beyondFloor(addedOnejobSqlite, floorMs.sqlite),
    ...durable.ratios,
    parity_failures: parity.filter((p) => !p.ok).length,
    portkey_rps_vs_direct: ratio(m('chat_portkey')?.rps, m('chat_direct')?.rps),
    dup_storm_rows: sameRuns.length ? Math.max(...sameRuns.map((r) => r.rows)) : null,
    dup_storm_callers_with_id: sameRuns.length ? Math.min(...sameRuns.map((r) => r.callersWithId)) : null,
    dup_storm_p99_vs_distinct: ratio(stormSame?.p99, stormDistinct?.p99),
    timeout_provider_calls_per_request: t.onejob?.providerCallsPerRequest ?? null,
    timeout_provider_calls_per_request_hedged: t.onejob_hedge_100ms?.providerCallsPerRequest ?? null,
    portkey_timeout_provider_calls_per_request: t.portkey_fallback?.providerCallsPerRequest ?? null,
    stream_ttft_added_p50_vs_portkey: ttftRatio(ttftAdded, 'onejob_p50'),
    stream_ttft_added_p50_vs_portkey_sqlite: ttftRatio(ttftAdded, 'onejob_sqlite_p50'),
    stream50_ttft_added_p50_vs_portkey: ttftRatio(ttftAdded50, 'onejob_p50'),
    stream50_ttft_added_p50_vs_portkey_sqlite: ttftRatio(ttftAdded50, 'onejob_sqlite_p50'),
    resume_other_ttft_p50_vs_same: ratio(m('resume_other')?.p50, m('resume_same')?.p50),
    duplicate_other_ttft_p50_vs_same: ratio(m('duplicate_other')?.p50, m('duplicate_same')?.p50),
    timeout_non_winner_usd_per_request: cost.onejob?.cost?.nonWinnersUsdPerRequest ?? null,
    timeout_non_winner_usd_per_request_hedged: cost.onejob_hedge_100ms?.cost?.nonWinnersUsdPerRequest ?? null,
    portkey_timeout_non_winner_usd_per_request: cost.portkey_fallback?.cost?.nonWinnersUsdPerRequest ?? null,
    waiting_statements_per_waiter_per_second: w?.waiting?.statementsPerWaiterPerSecond ?? null,
    waiting_statements_per_waiter_per_second_400: wSmall?.waiting?.statementsPerWaiterPerSecond ?? null,
    // What one more waiter costs: the statements/s added between the two tiers, per waiter added (the executor's
    // heartbeat and the one batched sweep are there with any number of waiters).
    waiting_marginal_statements_per_waiter_per_second: marginalPerWaiter(wSmall?.waiting, w?.waiting),
    waiting_wake_own_waiters_answered_share: w?.wake?.ownWaiters ? round((w.wake.ownWaitersAnswered ?? 0) / w.wake.ownWaiters, 3) : null,
    waiting_wake_other_waiters_answered: w?.wake?.otherWaitersAnswered ?? null,
    doubt_responses_provider_executions_per_request: dr.onejob_responses?.providerExecutionsPerRequest ?? null,
    doubt_portkey_provider_executions_per_request: dr.portkey_fallback?.providerExecutionsPerRequest ?? null,
    doubt_responses_succeeded_without_person_share: dr.onejob_responses?.requests ? round((dr.onejob_responses.succeededWithoutPerson ?? 0) / dr.onejob_responses.requests, 3) : null,
    doubt_responses_resolution_p50_ms: dr.onejob_responses?.doubtToResolutionMs?.p50 ?? null,
    doubt_responses_resolution_p99_ms: dr.onejob_responses?.doubtToResolutionMs?.p99 ?? null,
    doubt_lookup_provider_executions_per_request: dr.onejob_responses_lookup?.providerExecutionsPerRequest ?? null,
    doubt_lookup_succeeded_without_person_share: dr.onejob_responses_lookup?.requests ? round((dr.onejob_responses_lookup.succeededWithoutPerson ?? 0) / dr.onejob_responses_lookup.requests, 3) : null,
    doubt_lookup_resolution_p50_ms: dr.onejob_responses_lookup?.doubtToResolutionMs?.p50 ?? null,
    doubt_lookup_resolution_p99_ms: dr.onejob_responses_lookup?.doubtToResolutionMs?.p99 ?? null,
    ...spread.ratios,
  };
  const medians = Object.fromEntries(Object.keys(samples).map((k) => [k, m(k)]));
  const result = {
    date: new Date().toISOString(),
    startedAt: new Date(started).toISOString(),
    machine: info,
    durability: 'PostgreSQL: synchronous_commit and fsync as shown in machine.postgresSettings (defaults: on). SQLite: WAL, synchronous=FULL. Every onejob figure is a durable commit before the answer.',
    peers: { ...PEERS, ...((durablePeers as DurableResult | null)?.versions ?? {}) },
    ratios,
    floorMs,
    durableAddedLatencyMs: durable.addedMs,
    durableCpuPerRequestMs: (durablePeers as DurableResult | null)?.cpuPerRequestMs ?? null,
    addedLatencyMs: { portkey_p50: addedPortkey, onejob_p50: addedOnejob, onejob_sqlite_p50: addedOnejobSqlite, portkey_p99: c1.portkey && c1.direct ? round(c1.portkey.p99 - c1.direct.p99, 3) : null, onejob_p99: c1.onejob && c1.direct ? round(c1.onejob.p99 - c1.direct.p99, 3) : null },
    ttftAddedMs: ttftAdded,
    ttftAddedMs50: ttftAdded50,
    chatCpuPerRequestMs: spread.cpuPerRequestMs,
    chatSpread: spread.spread,
    medians,
    samples,
    storm,
    chat,
    stream,
    streamResume,
    timeout,
    waiting,
    doubt,
    notify,
    durablePeers,
    parity,
    errors,
    elapsedSeconds: round((Date.now() - started) / 1000, 1),
    loadAverageAtEnd: loadavg().map((x) => round(x, 2)),
    only: ONLY ? [...ONLY] : null,
  };
  const dir = resolve(BENCH_DIR, 'results');
  mkdirSync(dir, { recursive: true });
  const stamp = result.date.replace(/[:]/g, '-').replace(/\..*/, '');
  const json = `${JSON.stringify(result, null, 2)}\n`;
  const md = renderMarkdown(result);
  if (ONLY) {
    // A partial run never replaces latest.*: it is kept under its own name.
    const name = `${stamp}-only-${[...ONLY].join('-')}`;
    writeFileSync(resolve(dir, `${name}.json`), json);
    writeFileSync(resolve(dir, `${name}.md`), md);
  } else {
    writeFileSync(resolve(dir, `${stamp}${FULL ? '-full' : ''}.json`), json);
    writeFileSync(resolve(dir, 'latest.json'), json);
    writeFileSync(resolve(dir, 'latest.md'), md);
    writeFileSync(resolve(dir, 'latest.svg'), renderSvg(result));
  }
  process.stdout.write(`\n${md}\n`);
  if (!KEEP) {
    for (const name of [DB, `${DB}_chat`, `${DB}_timeout`, `${DB}_waiting`, `${DB}_doubt`]) await dropDatabase(name);
    for (const suffix of ['', '-wal', '-shm']) rmSync(sqlitePath + suffix, { force: true });
  }
  log(`done in ${result.elapsedSeconds} s → bench/results/${ONLY ? `${stamp}-only-${[...ONLY].join('-')}.{json,md}` : 'latest.{json,md,svg}'}`);
  const failed = parity.filter((p) => !p.ok);
  if (failed.length > 0) {
    log(`PARITY FAILED in ${failed.map((p) => p.series).join(', ')}: ${failed.flatMap((p) => p.problems).join('; ')}`);
    process.exitCode = 1;
  }
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});

/** What bench/durable-peers.ts returns (the parts the ratios read). */
interface DurableResult {
  readonly versions?: Record<string, string>;
  readonly cpuPerRequestMs?: Record<string, { totalMs: number | null }>;
}

/**
 * The durable peers' ratios (issue 40): onejob's req/s at 32 connections ÷ each peer's and ÷ the best
 * peer's; onejob's added p50 at one connection ÷ each peer's and ÷ the best (lowest) peer's; CPU per
 * request ÷ each peer's.
 */
function durableFigures(m: (n: string) => RunSummary | null, d: DurableResult): { ratios: Record<string, number | null>; addedMs: Record<string, number | null> } {
  const direct = m('durable_direct_c1');
  const added = (side: string): number | null => {
    const s = m(`durable_${side}_c1`);
    return s && direct ? round(s.p50 - direct.p50, 3) : null;
  };
  const addedMs: Record<string, number | null> = Object.fromEntries(['onejob', ...DURABLE_PEERS].map((s) => [s, added(s)]));
  const rps = (side: string): number | undefined => m(`durable_${side}`)?.rps;
  const cpu = (side: string): number | undefined => d.cpuPerRequestMs?.[`durable_${side}`]?.totalMs ?? undefined;
  const peerRps = DURABLE_PEERS.map(rps).filter((x): x is number => x !== undefined && x > 0);
  const peerAdded = DURABLE_PEERS.map((p) => addedMs[p] ?? null).filter((x): x is number => x !== null && x > 0);
  const ratios: Record<string, number | null> = {
    durable_rps_vs_best_peer: peerRps.length ? ratio(rps('onejob'), Math.max(...peerRps)) : null,
    durable_added_p50_vs_best_peer: peerAdded.length && addedMs.onejob !== null ? ratio(addedMs.onejob, Math.min(...peerAdded)) : null,
  };
  for (const p of DURABLE_PEERS) {
    ratios[`durable_rps_vs_${p}`] = ratio(rps('onejob'), rps(p));
    ratios[`durable_added_p50_vs_${p}`] = addedMs.onejob !== null && addedMs[p] !== null ? ratio(addedMs.onejob, addedMs[p]!) : null;
    ratios[`durable_cpu_per_request_vs_${p}`] = ratio(cpu('onejob'), cpu(p));
  }
  return { ratios, addedMs };
}

/** The waiting series' figures of one tier (bench/workers/waiters.ts). */
interface WaitFigures {
  readonly waiters?: number;
  readonly statementsPerSecond?: number;
  readonly statementsPerWaiterPerSecond?: number;
}

/** Statements/s one more waiter adds: the difference between two tiers over the waiters added (null unless both ran). */
function marginalPerWaiter(small: WaitFigures | undefined, large: WaitFigures | undefined): number | null {
  if (small?.statementsPerSecond === undefined || large?.statementsPerSecond === undefined || small.waiters === undefined || large.waiters === undefined) return null;
  const added = large.waiters - small.waiters;
  return added > 0 ? round(Math.max(0, large.statementsPerSecond - small.statementsPerSecond) / added, 5) : null;
}
