/**
 * The `onejob` command line (CONTRACT §6): serve, executor, verify, migrate,
 * jobs list|show, attempts resolve, gc. Every command takes `--config` and honours
 * `DATABASE_URL`; failures print one line `onejob: <reason>` on stderr and
 * exit non-zero (see `cli-errors.ts`).
 *
 * Run through `bin/onejob`, which registers tsx so no build is needed.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createCliLogger } from './cli-logger.ts';
import { pino, type Logger } from 'pino';
import { LOOPBACK_HOST, loadConfig, type OnejobConfig } from '../config/config.ts';
import { compileRouteContracts, RouteGates } from '../runtime/route-gates.ts';
import { RetentionSweeper } from '../runtime/retention-sweeper.ts';
import { createRuntime } from '../runtime/runtime.ts';
import { OnejobError } from '../core/errors.ts';
import { JOB_STATES, type JobState } from '../core/states.ts';
import type { RecordedError } from '../core/types.ts';
import { attemptBody, jobBody } from '../http/api-bodies.ts';
import { resolutionError } from '../http/routes/attempt-routes.ts';
import { spendPolicyOf } from '../config/limits-config.ts';
import { openStore, redact } from '../store/open-store.ts';
import { sqliteEngineOf } from '../store/sqlite/sqlite-driver.ts';
import { parseSqliteEngineChoice, SQLITE_ENGINE_ENV, type SqliteEngineInUse } from '../store/sqlite/sqlite-engine.ts';
import type { AttemptOutcome, Store } from '../store/store.ts';
import { CliFailure, USAGE_EXIT_CODE, describeFailure } from './cli-errors.ts';
import { DEMO_TOKEN, demoBanner, isUnconfigured, startDemoPrimary, withDemo } from './demo-config.ts';
import { attemptTable, describeJob, table } from './cli-output.ts';
import { startTracing } from '../tracing/start-tracing.ts';

/** Where the command line reads and writes; injectable for tests. */
export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

const defaultIo: CliIo = {
  env: process.env,
  stdout: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  stderr: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

function integer(name: string, min: number, max: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    }
    return Number(value);
  };
}

const DURATION_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration such as `30d`, `12h`, `90m`, `45s`, `0s` or `1.5d` into milliseconds.
 *
 * @example parseDuration('12h') // 43200000
 */
export function parseDuration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError('must be a number and a unit (ms, s, m, h, d), e.g. 30d, 12h or 0s');
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]!]!);
}

/** A duration in milliseconds the way people read it: `30d`, `12h`, `1d 2h`, `0s`. */
function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join(' ');
}

function json(name: string): (value: string) => unknown {
  return (value) => {
    try {
      return JSON.parse(value);
    } catch (e) {
      throw new InvalidArgumentError(`${name} is not valid JSON (${(e as Error).message})`);
    }
  };
}

const configOption = (): Option => new Option('-c, --config <file>', 'config file (default: $ONEJOB_CONFIG, else ./onejob.config.json if present)');

/** Loads the config and opens the store (a `sqlite:` one on the library $ONEJOB_SQLITE_ENGINE asks for); the caller closes it. */
async function open(io: CliIo, configPath: string | undefined, requireSecrets: boolean): Promise<{ config: OnejobConfig; store: Store; sqliteEngine: SqliteEngineInUse | null }> {
  const config = loadConfig({ argvConfigPath: configPath, env: io.env, requireSecrets });
  const store = await openStore(config.databaseUrl, { spend: spendPolicyOf(config), sqliteEngine: parseSqliteEngineChoice(io.env[SQLITE_ENGINE_ENV]) });
  return { config, store, sqliteEngine: sqliteEngineOf(store.driver) };
}

/** Logs the SQLite library a long-running process runs on: a warning, with the cause and the fix, when it fell back. */
function logSqliteEngine(logger: Logger, engine: SqliteEngineInUse | null): void {
  if (engine === null) return;
  if (engine.fallbackReason === null) logger.info({ sqlite_engine: engine.name }, `SQLite on ${engine.name}`);
  else logger.warn({ sqlite_engine: engine.name, reason: engine.fallbackReason }, `SQLite on ${engine.name}: ${engine.fallbackReason}`);
}

async function withStore<T>(io: CliIo, configPath: string | undefined, fn: (store: Store, config: OnejobConfig) => Promise<T>): Promise<T> {
  const { store, config } = await open(io, configPath, false);
  try {
    // Fail early, with the database's own reason, when it is unreachable or not migrated.
    const ready = await store.readiness();
    if (!ready.ok) {
      const reason = ready.error ?? `migrations pending (${ready.pendingMigrations.join(', ')}); run: onejob migrate`;
      throw new OnejobError('database_unavailable', reason);
    }
    return await fn(store, config);
  } finally {
    await store.close().catch(() => undefined);
  }
}

/**
 * Builds the program. Actions throw; {@link runCli} turns errors into one line and an exit code.
 *
 * @example await runCli(['jobs', 'list', '--owner', 'alice']);
 */
export function createProgram(io: CliIo = defaultIo): Command {
  const program = new Command('onejob');
  program
    .description('One job per intent: safe retries and fallbacks for provider calls, enforced by the database.')
    .version('0.1.0', '-V, --version')
    .addOption(configOption())
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr, outputError: () => undefined })
    .addHelpText(
      'after',
      `
Every command reads the config file (--config, else $ONEJOB_CONFIG, else
./onejob.config.json) and the environment, which wins:
  DATABASE_URL     sqlite:<path> or postgres://… (default sqlite:./onejob.db)
  ONEJOB_SQLITE_ENGINE  the SQLite library: auto (default: better-sqlite3,
                   else node:sqlite on Node 22.13+), better-sqlite3, node:sqlite
  PORT             HTTP port of serve (default 8080)
  HOST             listen address of serve (default: the config's host, else
                   0.0.0.0; 127.0.0.1 for the unconfigured demo)
  ONEJOB_API_KEYS  token=owner,token=owner
On failure a command prints one line "onejob: <reason>" on stderr and exits
non-zero: 2 bad input or config, 3 database unavailable, 4 not found,
5 conflict, 1 unexpected.

Examples:
  $ onejob migrate
  $ DATABASE_URL=postgres://localhost/onejob onejob serve --port 8080
  $ onejob jobs list --state unknown
  $ onejob attempts resolve att_0193… --state failed
  $ onejob gc --older-than 7d`,
    );

  program
    .command('serve')
    .description('Run the HTTP API and an executor in one process (migrates the database first).')
    .addOption(configOption())
    .option('-p, --port <n>', 'port to listen on (default: $PORT, else the config, else 8080)', integer('--port', 0, 65535))
    .option('--host <address>', 'address to listen on (default: $HOST, else the config, else 0.0.0.0; the unconfigured demo: 127.0.0.1)')
    .option('--no-executor', 'serve the API only; run `onejob executor` processes against the same database')
    .option('--lease-ms <ms>', "lease length of this process's executor; silent this long, it is presumed dead (default 30000)", integer('--lease-ms', 100, 3_600_000))
    .addHelpText(
      'after',
      `
With no config file and no providers configured, serve runs a demo: route
"demo" on two embedded fake providers, token "demo-token" (owner demo), and
prints curl commands that show a job, a timeout becoming unknown and then
succeeded by asking the provider (the primary speaks the Responses API in
background mode), and a failover. Its token is public, so the demo listens on 127.0.0.1 only
unless --host (or $HOST) says otherwise.

In the background, serve deletes jobs finished longer ago than
retention.finishedJobsDays (default 30; see onejob gc).

SIGTERM or SIGINT stops accepting connections, finishes in-flight requests
(long-polls answer at once), lets the executor finish or leave its attempts
unknown, and closes the database.

Examples:
  $ onejob serve --config onejob.config.json
  $ PORT=9000 ONEJOB_API_KEYS=tok_alice=alice onejob serve --no-executor`,
    )
    .action(async (opts: { config?: string; port?: number; host?: string; executor: boolean; leaseMs?: number }) => {
      const loaded = await open(io, opts.config ?? program.opts().config, true);
      // The logger first: a bad LOG_FORMAT is refused before anything is started that would keep the process alive.
      const logger = await createCliLogger({ service: 'onejob', env: io.env }).catch(async (e: unknown) => {
        await loaded.store.close();
        throw e;
      });
      const demo = isUnconfigured(loaded.config);
      // The demo's primary calls a fake Responses API served in this process (closed on shutdown).
      const demoPrimary = demo ? await startDemoPrimary() : undefined;
      const config = demoPrimary ? withDemo(loaded.config, `${demoPrimary.url}/v1`) : loaded.config;
      if (!demo) logSqliteEngine(logger, loaded.sqliteEngine);
      const token = Object.keys(config.apiKeys)[0] ?? DEMO_TOKEN;
      const tracing = await startTracing(io.env, 'onejob').catch(async (e: unknown) => {
        await demoPrimary?.close();
        throw e;
      });
      if (tracing) logger.info({ otlp_traces_url: tracing.tracesUrl }, 'exporting traces');
      // Commands load what only they use (the HTTP app, the executor, the tokenizers of verify) when run:
      // every other command starts without them.
      const { runServe } = await import('./serve-command.ts');
      await runServe({
        onClose: tracing || demoPrimary ? async () => {
          await demoPrimary?.close();
          await tracing?.shutdown();
        } : undefined,
        config, store: loaded.store, logger, executor: opts.executor, leaseMs: opts.leaseMs,
        port: opts.port ?? config.port, host: opts.host ?? (demo && !config.hostConfigured ? LOOPBACK_HOST : config.host),
        banner: demo ? (url) => demoBanner(url, token, { databaseUrl: config.databaseUrl, sqliteEngine: loaded.sqliteEngine }) : undefined,
      });
    });

  program
    .command('executor')
    .description('Run executors only (no HTTP): they claim attempts from the database and call providers.')
    .addOption(configOption())
    .option('-n, --count <n>', 'executors in this process', integer('--count', 1, 64), 1)
    .option('--concurrency <n>', 'attempts in flight per executor (default 64)', integer('--concurrency', 1, 10_000))
    .option('--lease-ms <ms>', 'lease length; an executor silent this long is presumed dead (default 30000)', integer('--lease-ms', 100, 3_600_000))
    .option('--metrics-port <n>', 'serve GET /metrics (Prometheus) and GET /healthz of this process on this port (0: any free port; default: no HTTP)', integer('--metrics-port', 0, 65535))
    .option('--metrics-host <address>', 'address of the metrics port (default: $HOST, else the config\'s host, else 0.0.0.0)')
    .addHelpText(
      'after',
      `
Run as many executor processes as you like against one database: claims use
leases (PostgreSQL: FOR UPDATE SKIP LOCKED), and every write is fenced by the
lease, so a paused executor cannot change a job it no longer owns.
With --metrics-port, the process serves its own /metrics: attempts by state,
races lost, provider latency, and attempts_in_doubt (read from the database
at each scrape). Like serve, it deletes jobs finished longer ago than
retention.finishedJobsDays in the background (one process per database at
a time).

Examples:
  $ DATABASE_URL=postgres://localhost/onejob onejob executor --config onejob.config.json
  $ onejob executor --count 2 --concurrency 32 --metrics-port 9464`,
    )
    .action(async (opts: { config?: string; count: number; concurrency?: number; leaseMs?: number; metricsPort?: number; metricsHost?: string }) => {
      const { config, store, sqliteEngine } = await open(io, opts.config ?? program.opts().config, true);
      const logger = await createCliLogger({ service: 'onejob-executor', env: io.env });
      logSqliteEngine(logger, sqliteEngine);
      const tracing = await startTracing(io.env, 'onejob-executor');
      if (tracing) logger.info({ otlp_traces_url: tracing.tracesUrl }, 'exporting traces');
      const { runExecutorProcess } = await import('./serve-command.ts');
      await runExecutorProcess({
        onClose: tracing ? () => tracing.shutdown() : undefined,
        config, store, logger, count: opts.count, concurrency: opts.concurrency, leaseMs: opts.leaseMs,
        metricsPort: opts.metricsPort, metricsHost: opts.metricsHost,
      });
    });

  program
    .command('fake-provider')
    .description('Run a fake provider (OpenAI and Anthropic wire protocols) for tests and demos.')
    .allowUnknownOption(true)
    .helpOption(false)
    .argument('[args...]', 'fake-provider options: --port N --host H --script FILE --api-key KEY (--help for more)')
    .action(async (args: string[]) => {
      const { runFakeProviderCli } = await import('../providers/fake/fake-provider-cli.ts');
      const code = await runFakeProviderCli(args);
      if (code !== 0) throw new CliFailure('fake provider stopped with an error', code);
    });

  program
    .command('verify')
    .description("Prove providers against their routes' contracts (CONTRACT §5) and record certifications.")
    .addOption(configOption())
    .option('-r, --route <route>', 'only this route (default: every route with a contract)')
    .option('-p, --provider <provider>', 'only this provider (default: every provider of the route)')
    .option('--json', 'print {"passed", "reports"} instead of the table')
    .addHelpText(
      'after',
      `
For each provider of each route: renders every case's prompt through the
provider's tokenizer or chat template (and checks it fits the context window),
runs every case several times at temperature 0 over the provider's real wire
protocol, and checks each output (parses, matches the schema, no extra keys,
business checks, stable across samples). Each verdict is stored as a
certification of (provider, model, contract fingerprint): only certified
providers receive failover and hedge traffic. Exit code 0 only on a full pass.

Examples:
  $ onejob verify
  $ onejob verify --route summarize --provider fallback --json`,
    )
    .action(async (opts: { config?: string; route?: string; provider?: string; json?: boolean }) => {
      const { config, store } = await open(io, opts.config ?? program.opts().config, true);
      try {
        await store.migrate();
        const { runVerifyCommand } = await import('../contracts/verify-command.ts');
        const code = await runVerifyCommand({ config, store, route: opts.route, provider: opts.provider, json: opts.json, stdout: { write: (t: string) => io.stdout(t) } });
        if (code !== 0) throw new CliFailure('verification failed: at least one provider did not pass (see the report)', code);
      } finally {
        await store.close().catch(() => undefined);
      }
    });

  program
    .command('migrate')
    .description('Bring the database schema up to date; prints one line per migration.')
    .addOption(configOption())
    .addHelpText('after', '\nExamples:\n  $ onejob migrate\n  $ DATABASE_URL=postgres://localhost/onejob onejob migrate')
    .action(async (opts: { config?: string }) => {
      const { store } = await open(io, opts.config ?? program.opts().config, false);
      try {
        const results = await store.migrate();
        for (const m of results) {
          const name = `${String(m.version).padStart(4, '0')}_${m.name}`;
          io.stdout(`${name}: ${m.status === 'applied' ? 'applied' : 'already applied'}`);
        }
        if (results.length === 0) io.stdout('no migrations');
      } finally {
        await store.close().catch(() => undefined);
      }
    });

  const jobs = program
    .command('jobs')
    .description('Read jobs straight from the database, across owners (admin: no API token is used; --owner narrows).');

  jobs
    .command('list')
    .description("List jobs of every owner (or of --owner), newest first.")
    .addOption(configOption())
    .option('-o, --owner <owner>', "only this owner's jobs (default: every owner)")
    .addOption(new Option('-s, --state <state>', 'only jobs in this state').choices(JOB_STATES))
    .option('-n, --limit <n>', 'at most this many jobs (1–200)', integer('--limit', 1, 200), 50)
    .option('--cursor <cursor>', 'continue after a previous page (its next_cursor)')
    .option('--json', 'print {"data": [jobs], "next_cursor"} as the HTTP API does')
    .addHelpText('after', '\nExamples:\n  $ onejob jobs list --state unknown\n  $ onejob jobs list --owner alice --json')
    .action(async (opts: { config?: string; owner?: string; state?: JobState; limit: number; cursor?: string; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store) => {
        const page = await store.listAllJobs({ ownerId: opts.owner, state: opts.state, limit: opts.limit, cursor: opts.cursor });
        const bodies = page.jobs.map(jobBody);
        if (opts.json) {
          io.stdout(JSON.stringify({ data: bodies, next_cursor: page.nextCursor }, null, 2));
          return;
        }
        if (bodies.length === 0) {
          io.stdout('no jobs');
          return;
        }
        io.stdout(table(['JOB', 'OWNER', 'STATE', 'ROUTE', 'ATTEMPTS', 'CREATED', 'KEY'], page.jobs.map((job, i) => {
          const j = bodies[i]!;
          return [j.id, job.ownerId, j.state, j.route, String(j.attempts.length), j.created_at, j.idempotency_key];
        })));
        if (page.nextCursor !== null) io.stdout(`more: --cursor ${page.nextCursor}`);
      });
    });

  jobs
    .command('show')
    .description("Show one job with its attempts, whoever owns it (admin: no API token is used).")
    .argument('<id>', 'job id (job_…)')
    .addOption(configOption())
    .option('-o, --owner <owner>', "only if this owner's (default: whoever owns it)")
    .option('--json', 'print the job as the HTTP API does (plus "owner")')
    .addHelpText('after', '\nExamples:\n  $ onejob jobs show job_0193…\n  $ onejob jobs show job_0193… --json | jq .state')
    .action(async (id: string, opts: { config?: string; owner?: string; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store) => {
        const job = opts.owner === undefined ? await store.findJob(id) : await store.getJob(opts.owner, id);
        if (job === null) throw new OnejobError('job_not_found', opts.owner === undefined ? `no job ${id}` : `no job ${id} for owner ${opts.owner}`);
        io.stdout(opts.json ? JSON.stringify({ ...jobBody(job), owner: job.ownerId }, null, 2) : `owner: ${job.ownerId}\n${describeJob(jobBody(job))}`);
      });
    });

  const attempts = program.command('attempts').description('Act on attempts of any owner (admin: no API token is used; --owner narrows).');

  attempts
    .command('resolve')
    .description('Resolve an attempt explicitly: the way out of doubt (starting, running or unknown).')
    .argument('<id>', 'attempt id (att_…)')
    .addOption(configOption())
    .option('-o, --owner <owner>', "only if this owner's (default: whoever owns it)")
    .addOption(new Option('--state <state>', 'the definite outcome').choices(['succeeded', 'failed', 'cancelled']).makeOptionMandatory())
    .option('--result <json>', "with --state succeeded: the output (becomes the job's result exactly as given)", json('--result'))
    .option('--error <json>', 'with --state failed|cancelled: what went wrong ({"code","message"} or any JSON)', json('--error'))
    .option('--reason <text>', "why (kept on the attempt's event beside resolved_by operator)")
    .option('--json', 'print the attempt and its job as the HTTP API does')
    .addHelpText(
      'after',
      `
A success goes through the job's compare-and-swap: if another attempt already
won, the attempt becomes superseded and the job's result is unchanged. After
failed or cancelled the job moves on to the next provider of its chain that
is certified for the route's contract (read from the config, as serve does).

Examples:
  $ onejob attempts resolve att_0193… --state succeeded --result '{"summary":"…"}'
  $ onejob attempts resolve att_0193… --owner alice --state failed --error '{"code":"refused","message":"checked the dashboard"}' --reason 'not in the provider console'`,
    )
    .action(async (id: string, opts: { config?: string; owner?: string; state: 'succeeded' | 'failed' | 'cancelled'; result?: unknown; error?: unknown; reason?: string; json?: boolean }) => {
      const hasResult = Object.hasOwn(opts, 'result');
      const hasError = Object.hasOwn(opts, 'error');
      let outcome: AttemptOutcome;
      if (opts.state === 'succeeded') {
        if (!hasResult) throw new CliFailure('--state succeeded needs --result <json>', USAGE_EXIT_CODE);
        if (hasError) throw new CliFailure('--error goes with --state failed or cancelled, not succeeded', USAGE_EXIT_CODE);
        outcome = { state: 'succeeded', result: opts.result };
      } else {
        if (hasResult) throw new CliFailure(`--result goes with --state succeeded, not ${opts.state}`, USAGE_EXIT_CODE);
        const error: RecordedError | undefined = hasError ? resolutionError(opts.error, opts.state) : undefined;
        outcome = opts.state === 'failed' ? { state: 'failed', error: error ?? { code: 'resolved_failed', message: 'resolved failed from the command line' } } : { state: 'cancelled', error };
      }
      await withStore(io, opts.config ?? program.opts().config, async (store, config) => {
        const gates = new RouteGates(config, await compileRouteContracts(config));
        const found = opts.owner === undefined ? await store.findAttempt(id) : await store.getAttempt(opts.owner, id);
        if (found === null) throw new OnejobError('attempt_not_found', opts.owner === undefined ? `attempt ${id} not found` : `attempt ${id} not found for owner ${opts.owner}`);
        const job = await store.getJob(found.ownerId, found.jobId);
        const settled = await store.settleAttempt({
          ownerId: found.ownerId, attemptId: id, outcome, actor: 'cli', eligible: job ? gates.eligible(job.route) : undefined,
          resolvedBy: 'operator', ...(opts.reason === undefined ? {} : { reason: opts.reason }),
        });
        if (opts.json) {
          io.stdout(JSON.stringify({ ...attemptBody(settled.attempt), job: jobBody(settled.job) }, null, 2));
          return;
        }
        const a = settled.attempt;
        if (a.state === 'superseded') {
          io.stdout(`attempt ${a.id} superseded: another attempt (${settled.job.completedBy ?? '?'}) already decided job ${settled.job.id}; its result is unchanged`);
        } else {
          io.stdout(`attempt ${a.id} ${a.state}; job ${settled.job.id} is ${settled.job.state}`);
        }
        if (settled.failover) io.stdout(`next: attempt ${settled.failover.id} on ${settled.failover.provider} (${settled.failover.state})`);
        io.stdout(attemptTable(jobBody(settled.job).attempts));
      });
    });

  attempts
    .command('check')
    .description('Ask the provider now what became of an attempt, and apply the answer (CONTRACT §11).')
    .argument('<id>', 'attempt id (att_…)')
    .addOption(configOption())
    .option('-o, --owner <owner>', "only if this owner's (default: whoever owns it)")
    .option('--json', 'print the attempt and its job as the HTTP API does')
    .addHelpText(
      'after',
      `
The provider's lookup is asked exactly as the reconciler asks it: an output
goes through the job's compare-and-swap (superseded if another attempt won),
a definite failure moves the job down its chain, "still running" changes
nothing. Fails with lookup_unsupported for a provider without a lookup,
attempt_in_flight while the attempt is starting or running (its executor
decides), and attempt_finished once it ended: only an attempt in doubt is
asked about. Nothing is sent to the provider again.

Example:
  $ onejob attempts check att_0193…`,
    )
    .action(async (id: string, opts: { config?: string; owner?: string; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store, config) => {
        const found = opts.owner === undefined ? await store.findAttempt(id) : await store.getAttempt(opts.owner, id);
        if (found === null) throw new OnejobError('attempt_not_found', opts.owner === undefined ? `attempt ${id} not found` : `attempt ${id} not found for owner ${opts.owner}`);
        const runtime = await createRuntime({ config, store, logger: pino({ level: 'silent' }) });
        try {
          const reconciler = runtime.createReconciler();
          if (!reconciler.canLookUp(found.provider)) {
            throw new OnejobError('lookup_unsupported', `provider ${found.provider} has no lookup: resolve the attempt instead (onejob attempts resolve)`, { details: { provider: found.provider } });
          }
          const { answer, settled } = await reconciler.check(found);
          const job = settled?.job ?? (await store.getJob(found.ownerId, found.jobId));
          const after = settled?.attempt ?? job?.attempts.find((a) => a.id === id) ?? found;
          if (opts.json) {
            io.stdout(JSON.stringify({ ...attemptBody(after), job: job && jobBody(job), lookup: { outcome: answer.kind } }, null, 2));
            return;
          }
          io.stdout(`${found.provider} says: ${answer.kind}${answer.kind === 'error' ? ` (${answer.message})` : ''}; attempt ${after.id} is ${after.state}${after.resolvedBy ? ` (resolved_by ${after.resolvedBy})` : ''}`);
          if (job) io.stdout(attemptTable(jobBody(job).attempts));
        } finally {
          await runtime.close(0);
        }
      });
    });

  program
    .command('gc')
    .description('Delete finished jobs older than the retention window, with their attempts and events (CONTRACT §9), now.')
    .addOption(configOption())
    .option('--older-than <duration>', 'delete jobs finished longer ago than this: 30d, 12h, 90m, 0s… (default: retention.finishedJobsDays of the config, 30d)', (v) => parseDuration(v))
    .option('--json', 'print {"deleted": {"jobs", "attempts", "events", "by_state"}, "older_than_ms", "batches"}')
    .addHelpText(
      'after',
      `
Only terminal jobs (succeeded, failed, cancelled) go, oldest first, in batches
of 500 (one short transaction each), never one with an attempt still in
flight; queued, running and unknown jobs are never deleted. A deleted job's
Idempotency-Key can be used again: a replay creates a new job. serve and
executor do the same in the background; one process per database collects
at a time, and gc waits (up to a minute) for another process's sweep to end.

Examples:
  $ onejob gc
  $ onejob gc --older-than 12h
  $ onejob gc --older-than 0s --json    # every finished job`,
    )
    .action(async (opts: { config?: string; olderThan?: number; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store, config) => {
        const sweeper = new RetentionSweeper({ store, finishedJobsDays: config.retention.finishedJobsDays, holder: `gc_${process.pid}_${Date.now()}` });
        const result = await sweeper.sweepOnce({ olderThanMs: opts.olderThan, waitForLeaseMs: 60_000 });
        if (result === null) throw new OnejobError('database_unavailable', 'another process kept the retention lease for a minute; try again');
        if (opts.json) {
          io.stdout(JSON.stringify({ deleted: { jobs: result.jobs, attempts: result.attempts, events: result.events, by_state: result.jobsByState }, older_than_ms: result.olderThanMs, batches: result.batches }, null, 2));
          return;
        }
        const states = Object.entries(result.jobsByState).map(([state, n]) => `${n} ${state}`).join(', ');
        io.stdout(`deleted ${result.jobs} job${result.jobs === 1 ? '' : 's'}${states ? ` (${states})` : ''}, ${result.attempts} attempt${result.attempts === 1 ? '' : 's'}, ${result.events} event${result.events === 1 ? '' : 's'}: finished more than ${formatDuration(result.olderThanMs)} ago`);
      });
    });

  return program;
}

/**
 * Runs the command line with `argv` (without `node` and the script) and
 * returns the exit code; `serve` returns once listening and keeps the process alive.
 */
export async function runCli(argv: readonly string[], io: CliIo = defaultIo): Promise<number> {
  const program = createProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0) return 0;
      if (error.code === 'commander.help') return 0;
      io.stderr(`onejob: ${error.message.replace(/^error: /, '').split('\n')[0]}`);
      return USAGE_EXIT_CODE;
    }
    const { line, exitCode } = describeFailure(error);
    io.stderr(line.replace(/(postgres(ql)?:\/\/[^\s]*)/g, (url) => redact(url)));
    return exitCode;
  }
}
