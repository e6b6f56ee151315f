/**
 * A onejob server in its own process for the benchmark: `buildApp` over the
 * store for `--db` (PostgreSQL URL or `sqlite:<path>`), listening on
 * 127.0.0.1 at a free port, with one API token (`tok_bench` → `bench`).
 *
 * `--provider-url` configures a route `summarize` whose chain is `primary`
 * (and `fallback` with `--fallback-url`), `openai` type, `--timeout-ms` each,
 * optional `--hedge-ms`. With `--executor`, an executor runs in this process
 * next to the API (what `onejob serve` does, the gateway's jobs leased to it
 * at birth), built through `src/runtime/runtime.ts`.
 *
 * Prints `READY {"url", "chat": <whether POST /v1/chat/completions exists>, "executor"}`.
 */
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
const db = args.db ?? 'sqlite::memory:';
const timeoutMs = Number(args['timeout-ms'] ?? 20_000);
const providers: Record<string, { type: 'openai'; baseUrl: string; model: string; apiKey: string; timeoutMs: number }> = {
  primary: { type: 'openai', baseUrl: `${args['provider-url'] ?? 'http://127.0.0.1:9'}/v1`, model: 'fake-model', apiKey: 'sk-bench', timeoutMs },
};
if (args['fallback-url']) {
  providers.fallback = { type: 'openai', baseUrl: `${args['fallback-url']}/v1`, model: 'fake-model', apiKey: 'sk-bench', timeoutMs };
}
const config = defineConfig({
  databaseUrl: db,
  host: '127.0.0.1',
  apiKeys: { tok_bench: 'bench' },
  providers,
  routes: { summarize: { providers: Object.keys(providers), hedgeAfterMs: args['hedge-ms'] ? Number(args['hedge-ms']) : null } },
});

// `--pipelines N` overrides the PostgreSQL driver's group-commit setting (experiments only).
const store = args.pipelines && db.startsWith('postgres')
  ? new JobStore(await createPostgresDriver({ connectionString: db, max: args.pool ? Number(args.pool) : undefined, jobInsertPipelines: Number(args.pipelines) }))
  : await openStore(db, args.pool ? { poolSize: Number(args.pool) } : {});
await store.migrate();
const logger = pino({ level: process.env.BENCH_SERVER_LOG ?? 'silent' });
let executor: (InlineRunner & { start(): Promise<void>; stop(): Promise<void> }) | null = null;
if (args.executor === 'true') {
  // The runtime wires providers, contracts and gates the way `onejob serve` does.
  const runtime = await createRuntime({ config, store, logger });
  executor = runtime.createExecutor({ pollMs: 1000, lateAnswerGraceMs: Number(args['grace-ms'] ?? 5000) });
  await executor.start();
}
// As in `onejob serve`: gateway jobs run their first attempt on this process's executor at once (the fast path).
const app = buildApp({ store, config, logger, executor: executor ?? undefined });

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
emitReady({ url: `http://127.0.0.1:${port}`, chat, executor: executor !== null });
