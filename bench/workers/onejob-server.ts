/**
 * A onejob server in its own process for the benchmark: `buildApp` over the
 * store for `--db` (PostgreSQL URL or `sqlite:<path>`), listening on
 * 127.0.0.1 at a free port, with one API token (`tok_bench` → `bench`).
 *
 * `--provider-url` configures a route `summarize` whose chain is `primary`
 * (and `fallback` with `--fallback-url`), `openai` type (the primary
 * `openai-responses` with `--provider-type openai-responses`), `--timeout-ms` each,
 * optional `--hedge-ms`. With `--executor`, an executor runs in this process
 * next to the API (what `onejob serve` does, the gateway's jobs leased to it
 * at birth), built through `src/runtime/runtime.ts`.
 *
 * `--pricing in,out` gives every provider `pricing` (USD per million input,
 * output tokens; CONTRACT §8). `--concurrency N` sets the executor's
 * concurrency (default the product's). `--observe` starts a second listener
 * (`observeUrl`) that reports this process's RSS, event-loop delay
 * (`perf_hooks.monitorEventLoopDelay`, 10 ms resolution, reported as what
 * exceeds the 10 ms tick), every
 * `pg.Client#query` issued (counted by statement name or text) and the
 * store's calls, since the last `POST /reset` of that listener.
 *
 * Prints `READY {"url", "chat": <whether POST /v1/chat/completions exists>, "executor", "observeUrl"?, "pid"}`.
 */
import { createServer } from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import pg from 'pg';
import { pino } from 'pino';
import { defineConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import type { InlineRunner } from '../../src/http/app-context.ts';
import { createRuntime } from '../../src/runtime/runtime.ts';
import { openStore } from '../../src/store/open-store.ts';
import { JobStore } from '../../src/store/job-store.ts';
import { createPostgresDriver } from '../../src/store/postgres/postgres-driver.ts';
import { argMap, emitReady } from '../lib/child.ts';

const args = argMap(process.argv.slice(2));
const observe = args.observe === 'true';
// Counts every statement this process sends to PostgreSQL (pooled clients and the LISTEN one).
const statements = new Map<string, number>();
const statementMs = new Map<string, number>();
if (observe) {
  const origQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown }).query = function (this: unknown, ...a: unknown[]) {
    const q = a[0] as string | { name?: string; text?: string } | undefined;
    const key = typeof q === 'string' ? q : (q?.name ?? q?.text ?? '?');
    const label = key.replace(/\s+/g, ' ').trim().slice(0, 70);
    statements.set(label, (statements.get(label) ?? 0) + 1);
    // The round trip of each statement, as its caller waits for it (callback or promise): summed by statement.
    const started = performance.now();
    const took = (): void => void statementMs.set(label, (statementMs.get(label) ?? 0) + performance.now() - started);
    const cbAt = a.findIndex((x) => typeof x === 'function');
    if (cbAt >= 0) {
      const cb = a[cbAt] as (...x: unknown[]) => unknown;
      a[cbAt] = (...x: unknown[]) => (took(), cb(...x));
    }
    const r = origQuery.apply(this, a);
    if (cbAt < 0 && r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(took, took);
    return r;
  } as never;
}
const pricing = args.pricing ? (([i, o]) => ({ inputPerMTok: Number(i), outputPerMTok: Number(o) }))(args.pricing.split(',')) : undefined;
const db = args.db ?? 'sqlite::memory:';
const timeoutMs = Number(args['timeout-ms'] ?? 20_000);
type BenchProvider = { type: 'openai' | 'openai-responses'; baseUrl: string; model: string; apiKey: string; timeoutMs: number; pricing?: { inputPerMTok: number; outputPerMTok: number }; pollIntervalMs?: number; maxDurationMs?: number };
// `--provider-type openai-responses`: the primary speaks the Responses API in background mode (CONTRACT §11), polled every 100 ms.
const responsesPrimary = args['provider-type'] === 'openai-responses' ? { type: 'openai-responses' as const, pollIntervalMs: 100, maxDurationMs: 60_000 } : {};
const providers: Record<string, BenchProvider> = {
  primary: { type: 'openai', baseUrl: `${args['provider-url'] ?? 'http://127.0.0.1:9'}/v1`, model: 'fake-model', apiKey: 'sk-bench', timeoutMs, ...(pricing ? { pricing } : {}), ...responsesPrimary },
};
if (args['fallback-url']) {
  providers.fallback = { type: 'openai', baseUrl: `${args['fallback-url']}/v1`, model: 'fake-model', apiKey: 'sk-bench', timeoutMs, ...(pricing ? { pricing } : {}) };
}
const config = defineConfig({
  databaseUrl: db,
  host: '127.0.0.1',
  apiKeys: { tok_bench: 'bench' },
  providers,
  routes: { summarize: { providers: Object.keys(providers), hedgeAfterMs: args['hedge-ms'] ? Number(args['hedge-ms']) : null } },
});

// `--pipelines N` and `--spare-after-ms N` override the PostgreSQL driver's group-commit settings (experiments only).
const store = (args.pipelines || args['spare-after-ms']) && db.startsWith('postgres')
  ? new JobStore(await createPostgresDriver({
    connectionString: db, max: args.pool ? Number(args.pool) : undefined,
    ...(args.pipelines ? { jobInsertPipelines: Number(args.pipelines) } : {}),
    ...(args['spare-after-ms'] ? { spareBatchAfterMs: Number(args['spare-after-ms']) } : {}),
  }))
  : await openStore(db, args.pool ? { poolSize: Number(args.pool) } : {});
await store.migrate();
// With --observe, the store's calls are counted by method (a Proxy; the product is unchanged).
const storeCalls = new Map<string, number>();
const observedStore = observe
  ? new Proxy(store, {
    get(t, key) {
      const v = Reflect.get(t, key, t) as unknown;
      if (typeof v !== 'function' || typeof key !== 'string') return v;
      return (...a: unknown[]) => {
        storeCalls.set(key, (storeCalls.get(key) ?? 0) + 1);
        return (v as (...x: unknown[]) => unknown).apply(t, a);
      };
    },
  })
  : store;
if (observe) statements.clear(); // the migration's statements are not the workload's
const logger = pino({ level: process.env.BENCH_SERVER_LOG ?? 'silent' });
let executor: (InlineRunner & { start(): Promise<void>; stop(): Promise<void> }) | null = null;
if (args.executor === 'true') {
  // The runtime wires providers, contracts and gates the way `onejob serve` does.
  const runtime = await createRuntime({ config, store: observedStore, logger });
  executor = runtime.createExecutor({
    pollMs: 1000, lateAnswerGraceMs: Number(args['grace-ms'] ?? 5000),
    ...(args.concurrency ? { concurrency: Number(args.concurrency) } : {}),
  });
  await executor.start();
}
// As in `onejob serve`: gateway jobs run their first attempt on this process's executor at once (the fast path).
const app = buildApp({ store: observedStore, config, logger, executor: executor ?? undefined });

await app.listen({ host: '127.0.0.1', port: Number(args.port ?? 0) });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : 0;
// Does this build have the OpenAI-compatible endpoint? (401/4xx from it means yes; 404 means no.)
const probe = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json' }, payload: '{}' });
const chat = probe.statusCode !== 404;

let stopping = false;
const shutdown = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await executor?.stop().catch(() => {});
  await app.close().catch(() => {});
  await store.close().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
let observeUrl: string | undefined;
if (observe) {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  let since = performance.now();
  const observer = createServer((req, res) => {
    if (req.method === 'POST') {
      loop.reset();
      statements.clear();
      statementMs.clear();
      storeCalls.clear();
      since = performance.now();
      res.end('{}');
      return;
    }
    // The histogram records the interval between ticks of a 10 ms timer: the delay is what exceeds 10 ms.
    const ms = (ns: number): number => Math.max(0, Math.round((ns - 10e6) / 1e4) / 100);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      seconds: (performance.now() - since) / 1000,
      rssBytes: process.memoryUsage.rss(),
      heapUsedBytes: process.memoryUsage().heapUsed,
      eventLoopDelayMs: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max), mean: ms(loop.mean) },
      statements: Object.fromEntries([...statements].sort((a, b) => b[1] - a[1])),
      /** Mean round trip per statement (ms), as its caller waited for it. */
      statementMeanMs: Object.fromEntries([...statements].map(([k, n]) => [k, Math.round(((statementMs.get(k) ?? 0) / n) * 1000) / 1000])),
      storeCalls: Object.fromEntries([...storeCalls].sort((a, b) => b[1] - a[1])),
    }));
  });
  await new Promise<void>((r) => observer.listen(0, '127.0.0.1', r));
  const oa = observer.address();
  observeUrl = `http://127.0.0.1:${typeof oa === 'object' && oa ? oa.port : 0}`;
}
emitReady({ url: `http://127.0.0.1:${port}`, chat, executor: executor !== null, pid: process.pid, ...(observeUrl ? { observeUrl } : {}) });
