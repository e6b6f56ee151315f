/**
 * The `onejob` command line (CONTRACT §6): serve, migrate, jobs list|show,
 * attempts resolve. Every command takes `--config` and honours
 * `DATABASE_URL`; failures print one line `onejob: <reason>` on stderr and
 * exit non-zero (see `cli-errors.ts`).
 *
 * Run through `bin/onejob`, which registers tsx so no build is needed.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { loadConfig, type OnejobConfig } from '../config/config.ts';
import { OnejobError } from '../core/errors.ts';
import { JOB_STATES, type JobState } from '../core/states.ts';
import type { RecordedError } from '../core/types.ts';
import { attemptBody, jobBody } from '../http/api-bodies.ts';
import { resolutionError } from '../http/routes/attempt-routes.ts';
import { openStore, redact } from '../store/open-store.ts';
import type { AttemptOutcome, Store } from '../store/store.ts';
import { CliFailure, USAGE_EXIT_CODE, describeFailure } from './cli-errors.ts';
import { DEMO_TOKEN, demoBanner, isUnconfigured, withDemo } from './demo-config.ts';
import { runExecutorProcess, runServe } from './serve-command.ts';
import { runFakeProviderCli } from '../providers/fake/fake-provider-cli.ts';
import { runVerifyCommand } from '../contracts/verify-command.ts';
import { attemptTable, describeJob, table } from './cli-output.ts';

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

/** Loads the config and opens the store; the caller closes it. */
async function open(io: CliIo, configPath: string | undefined, requireSecrets: boolean): Promise<{ config: OnejobConfig; store: Store }> {
  const config = loadConfig({ argvConfigPath: configPath, env: io.env, requireSecrets });
  const store = await openStore(config.databaseUrl);
  return { config, store };
}

async function withStore<T>(io: CliIo, configPath: string | undefined, fn: (store: Store) => Promise<T>): Promise<T> {
  const { store } = await open(io, configPath, false);
  try {
    // Fail early, with the database's own reason, when it is unreachable or not migrated.
    const ready = await store.readiness();
    if (!ready.ok) {
      const reason = ready.error ?? `migrations pending (${ready.pendingMigrations.join(', ')}); run: onejob migrate`;
      throw new OnejobError('database_unavailable', reason);
    }
    return await fn(store);
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
  PORT             HTTP port of serve (default 8080)
  ONEJOB_API_KEYS  token=owner,token=owner
On failure a command prints one line "onejob: <reason>" on stderr and exits
non-zero: 2 bad input or config, 3 database unavailable, 4 not found,
5 conflict, 1 unexpected.

Examples:
  $ onejob migrate
  $ DATABASE_URL=postgres://localhost/onejob onejob serve --port 8080
  $ onejob jobs list --owner alice --state unknown
  $ onejob attempts resolve att_0193… --owner alice --state failed`,
    );

  program
    .command('serve')
    .description('Run the HTTP API and an executor in one process (migrates the database first).')
    .addOption(configOption())
    .option('-p, --port <n>', 'port to listen on (default: $PORT, else the config, else 8080)', integer('--port', 0, 65535))
    .option('--host <address>', 'address to listen on (default: the config, else 0.0.0.0)')
    .option('--no-executor', 'serve the API only; run `onejob executor` processes against the same database')
    .addHelpText(
      'after',
      `
With no config file and no providers configured, serve runs a demo: route
"demo" on two embedded fake providers, token "demo-token" (owner demo), and
prints curl commands that show a job, a timeout becoming unknown, a resolve
and a failover.

SIGTERM or SIGINT stops accepting connections, finishes in-flight requests
(long-polls answer at once), lets the executor finish or leave its attempts
unknown, and closes the database.

Examples:
  $ onejob serve --config onejob.config.json
  $ PORT=9000 ONEJOB_API_KEYS=tok_alice=alice onejob serve --no-executor`,
    )
    .action(async (opts: { config?: string; port?: number; host?: string; executor: boolean }) => {
      const loaded = await open(io, opts.config ?? program.opts().config, true);
      const demo = isUnconfigured(loaded.config);
      const config = demo ? withDemo(loaded.config) : loaded.config;
      const logger = pino({ level: io.env.LOG_LEVEL ?? 'info', base: { service: 'onejob' } });
      const token = Object.keys(config.apiKeys)[0] ?? DEMO_TOKEN;
      await runServe({
        config, store: loaded.store, logger, executor: opts.executor,
        port: opts.port ?? config.port, host: opts.host ?? config.host,
        banner: demo ? (url) => demoBanner(url, token) : undefined,
      });
    });

  program
    .command('executor')
    .description('Run executors only (no HTTP): they claim attempts from the database and call providers.')
    .addOption(configOption())
    .option('-n, --count <n>', 'executors in this process', integer('--count', 1, 64), 1)
    .option('--concurrency <n>', 'attempts in flight per executor (default 64)', integer('--concurrency', 1, 10_000))
    .option('--lease-ms <ms>', 'lease length; an executor silent this long is presumed dead (default 30000)', integer('--lease-ms', 100, 3_600_000))
    .addHelpText(
      'after',
      `
Run as many executor processes as you like against one database: claims use
leases (PostgreSQL: FOR UPDATE SKIP LOCKED), and every write is fenced by the
lease, so a paused executor cannot change a job it no longer owns.

Examples:
  $ DATABASE_URL=postgres://localhost/onejob onejob executor --config onejob.config.json
  $ onejob executor --count 2 --concurrency 32`,
    )
    .action(async (opts: { config?: string; count: number; concurrency?: number; leaseMs?: number }) => {
      const { config, store } = await open(io, opts.config ?? program.opts().config, true);
      const logger = pino({ level: io.env.LOG_LEVEL ?? 'info', base: { service: 'onejob-executor' } });
      await runExecutorProcess({ config, store, logger, count: opts.count, concurrency: opts.concurrency, leaseMs: opts.leaseMs });
    });

  program
    .command('fake-provider')
    .description('Run a fake provider (OpenAI and Anthropic wire protocols) for tests and demos.')
    .allowUnknownOption(true)
    .helpOption(false)
    .argument('[args...]', 'fake-provider options: --port N --host H --script FILE --api-key KEY (--help for more)')
    .action(async (args: string[]) => {
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
    .description("Read jobs straight from the database (admin: you name the owner with --owner; no API token is used).");

  jobs
    .command('list')
    .description("List an owner's jobs, newest first.")
    .addOption(configOption())
    .requiredOption('-o, --owner <owner>', 'the owner whose jobs to list (the CLI acts as an admin)')
    .addOption(new Option('-s, --state <state>', 'only jobs in this state').choices(JOB_STATES))
    .option('-n, --limit <n>', 'at most this many jobs (1–200)', integer('--limit', 1, 200), 50)
    .option('--cursor <cursor>', 'continue after a previous page (its next_cursor)')
    .option('--json', 'print {"data": [jobs], "next_cursor"} as the HTTP API does')
    .addHelpText('after', '\nExamples:\n  $ onejob jobs list --owner alice\n  $ onejob jobs list --owner alice --state unknown --json')
    .action(async (opts: { config?: string; owner: string; state?: JobState; limit: number; cursor?: string; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store) => {
        const page = await store.listJobs({ ownerId: opts.owner, state: opts.state, limit: opts.limit, cursor: opts.cursor });
        const bodies = page.jobs.map(jobBody);
        if (opts.json) {
          io.stdout(JSON.stringify({ data: bodies, next_cursor: page.nextCursor }, null, 2));
          return;
        }
        if (bodies.length === 0) {
          io.stdout('no jobs');
          return;
        }
        io.stdout(table(['JOB', 'STATE', 'ROUTE', 'ATTEMPTS', 'CREATED', 'KEY'], bodies.map((j) => [j.id, j.state, j.route, String(j.attempts.length), j.created_at, j.idempotency_key])));
        if (page.nextCursor !== null) io.stdout(`more: --cursor ${page.nextCursor}`);
      });
    });

  jobs
    .command('show')
    .description('Show one job with its attempts.')
    .argument('<id>', 'job id (job_…)')
    .addOption(configOption())
    .requiredOption('-o, --owner <owner>', "the job's owner (the CLI acts as an admin)")
    .option('--json', 'print the job as the HTTP API does')
    .addHelpText('after', '\nExamples:\n  $ onejob jobs show job_0193… --owner alice\n  $ onejob jobs show job_0193… --owner alice --json | jq .state')
    .action(async (id: string, opts: { config?: string; owner: string; json?: boolean }) => {
      await withStore(io, opts.config ?? program.opts().config, async (store) => {
        const job = await store.getJob(opts.owner, id);
        if (job === null) throw new OnejobError('job_not_found', `no job ${id} for owner ${opts.owner}`);
        io.stdout(opts.json ? JSON.stringify(jobBody(job), null, 2) : describeJob(jobBody(job)));
      });
    });

  const attempts = program.command('attempts').description('Act on attempts (admin: you name the owner with --owner).');

  attempts
    .command('resolve')
    .description('Resolve an attempt explicitly: the way out of doubt (starting, running or unknown).')
    .argument('<id>', 'attempt id (att_…)')
    .addOption(configOption())
    .requiredOption('-o, --owner <owner>', "the attempt's owner (the CLI acts as an admin)")
    .addOption(new Option('--state <state>', 'the definite outcome').choices(['succeeded', 'failed', 'cancelled']).makeOptionMandatory())
    .option('--result <json>', "with --state succeeded: the output (becomes the job's result exactly as given)", json('--result'))
    .option('--error <json>', 'with --state failed|cancelled: what went wrong ({"code","message"} or any JSON)', json('--error'))
    .option('--json', 'print the attempt and its job as the HTTP API does')
    .addHelpText(
      'after',
      `
A success goes through the job's compare-and-swap: if another attempt already
won, the attempt becomes superseded and the job's result is unchanged. After
failed or cancelled the job moves on to the next provider of its chain.

Examples:
  $ onejob attempts resolve att_0193… --owner alice --state succeeded --result '{"summary":"…"}'
  $ onejob attempts resolve att_0193… --owner alice --state failed --error '{"code":"refused","message":"checked the dashboard"}'`,
    )
    .action(async (id: string, opts: { config?: string; owner: string; state: 'succeeded' | 'failed' | 'cancelled'; result?: unknown; error?: unknown; json?: boolean }) => {
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
      await withStore(io, opts.config ?? program.opts().config, async (store) => {
        const settled = await store.settleAttempt({ ownerId: opts.owner, attemptId: id, outcome, actor: 'cli' });
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
