/**
 * The durable peers (issue 40, `--only durable-peers`): onejob against
 * systems that give the same guarantee, on the same workload in one run.
 * An intent is one keyed LLM call, durable before the call and after it, a
 * duplicate answered from the record, calling the bench's fake provider:
 *
 * - onejob: `POST /v1/chat/completions` with an `Idempotency-Key`, on
 *   PostgreSQL, the executor in the same process (`onejob serve`);
 * - DBOS Transact (`@dbos-inc/dbos-sdk`, on the same PostgreSQL): a workflow
 *   whose id is the key, one step calling the provider
 *   (`bench/workers/durable-peer.ts --kind dbos`);
 * - Restate (`@restatedev/restate-server`, SDK `@restatedev/restate-sdk`): a
 *   handler invoked through the ingress with an `idempotency-key`, the call
 *   inside `ctx.run` (`bench/workers/restate-peer.ts`, on Node 22+);
 * - pg-boss (`bench/.scratch`): `send` with a singleton key, a worker that
 *   calls the provider and completes (`durable-peer.ts --kind pgboss`).
 *
 * Each side: req/s at 32 connections (autocannon, a fresh key per request),
 * the p50 added over the provider called directly at one connection
 * (`latency-probe.ts`, a fresh key per request), and the CPU per request
 * of its processes and its PostgreSQL backends (`bench/lib/cpu.ts`; for
 * Restate its server and service processes). The sides are interleaved and
 * rotated each round. Then a duplicate check per side: two concurrent
 * requests of one key and a third after they answered; the provider must
 * have been called once (`all` of the fake's counter).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadavg } from 'node:os';
import { runAutocannon } from './lib/autocannon.ts';
import { ROOT_DIR, runWorker, startServer } from './lib/child.ts';
import { cpuMeter, perRequest } from './lib/cpu.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { median, round, type RunSummary } from './lib/stats.ts';
import { nodeForRestate, startRestateServer, type RestateServer } from '../test/engines/support/restate-runtime.ts';
import { freePort } from '../test/support/free-port.ts';

type Counted = RunSummary & { answered2xx: number; cutOff: number };

/** What the section needs from bench/run.ts. */
export interface DurablePeersBench {
  readonly keep: boolean;
  /** Database name prefix: `<db>` (onejob), `<db>_dbos`, `<db>_pgboss`; created and dropped here. */
  readonly db: string;
  readonly seconds: number;
  readonly rounds: number;
  readonly warmUpSeconds: number;
  readonly concurrency: number;
  /** Requests per one-connection probe, and the unrecorded ones before them. */
  readonly probeRequests: number;
  readonly probeWarmup: number;
  readonly log: (msg: string) => void;
  readonly worker: (name: string) => string;
  readonly auth: Record<string, string>;
  readonly record: (name: string, s: RunSummary) => void;
  readonly withParity: (series: string, db: string, run: () => Promise<Counted>, calls?: () => Promise<number>) => Promise<RunSummary>;
}

/** The sides, in the series' names (`durable_<side>`, `durable_<side>_c1`). */
export const DURABLE_SIDES = ['onejob', 'dbos', 'restate', 'pgboss'] as const;
export const DURABLE_PEERS = ['dbos', 'restate', 'pgboss'] as const;

const TEXT = 'Summarize: the quick brown fox jumps over the lazy dog.';
const CHAT_BODY = JSON.stringify({ model: 'summarize', messages: [{ role: 'user', content: TEXT }] });
const DIRECT_BODY = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: TEXT }] });
const INTENT_BODY = JSON.stringify({ text: TEXT });
const JSON_HEADERS = { 'content-type': 'application/json' };

const rotate = <T>(items: readonly T[], r: number): T[] => items.map((_, i) => items[(i + r) % items.length]!);
const versionOf = (pkg: string): string => (JSON.parse(readFileSync(resolve(ROOT_DIR, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;

/** The pid of the restate-server this process started (its child), read from /proc. */
function restateServerPid(): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && comm.startsWith('restate-server')) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

interface Side {
  readonly name: (typeof DURABLE_SIDES)[number];
  readonly url: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly pids: number[];
  /** The PostgreSQL database whose backends are this side's (none for Restate). */
  readonly cpuDb?: string;
}

/** Runs the series; resolves with the versions, CPU per request, duplicate checks and notes (the figures go to `record`). */
export async function sectionDurablePeers(o: DurablePeersBench): Promise<Record<string, unknown>> {
  o.log('D: durable peers — one keyed LLM call per intent, durable before and after it: onejob vs DBOS Transact, Restate, pg-boss');
  const notes: string[] = [];
  const dbs = { onejob: o.db, dbos: `${o.db}_dbos`, pgboss: `${o.db}_pgboss` };
  const urls = { onejob: await recreateDatabase(dbs.onejob), dbos: await recreateDatabase(dbs.dbos), pgboss: await recreateDatabase(dbs.pgboss) };
  const stops: (() => Promise<void>)[] = [];
  const keep = <T extends { stop(): Promise<void> }>(s: T): T => (stops.unshift(() => s.stop()), s);
  const versions: Record<string, string> = {
    onejob: (JSON.parse(readFileSync(resolve(ROOT_DIR, 'package.json'), 'utf8')) as { version: string }).version,
    '@dbos-inc/dbos-sdk': versionOf('@dbos-inc/dbos-sdk'),
    '@restatedev/restate-server': versionOf('@restatedev/restate-server'),
    '@restatedev/restate-sdk': versionOf('@restatedev/restate-sdk'),
  };
  const sides: Side[] = [];
  let restate: RestateServer | null = null;
  try {
    const fake = keep(await startServer<{ url: string; countUrl: string }>(o.worker('fake-provider.ts'), ['--forget']));
    const counts = async (): Promise<{ calls: number; all: number }> => (await (await fetch(fake.info.countUrl)).json()) as { calls: number; all: number };
    const onejobCalls = async (): Promise<number> => (await counts()).calls;

    const onejob = keep(await startServer<{ url: string; pid: number }>(o.worker('onejob-server.ts'), ['--db', urls.onejob, '--provider-url', fake.info.url, '--executor', '--pool', '10']));
    sides.push({ name: 'onejob', url: onejob.info.url, path: '/v1/chat/completions', headers: o.auth, body: CHAT_BODY, pids: [onejob.info.pid], cpuDb: dbs.onejob });

    for (const kind of ['dbos', 'pgboss'] as const) {
      try {
        const peer = keep(await startServer<{ url: string; pid: number; version: string }>(o.worker('durable-peer.ts'), ['--kind', kind, '--db', urls[kind], '--provider-url', fake.info.url]));
        if (kind === 'pgboss') versions['pg-boss'] = peer.info.version;
        sides.push({ name: kind, url: peer.info.url, path: '/intent', headers: JSON_HEADERS, body: INTENT_BODY, pids: [peer.info.pid], cpuDb: dbs[kind] });
      } catch (e) {
        notes.push(`${kind} could not start: ${String(e).split('\n')[0]}`);
      }
    }

    const runtime = nodeForRestate();
    if (runtime.skip !== null) {
      notes.push(`Restate not measured: ${runtime.skip}`);
    } else {
      try {
        restate = await startRestateServer();
        const port = await freePort();
        const service = keep(await startServer<{ pid: number; node: string }>(o.worker('restate-peer.ts'), ['--port', String(port), '--provider-url', fake.info.url], {}, { node: runtime.node }));
        versions['node (Restate service)'] = service.info.node;
        await restate.register(`http://127.0.0.1:${port}`);
        // The ingress learns of a new deployment a moment after the admin API (test/engines/restate.test.ts).
        for (let i = 0; ; i++) {
          const res = await fetch(`${restate.ingressUrl}/intent/ask`, { method: 'POST', headers: { ...JSON_HEADERS, 'idempotency-key': `dp-ready-${Date.now()}` }, body: INTENT_BODY });
          const text = await res.text();
          if (res.ok) break;
          if (res.status !== 404 || i > 80) throw new Error(`the ingress answered ${res.status}: ${text.slice(0, 200)}`);
          await new Promise((r) => setTimeout(r, 250));
        }
        const serverPid = restateServerPid();
        if (serverPid === null) notes.push("restate-server's pid was not found: Restate's CPU per request counts its service process only");
        sides.push({ name: 'restate', url: restate.ingressUrl, path: '/intent/ask', headers: JSON_HEADERS, body: INTENT_BODY, pids: [service.info.pid, ...(serverPid === null ? [] : [serverPid])] });
      } catch (e) {
        notes.push(`Restate could not start: ${String(e).split('\n')[0]}`);
      }
    }

    const load = (s: Side, seconds: number) => (): Promise<Counted> => runAutocannon({
      url: `${s.url}${s.path}`, connections: o.concurrency, seconds, method: 'POST',
      headers: { ...s.headers, 'idempotency-key': `dp-${s.name}-[<id>]` }, body: s.body, idReplacement: true,
    });
    const probe = (url: string, path: string, headers: Record<string, string>, body: string, fresh: boolean) => (): Promise<Counted> =>
      runWorker<Counted>(o.worker('latency-probe.ts'), ['--url', url, '--path', path, '--n', String(o.probeRequests), '--warmup', String(o.probeWarmup), '--headers', JSON.stringify(headers), '--body', body, ...(fresh ? ['--fresh-key', 'true'] : [])]);
    const runs: [string, () => Promise<RunSummary>, Side | null][] = [];
    const probes: [string, () => Promise<RunSummary>][] = [['durable_direct_c1', probe(fake.info.url, '/v1/chat/completions', JSON_HEADERS, DIRECT_BODY, false)]];
    for (const s of sides) {
      const isOnejob = s.name === 'onejob';
      runs.push([`durable_${s.name}`, isOnejob ? () => o.withParity('durable_onejob', urls.onejob, load(s, o.seconds), onejobCalls) : load(s, o.seconds), s]);
      const p = probe(s.url, s.path, s.headers, s.body, true);
      probes.push([`durable_${s.name}_c1`, isOnejob ? () => o.withParity('durable_onejob_c1', urls.onejob, p, onejobCalls) : p]);
    }
    const cpu: Record<string, { round: number; processMs: number | null; databaseMs: number | null; totalMs: number | null; loadAverage1m: number }[]> = {};
    for (const s of sides) await load(s, o.warmUpSeconds)();
    for (let r = 0; r < o.rounds; r++) {
      for (const [name, run, side] of rotate(runs, r)) {
        const meter = side ? await cpuMeter(side.pids, side.cpuDb) : null;
        const s = await run();
        o.record(name, s);
        if (meter) {
          const use = await meter.stop();
          const per = perRequest(use, s.ops);
          (cpu[name] ??= []).push({ round: r, processMs: per?.processMs ?? null, databaseMs: per?.databaseMs ?? null, totalMs: per?.totalMs ?? null, loadAverage1m: round(loadavg()[0]!, 2) });
          o.log(`   ${name} CPU per request: ${JSON.stringify(per)} ms (${use.backends} backends${use.backendsLost ? `, ${use.backendsLost} lost` : ''})`);
        }
        if (s.errors > 0) o.log(`   ${name}: ${s.errors} errors`);
      }
      for (const [name, run] of rotate(probes, r)) o.record(name, await run());
    }

    // The duplicate check: nothing else runs now; two concurrent requests of one key, then a third once they answered.
    await new Promise((r) => setTimeout(r, 500));
    const duplicates: Record<string, { statuses: number[]; providerCalls: number; ok: boolean }> = {};
    for (const s of sides) {
      const key = `dp-dup-${s.name}-${Date.now().toString(36)}`;
      const send = async (): Promise<number> => {
        const res = await fetch(`${s.url}${s.path}`, { method: 'POST', headers: { ...s.headers, 'idempotency-key': key }, body: s.body });
        await res.arrayBuffer();
        return res.status;
      };
      const before = (await counts()).all;
      const statuses = await Promise.all([send(), send()]);
      statuses.push(await send());
      await new Promise((r) => setTimeout(r, 300));
      const providerCalls = (await counts()).all - before;
      duplicates[s.name] = { statuses, providerCalls, ok: providerCalls === 1 && statuses.every((x) => x === 200) };
      o.log(`   duplicate check ${s.name}: statuses ${statuses.join(', ')}, provider calls ${providerCalls}${duplicates[s.name]!.ok ? '' : ' — NOT answered from the record'}`);
    }

    const cpuPerRequestMs = Object.fromEntries(Object.entries(cpu).map(([name, xs]) => {
      const m = (k: 'processMs' | 'databaseMs' | 'totalMs'): number | null => {
        const v = xs.map((x) => x[k]).filter((x): x is number => x !== null);
        return v.length ? round(median(v), 4) : null;
      };
      return [name, { processMs: m('processMs'), databaseMs: m('databaseMs'), totalMs: m('totalMs') }];
    }));
    return { versions, sides: sides.map((s) => s.name), cpuPerRequestMs, cpu, duplicates, notes };
  } finally {
    for (const stop of stops) await stop().catch(() => {});
    await restate?.close().catch(() => {});
    if (!o.keep) for (const name of Object.values(dbs)) await dropDatabase(name).catch(() => {});
  }
}
