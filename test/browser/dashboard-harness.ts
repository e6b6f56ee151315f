/**
 * A real `bin/onejob serve` for the dashboard's browser tests and
 * screenshots: a temp SQLite database, embedded fake providers with pricing
 * (the primary hangs on "hang", fails on "fail", answers slowly on "slow"),
 * a plain, a hedged and a contract route, certifications recorded by a real
 * `onejob verify`, and jobs made over the HTTP API as an application would,
 * except the hedge race whose superseded loser has a cost: over HTTP the
 * loser is aborted as soon as the hedge wins, so it is seeded through the
 * store before the server starts ({@link seedHedgeRace}).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { meterUsage } from '../../src/core/usage.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = join(ROOT, 'bin/onejob');
export const CHROMIUM = '/usr/bin/chromium';
export const ALICE_TOKEN = 'tok_dashboard_alice';
export const BOB_TOKEN = 'tok_dashboard_bob';

/** Chromium flags for a quiet, sandbox-free headless run (CI runs as root). */
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

const SUMMARY = { summary: 'Three attempts, one result: the loser still cost money.' };

/**
 * The config the server runs with. `taskServiceUrl`: a fake task service (a
 * provider with a lookup, CONTRACT §11) behind route `render`; its renders
 * run for an hour, so an attempt on it goes into doubt after its 800 ms and
 * stays there, asked by the reconciler.
 */
export function dashboardConfig(dbPath: string, taskServiceUrl?: string): Record<string, unknown> {
  const usage = (p: number, c: number) => ({ prompt_tokens: p, completion_tokens: c });
  return {
    database: `sqlite:${dbPath}`,
    apiKeys: { [ALICE_TOKEN]: 'alice', [BOB_TOKEN]: 'bob' },
    providers: {
      primary: {
        type: 'fake', protocol: 'openai', model: 'fast-primary-1', timeoutMs: 1500,
        pricing: { inputPerMTok: 2.5, outputPerMTok: 10 },
        script: {
          rules: [
            { match: { contains: 'hang' }, behaviour: { hang: true } },
            { match: { contains: 'fail' }, behaviour: { status: 503 } },
            { match: { contains: 'slow' }, behaviour: { delayMs: 900, reply: 'the slow primary answer', usage: usage(1800, 600) } },
            { match: { contains: 'summarize' }, behaviour: { reply: SUMMARY, usage: usage(420, 60) } },
          ],
          default: { delayMs: 150, usage: usage(1200, 350) },
        },
      },
      fallback: {
        type: 'fake', protocol: 'anthropic', model: 'steady-fallback-2', timeoutMs: 3000,
        pricing: { inputPerMTok: 3, outputPerMTok: 15 },
        script: {
          rules: [{ match: { contains: 'summarize' }, behaviour: { reply: SUMMARY, usage: usage(430, 62) } }],
          default: { delayMs: 100, usage: usage(1100, 300) },
        },
      },
      budget: {
        type: 'fake', protocol: 'openai', model: 'budget-0', timeoutMs: 3000,
        script: { default: { reply: 'Sure! Here is a summary, not JSON.', usage: usage(400, 40) } },
      },
      ...(taskServiceUrl ? { renderer: { type: 'task', baseUrl: `${taskServiceUrl}/v1/tasks`, model: 'render-1', timeoutMs: 800, pollIntervalMs: 200 } } : {}),
    },
    routes: {
      demo: { providers: ['primary', 'fallback'] },
      hedged: { providers: ['primary', 'fallback'], hedgeAfterMs: 300 },
      summary: { providers: ['primary', 'fallback', 'budget'], contract: 'summary' },
      ...(taskServiceUrl ? { render: { providers: ['renderer'] } } : {}),
    },
    // Bob has a day budget (CONTRACT §16): the Spend page shows it as a bar (alice has none, so her unpriced provider stays eligible).
    limits: { owners: { bob: { spendUsd: { day: 5 }, concurrency: 8 } } },
    // A tool server behind /mcp (CONTRACT §14): the example payments server as a stdio child.
    mcpServers: { pay: { command: [process.execPath, '--import', 'tsx', 'examples/mcp/payments-server.ts'], cwd: ROOT, timeoutMs: 10_000 } },
    contracts: {
      summary: {
        outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } }, additionalProperties: false },
        cases: [{ input: { messages: [{ role: 'user', content: 'Please summarize the incident report.' }] } }],
      },
    },
  };
}

/** The idempotency key of the seeded hedge race ({@link seedHedgeRace}). */
export const HEDGE_RACE_KEY = 'search-2001';

/**
 * Writes, through the store (the same calls and in the order the executor
 * makes them), a hedged job whose primary answered just as the hedge won: the
 * hedge (fallback, 1100 + 300 tokens) wins the compare-and-swap, then the
 * primary's answer (1800 + 600 tokens), already received when the abort
 * reached it, is superseded and keeps its usage and cost (CONTRACT §8).
 * Over HTTP this is a race (a loser is aborted as soon as the job is decided,
 * and one aborted before it answered has no usage); seeded, it is the same
 * every run. Returns the job's id.
 */
export async function seedHedgeRace(dbPath: string, config: Record<string, any>): Promise<string> {
  const store = await openStore(`sqlite:${dbPath}`);
  try {
    await store.migrate();
    const input = { messages: [{ role: 'user', content: 'slow answer please' }] };
    const { job } = await store.createJob({ ownerId: 'alice', idempotencyKey: HEDGE_RACE_KEY, route: 'hedged', input, providers: ['primary', 'fallback'] });
    const lease = { leaseOwner: 'exe_seed', leaseMs: 60_000 };
    const [claimed] = await store.claimWork({ ...lease, limit: 1 });
    if (!claimed || claimed.job.id !== job.id) throw new Error('seed: the hedged job was not claimed');
    const primary = claimed.attempt;
    await store.markRunning({ ownerId: 'alice', attemptId: primary.id, leaseOwner: lease.leaseOwner, leaseToken: primary.leaseToken!, timeoutMs: 1500 });
    await new Promise((r) => setTimeout(r, 320)); // the route's hedgeAfterMs of silence
    const hedge = await store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'hedge', hedgeAfterMs: 300, lease });
    const completion = (provider: string, model: string, content: string, p: number, c: number) => ({
      content, finish_reason: 'stop', model, provider, tool_calls: null,
      usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c },
    });
    const settle = (attempt: typeof primary, result: ReturnType<typeof completion>) =>
      store.settleAttempt({
        ownerId: 'alice', attemptId: attempt.id, actor: `executor:${lease.leaseOwner}`,
        fence: { leaseOwner: lease.leaseOwner, leaseToken: attempt.leaseToken! },
        outcome: { state: 'succeeded', result, ...meterUsage(result.usage, config.providers[result.provider].pricing) },
      });
    const won = await settle(hedge, completion('fallback', 'steady-fallback-2', 'the hedge answer', 1100, 300));
    const lost = await settle(primary, completion('primary', 'fast-primary-1', 'the slow primary answer', 1800, 600));
    if (!won.won || lost.won || lost.attempt.state !== 'superseded') throw new Error('seed: the hedge race did not end as intended');
    return job.id;
  } finally {
    await store.close();
  }
}

/** A free TCP port on 127.0.0.1. */
async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => done(port));
    });
  });
}

/** A running server. */
export interface DashboardServer {
  readonly url: string;
  /** The id of the seeded hedge race ({@link seedHedgeRace}). */
  readonly hedgeRaceJobId: string;
  readonly dir: string;
  /** The fake task service behind route `render`. */
  readonly tasks: FakeProvider;
  /** Calls the API as `token` (default Alice's). */
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>, token?: string): Promise<{ status: number; body: any }>;
  /** Creates a job on `route` whose user message is `text`. */
  createJob(key: string, route: string, text: string, token?: string): Promise<any>;
  /** Waits until the job is terminal or unknown (long-poll). */
  settle(id: string, token?: string): Promise<any>;
  close(): Promise<void>;
}

/** Builds the dashboard into web/dist when it is not built yet (CI builds it at install). */
export function ensureDashboardBuilt(): void {
  if (existsSync(join(ROOT, 'web/dist/index.html'))) return;
  execFileSync('npm', ['run', 'build:web'], { cwd: ROOT, stdio: 'inherit' });
}

/** A `bin/onejob serve` child, listening and ready. */
interface Served {
  readonly url: string;
  readonly child: ChildProcess;
}

/** Spawns `bin/onejob serve <args>` in `dir` on a free loopback port and waits until `/readyz` answers. */
async function serve(dir: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<Served> {
  const port = await freePort();
  const child: ChildProcess = spawn(BIN, ['serve', ...args, '--port', String(port), '--host', '127.0.0.1'], { env, cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`onejob serve did not become ready: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, child };
}

/** Stops a served child: SIGTERM, then SIGKILL after 15 s. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

/** The demo as a new user starts it: `bin/onejob serve` with no config at all, in an empty folder (src/cli/demo-config.ts). */
export async function startDemoServer(): Promise<{ url: string; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-demo-'));
  const env = { PATH: process.env.PATH ?? '', HOME: dir };
  const { url, child } = await serve(dir, [], env);
  return {
    url,
    async close() {
      await stop(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts `bin/onejob serve` on a free port with {@link dashboardConfig}, after a real `onejob verify`. */
export async function startDashboardServer(): Promise<DashboardServer> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-dashboard-'));
  const configPath = join(dir, 'onejob.config.json');
  // A task service with a lookup, whose renders outlast their attempt's deadline: doubt that onejob asks about.
  const tasks = await startFakeProvider({ script: { default: { task: { runMs: 3_600_000, output: { url: 'https://cdn.example/render.png' } } } } });
  const config = dashboardConfig(join(dir, 'onejob.db'), tasks.url);
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  // Certifications for real: primary and fallback pass the contract, budget fails it (exit 1 is expected).
  await new Promise<void>((done) => execFile(BIN, ['verify', '--config', configPath], { env, cwd: dir, timeout: 60_000 }, () => done()));
  const hedgeRaceJobId = await seedHedgeRace(join(dir, 'onejob.db'), config);
  let served: Served;
  try {
    served = await serve(dir, ['--config', configPath], env);
  } catch (e) {
    await tasks.close();
    throw e;
  }
  const { url, child } = served;
  const api: DashboardServer['api'] = async (method, path, body, headers = {}, token = ALICE_TOKEN) => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  return {
    url,
    hedgeRaceJobId,
    dir,
    tasks,
    api,
    async createJob(key, route, text, token) {
      const res = await api('POST', '/v1/jobs', { route, input: { messages: [{ role: 'user', content: text }] } }, { 'idempotency-key': key }, token);
      if (res.status !== 201) throw new Error(`create ${key}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async settle(id, token) {
      for (let i = 0; i < 20; i++) {
        const res = await api('GET', `/v1/jobs/${id}?wait=5`, undefined, {}, token);
        if (['succeeded', 'failed', 'cancelled', 'unknown'].includes(res.body.state)) return res.body;
      }
      throw new Error(`job ${id} did not settle`);
    },
    async close() {
      await stop(child);
      await tasks.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
