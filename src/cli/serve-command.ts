/**
 * `onejob serve` and `onejob executor`: long-running processes.
 *
 * serve = migrate + HTTP API + (unless `--no-executor`) one executor, sharing
 * one runtime (providers, contracts, certification gates). executor = the
 * executor alone; run as many as you like against one database, each
 * optionally with its own `/metrics` port. Both run the background
 * retention sweep (one process per database sweeps at a time).
 * SIGTERM/SIGINT: stop accepting, finish in-flight work, close the database.
 */
import { createApiTokenAuthenticator } from '../http/api-token-auth.ts';
import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import type { OnejobConfig } from '../config/config.ts';
import { countDoubtResolved, createMetrics, instrumentReconciler, storeMetricSources, type Metrics } from '../http/metrics.ts';
import { buildApp } from '../http/build-app.ts';
import { instrumentUsage } from '../http/usage-metrics.ts';
import type { Executor } from '../executor/executor.ts';
import { createRuntime, type Runtime } from '../runtime/runtime.ts';
import type { Store } from '../store/store.ts';
import { CliFailure, USAGE_EXIT_CODE } from './cli-errors.ts';

/** Options of {@link runServe}. */
export interface ServeOptions {
  readonly config: OnejobConfig;
  readonly store: Store;
  readonly logger: Logger;
  readonly port: number;
  readonly host: string;
  /** Run an executor in this process. */
  readonly executor: boolean;
  /** Its lease length (default 30 000 ms). */
  readonly leaseMs?: number | undefined;
  /** Lines to print once listening (demo instructions). */
  readonly banner?: (url: string) => string[];
  /** Run the background retention sweep (CONTRACT §9). Default true. */
  readonly retention?: boolean | undefined;
  /** Called last on shutdown (flushes the tracing SDK, docs/tracing.md). */
  readonly onClose?: (() => Promise<void>) | undefined;
}

/** Counts the executor's events into the shared metrics. */
export function instrumentExecutor(executor: Executor, metrics: Metrics): void {
  executor.events.on('attempt:claimed', ({ attempt }) => metrics.attempts.inc({ state: attempt.state }));
  executor.events.on('attempt:dispatched', () => metrics.attempts.inc({ state: 'running' }));
  // attempts_in_doubt is not counted here: it is read from the database at scrape time.
  executor.events.on('attempt:unknown', () => metrics.attempts.inc({ state: 'unknown' }));
  executor.events.on('attempt:settled', (a, r) => {
    metrics.attempts.inc({ state: r.state });
    if (r.state === 'superseded') metrics.racesLost.inc();
    countDoubtResolved(metrics, a);
  });
  if (executor.reconciler) instrumentReconciler(executor.reconciler, metrics);
  executor.events.on('attempt:finished', (a, r) => metrics.providerLatency.observe({ provider: a.provider, outcome: r.outcome }, r.latencyMs / 1000));
  metrics.answersHeldSources.add(() => executor.answersHeld);
}

/** Installs SIGTERM/SIGINT handlers that run `stop` once (a second signal exits at once). */
function onSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down: finishing in-flight work');
    void stop().then(
      () => {
        logger.info('stopped');
        process.exitCode = 0;
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

async function migrate(store: Store, logger: Logger): Promise<void> {
  for (const m of await store.migrate()) logger.info({ migration: m.version, name: m.name, status: m.status }, 'migration');
}

/** Runs `onejob serve`; returns once listening (the process stays up until a signal). */
export async function runServe(o: ServeOptions): Promise<void> {
  let runtime: Runtime | undefined;
  try {
    await migrate(o.store, o.logger);
    runtime = await createRuntime({ config: o.config, store: o.store, logger: o.logger });
  } catch (error) {
    await runtime?.close(0).catch(() => undefined);
    await o.store.close().catch(() => undefined);
    await o.onClose?.().catch(() => undefined);
    throw error;
  }
  if (Object.keys(o.config.apiKeys).length === 0) o.logger.warn('no API keys configured: every /v1/ request will be 401 (set apiKeys or ONEJOB_API_KEYS)');
  const metrics = createMetrics(storeMetricSources(o.store));
  // Created before the app: chat jobs run their first attempt on it at once (the fast path); started after listen.
  const executor = o.executor ? runtime.createExecutor({ leaseMs: o.leaseMs }) : undefined;
  // `check` and signed callbacks ask and apply through a reconciler: the executor's, else one of the API's own (not started).
  const reconciler = executor?.reconciler ?? runtime.createReconciler();
  if (!executor?.reconciler) instrumentReconciler(reconciler, metrics);
  const app = buildApp({
    store: o.store, config: o.config, logger: o.logger, metrics, eligible: runtime.eligible, executor, reconciler, mcp: runtime.mcp,
    batches: { onChange: () => runtime.wakeBatches() },
  });
  try {
    await app.listen({ port: o.port, host: o.host });
  } catch (error) {
    await app.close().catch(() => undefined);
    await runtime.close(0).catch(() => undefined);
    await o.store.close().catch(() => undefined);
    await o.onClose?.().catch(() => undefined);
    throw new CliFailure(`cannot listen on ${o.host}:${o.port}: ${(error as Error).message}`, USAGE_EXIT_CODE);
  }
  if (executor) {
    instrumentExecutor(executor, metrics);
    instrumentUsage(executor, metrics);
    await executor.start();
    // Batches (CONTRACT §17) are kept by the processes that run executors.
    runtime.startBatches(o.leaseMs === undefined ? {} : { leaseMs: o.leaseMs });
  } else {
    o.logger.info('serving the API only (--no-executor): run `onejob executor` against the same database');
  }
  if (o.retention ?? true) runtime.startRetention();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : o.port;
  const url = `http://${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${port}`;
  const rt = runtime;
  onSignals(o.logger, async () => {
    await app.close();
    await rt.close();
    await o.store.close();
    await o.onClose?.();
  });
  // Only now: whoever waits for the banner may signal at once, and must find the handlers installed.
  // One write: no log line can land between the banner's lines.
  const banner = o.banner?.(url) ?? [];
  if (banner.length > 0) process.stderr.write(`${banner.join('\n')}\n`);
}

/** Options of {@link runExecutorProcess}. */
export interface ExecutorProcessOptions {
  readonly config: OnejobConfig;
  readonly store: Store;
  readonly logger: Logger;
  /** Executors in this process. Default 1. */
  readonly count: number;
  readonly concurrency?: number | undefined;
  readonly leaseMs?: number | undefined;
  /** Serve `/metrics` (and `/healthz`) of this process on this port; undefined: no HTTP at all. */
  readonly metricsPort?: number | undefined;
  /** The address of the metrics port. Default: the configured `host` (0.0.0.0 when none). */
  readonly metricsHost?: string | undefined;
  /** Run the background retention sweep (CONTRACT §9). Default true. */
  readonly retention?: boolean | undefined;
  /** Called last on shutdown (flushes the tracing SDK, docs/tracing.md). */
  readonly onClose?: (() => Promise<void>) | undefined;
}

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** When set, `GET /metrics` needs `Authorization: Bearer <metricsToken>` (the config's `metricsToken`). */
  readonly metricsToken?: string | null | undefined;
  /** Null while the process can serve, else why not: `/healthz` answers 503 (the store's `liveness()`). */
  readonly liveness?: (() => string | null) | undefined;
}

/**
 * A minimal HTTP server for an executor process: `GET /metrics` (Prometheus
 * text; behind the `metricsToken` when one is configured) and `GET
 * /healthz`; anything else is 404. Resolves once listening.
 */
export async function startMetricsServer(metrics: Metrics, port: number, host: string, options: MetricsServerOptions = {}): Promise<Server> {
  const scraper = options.metricsToken ? createApiTokenAuthenticator({ [options.metricsToken]: 'metrics' }) : null;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics' && scraper !== null && scraper(req.headers.authorization) === null) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end('GET /metrics needs Authorization: Bearer <metricsToken>\n');
    } else if (req.method === 'GET' && path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(error as Error).message}\n`),
      );
    } else if (req.method === 'GET' && path === '/healthz') {
      const reason = options.liveness?.() ?? null;
      if (reason === null) res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      else res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'unavailable', reason }));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: this port serves GET /metrics and /healthz\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** Runs `onejob executor`; returns once started (the process stays up until a signal). */
export async function runExecutorProcess(o: ExecutorProcessOptions): Promise<void> {
  let runtime: Runtime | undefined;
  let server: Server | undefined;
  // Logged once the signal handlers are installed: whoever waits for these lines may signal at once.
  const ready: [Record<string, unknown>, string][] = [];
  try {
    await migrate(o.store, o.logger);
    runtime = await createRuntime({ config: o.config, store: o.store, logger: o.logger });
    const metrics = o.metricsPort === undefined ? undefined : createMetrics(storeMetricSources(o.store));
    if (metrics && o.metricsPort !== undefined) {
      const host = o.metricsHost ?? o.config.host;
      try {
        server = await startMetricsServer(metrics, o.metricsPort, host, { metricsToken: o.config.metricsToken, liveness: () => o.store.liveness() });
      } catch (error) {
        throw new CliFailure(`cannot listen on ${host}:${o.metricsPort} for metrics: ${(error as Error).message}`, USAGE_EXIT_CODE);
      }
      const address = server.address();
      ready.push([{ metrics_url: `http://${host}:${typeof address === 'object' && address ? address.port : o.metricsPort}/metrics` }, 'serving metrics']);
    }
    for (let i = 0; i < o.count; i++) {
      const executor = runtime.createExecutor({ concurrency: o.concurrency, leaseMs: o.leaseMs });
      if (metrics) instrumentExecutor(executor, metrics);
      await executor.start();
      ready.push([{ executor: executor.id }, 'executor ready']);
    }
    if (o.count > 0) runtime.startBatches(o.leaseMs === undefined ? {} : { leaseMs: o.leaseMs });
    if (o.retention ?? true) runtime.startRetention();
  } catch (error) {
    server?.close();
    await runtime?.close(0).catch(() => undefined);
    await o.store.close().catch(() => undefined);
    await o.onClose?.().catch(() => undefined);
    throw error;
  }
  const rt = runtime;
  const metricsServer = server;
  onSignals(o.logger, async () => {
    if (metricsServer) await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
    await rt.close();
    await o.store.close();
    await o.onClose?.();
  });
  for (const [fields, msg] of ready) o.logger.info(fields, msg);
}
