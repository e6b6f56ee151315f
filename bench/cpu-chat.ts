/**
 * `node --import tsx bench/cpu-chat.ts [--engine postgres|sqlite] [--seconds 5] [--rounds 4] [--connections 32]
 *   [--roots /path/a,/path/b] [--cpu-prof <dir>] [--path chat|jobs] [--no-trigger <side>] [--pipelines 2,1] [--unix-socket <side>]`
 *
 * `--path jobs` measures `POST /v1/jobs` instead (the bench's create body,
 * no executor: what section 1's HTTP series runs).
 *
 * CPU per `POST /v1/chat/completions` (issue 26) under the bench's chat load
 * (autocannon, 32 connections, fresh keys, its own process; the fake provider
 * in its own process): the onejob server process's utime + stime from /proc
 * and, on PostgreSQL, its backends' (`bench/lib/cpu.ts`), divided by the
 * requests answered.
 *
 * `--roots a,b` compares two source trees (each with its own
 * `bench/workers/onejob-server.ts`, e.g. this worktree and an exported copy of
 * an earlier commit with `node_modules` linked): their servers run side by
 * side, rounds interleaved and rotated, and every round prints b ÷ a, so a
 * change is judged by a ratio taken minutes apart on the same machine.
 * `--pipelines a,b` and `--spare-after-ms a,b` give each side the PostgreSQL
 * driver's group-commit settings (`jobInsertPipelines`, `spareBatchAfterMs`;
 * one tree for each side when `--roots` names one).
 * `--unix-socket <i>` connects side i to PostgreSQL over its Unix socket
 * (`--socket-dir`, default `/var/run/postgresql`) instead of TCP on
 * 127.0.0.1: what the transport costs per request.
 * `--cpu-prof <dir>` runs each server under `node --cpu-prof` (the profile is
 * written when the server exits).
 */
import { mkdirSync, rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { runAutocannon } from './lib/autocannon.ts';
import { BENCH_DIR, ROOT_DIR, argMap, startServer, type Started } from './lib/child.ts';
import { cpuMeter, perRequest } from './lib/cpu.ts';
import { adminQuery, dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { median } from './lib/stats.ts';

const args = argMap(process.argv.slice(2));
const ENGINE = String(args.engine ?? 'postgres');
const SECONDS = Number(args.seconds ?? 5);
const ROUNDS = Number(args.rounds ?? 4);
/** `--pipelines a,b`, `--spare-after-ms a,b`: the group-commit settings of each side (PostgreSQL); the one root is used for each when `--roots` names one. */
const PIPELINES = args.pipelines === undefined ? null : String(args.pipelines).split(',');
const SPARE = args['spare-after-ms'] === undefined ? null : String(args['spare-after-ms']).split(',');
const PER_SIDE = PIPELINES ?? SPARE;
const ROOTS_GIVEN = String(args.roots ?? ROOT_DIR).split(',');
const ROOTS = PER_SIDE && ROOTS_GIVEN.length === 1 ? PER_SIDE.map(() => ROOTS_GIVEN[0]!) : ROOTS_GIVEN;
/** 32 as the bench's chat series; 1 takes the batching of many requests per event-loop turn (and so the throughput) out of the figure. */
const CONNECTIONS = Number(args.connections ?? 32);
/** Idle measurement before each run (ms); `--marginal true` compares the CPU above idle instead of the raw figure. */
const IDLE_MS = Number(args['idle-ms'] ?? 2000);
const MARGINAL = args.marginal === 'true';
const PROF = args['cpu-prof'] ? resolve(String(args['cpu-prof'])) : null;
const JOBS = args.path === 'jobs';
/** `--no-trigger <i>`: side i runs with `jobs_state_notify` disabled (what the job notification costs per request). */
const NO_TRIGGER = args['no-trigger'] === undefined ? -1 : Number(args['no-trigger']);
/** `--unix-socket <i>`: side i reaches PostgreSQL over the Unix socket in `--socket-dir`. */
const UNIX_SOCKET = args['unix-socket'] === undefined ? -1 : Number(args['unix-socket']);
const SOCKET_DIR = String(args['socket-dir'] ?? '/var/run/postgresql');
const MESSAGES = [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }];
const BODY = JSON.stringify(JOBS ? { route: 'summarize', input: { messages: MESSAGES } } : { model: 'summarize', messages: MESSAGES });
const PATH = JOBS ? '/v1/jobs' : '/v1/chat/completions';

const fake = await startServer<{ url: string }>(resolve(BENCH_DIR, 'workers', 'fake-provider.ts'), ['--forget']);
const sides: { root: string; db: string; dbName?: string; server: Started<{ url: string; pid: number }> }[] = [];
try {
  for (const [i, root] of ROOTS.entries()) {
    const dbName = `onejob_bench_cpu_${i}`;
    const tcp = ENGINE === 'postgres' ? await recreateDatabase(dbName) : `sqlite:${resolve(BENCH_DIR, '.scratch', `cpu-${i}.db`)}`;
    const db = i === UNIX_SOCKET && ENGINE === 'postgres' ? `${tcp}${tcp.includes('?') ? '&' : '?'}host=${encodeURIComponent(SOCKET_DIR)}` : tcp;
    if (ENGINE !== 'postgres') for (const s of ['', '-wal', '-shm']) rmSync(resolve(BENCH_DIR, '.scratch', `cpu-${i}.db${s}`), { force: true });
    if (PROF) mkdirSync(resolve(PROF, String(i)), { recursive: true });
    const server = await startServer<{ url: string; pid: number }>(resolve(root, 'bench', 'workers', 'onejob-server.ts'),
      ['--db', db, '--provider-url', fake.info.url, ...(JOBS ? [] : ['--executor']), '--pool', '10', ...(PIPELINES?.[i] ? ['--pipelines', PIPELINES[i]!] : []),
        ...(SPARE?.[i] ? ['--spare-after-ms', SPARE[i]!] : [])], {},
      { cwd: root, ...(PROF ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', resolve(PROF, String(i))] } : {}) });
    if (i === NO_TRIGGER && ENGINE === 'postgres') await adminQuery('ALTER TABLE jobs DISABLE TRIGGER jobs_state_notify', db);
    sides.push({ root, db, ...(ENGINE === 'postgres' ? { dbName } : {}), server });
  }
  // A warm-up run per side (not counted): the first seconds under load are the JIT's, not the steady state's.
  for (const side of sides) await runAutocannon({ url: `${side.server.info.url}${PATH}`, connections: 32, seconds: 3, method: 'POST', headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json', 'idempotency-key': 'warm-[<id>]' }, body: BODY, idReplacement: true });
  const perSide: number[][] = sides.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    const order = sides.map((_, i) => (i + r) % sides.length);
    const row: string[] = [];
    for (const i of order) {
      const side = sides[i]!;
      // The server's background CPU (timers, sweeps, heartbeats) while idle, per second, subtracted below: at a few
      // dozen requests a second on a loaded machine it is a large share of the raw figure and hides a change.
      const idle = await cpuMeter([side.server.child.pid!], side.dbName);
      const idleStarted = performance.now();
      await new Promise((res) => setTimeout(res, IDLE_MS));
      const idleUse = await idle.stop();
      const idlePerSecond = (idleUse.processMs + idleUse.databaseMs) / ((performance.now() - idleStarted) / 1000);
      const meter = await cpuMeter([side.server.child.pid!], side.dbName);
      const t0 = performance.now();
      const s = await runAutocannon({ url: `${side.server.info.url}${PATH}`, connections: CONNECTIONS, seconds: SECONDS, method: 'POST', headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json', 'idempotency-key': `cpu-${r}-[<id>]` }, body: BODY, idReplacement: true });
      const use = await meter.stop();
      const pr = perRequest(use, s.ops)!;
      const marginal = Math.round(((use.processMs + use.databaseMs - idlePerSecond * ((performance.now() - t0) / 1000)) / s.ops) * 1e4) / 1e4;
      perSide[i]!.push(MARGINAL ? marginal : pr.totalMs);
      row.push(`side ${i}: ${s.rps} req/s, CPU ${pr.processMs} + db ${pr.databaseMs} = ${pr.totalMs} ms/request (idle ${idlePerSecond.toFixed(0)} ms/s; above idle ${marginal})`);
    }
    const ratio = sides.length > 1 ? ` | side 1 ÷ side 0: ${(perSide[1]![r]! / perSide[0]![r]!).toFixed(3)}` : '';
    console.log(`round ${r + 1} (load ${loadavg()[0]!.toFixed(2)}): ${row.join('; ')}${ratio}`);
  }
  console.log(`median CPU ms/request: ${perSide.map((xs, i) => `side ${i} (${sides[i]!.root}) ${median(xs).toFixed(4)}`).join('; ')}`);
  if (sides.length > 1) console.log(`median of the rounds' ratios side 1 ÷ side 0: ${median(perSide[1]!.map((x, r) => x / perSide[0]![r]!)).toFixed(3)}`);
} finally {
  for (const s of sides) await s.server.stop();
  await fake.stop();
  for (const s of sides) if (s.dbName) await dropDatabase(s.dbName);
}
process.exit(0);
