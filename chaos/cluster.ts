/**
 * The chaos cluster on loopback: one PostgreSQL database of its own, two fake
 * providers (separate processes, scripted over HTTP), a TCP proxy in front of
 * each, API processes (`onejob serve --no-executor`) behind HAProxy (the
 * shipped deploy/haproxy.cfg: hashing on token + Idempotency-Key), and
 * executor processes (`onejob executor`).
 *
 * Every child runs in its own process group; the groups are recorded in a
 * file that a watchdog process (chaos/watchdog.mjs) reads, so nothing is left
 * behind even if the runner itself is killed. Only those groups are ever
 * signalled.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { doubtProviders, DOUBT_ROUTES, startDoubtFake, type DoubtEndpoint } from './doubt-cluster.ts';
import { ensureHaproxy, renderHaproxyConfig } from './haproxy.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { TOOL_EXECUTIONS_FILE, TOOL_SERVER } from './tool-records.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'onejob');

/** Tokens and owners of the cluster. */
export const API_KEYS: Readonly<Record<string, string>> = { tok_alice: 'alice', tok_bob: 'bob', tok_carol: 'carol', tok_mallory: 'mallory' };
/**
 * Routes the cluster serves; `hedged` allows a hedge after 1 s of silence;
 * `contract` has an output schema (CONTRACT §5: failover only to certified
 * providers, every output checked; §7: a stream of it is sent in one burst
 * after the check).
 */
export const ROUTES = {
  plain: { providers: ['p1', 'p2'] },
  hedged: { providers: ['p1', 'p2'], hedgeAfterMs: 1000 },
  contract: { providers: ['p1', 'p2'], contract: 'summary' },
} as const;
/** The contracts of {@link ROUTES}: the fakes' replies are `{"summary": …}` objects (chaos/fake-director.ts). */
export const CONTRACTS = {
  summary: {
    outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } },
    cases: [{ input: { messages: [{ role: 'user', content: `${'verify-case'}: summarize this text` }] } }],
    samples: 1,
  },
} as const;
/** The text of the contract's verification case: the fakes answer it by a rule, outside the workload's script. */
export const VERIFY_CASE_TEXT = 'verify-case';
/** An attempt's deadline (provider timeoutMs), and a stream's longest silence after its first output (idleTimeoutMs): past either the attempt is unknown. */
export const PROVIDER_TIMEOUT_MS = 2500;

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** Where logs, config and records go. */
  readonly dir: string;
  readonly apis: number;
  readonly executors: number;
  /** `--lease-ms` of the executors. */
  readonly leaseMs: number;
  /** Epoch ms after which the watchdog kills everything. */
  readonly hardDeadline: number;
  readonly log: (line: string) => void;
  /**
   * The server the run's database is created on and the API/executor
   * processes connect to (its URL with the new database's name), instead of
   * {@link adminUrl}: e.g. HAProxy in front of a Patroni cluster (`--ha`).
   */
  readonly databaseAdminUrl?: string | undefined;
  /**
   * How many of the API processes are `onejob serve` with its executor in
   * the same process (the others `--no-executor`): there a streaming request
   * whose attempt the local executor runs is relayed live (CONTRACT §7), and
   * a kill -9 takes an executor with it. Default 1. Its executor has the
   * executors' lease (`serve --lease-ms`).
   */
  readonly combinedApis?: number | undefined;
}

/** A child process that can be killed and started again under the same name and port. */
export class ManagedProcess {
  child: ChildProcess | null = null;
  restarts = 0;
  /** The log file's size when the current child started: its own lines come after. */
  logOffset = 0;
  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: readonly string[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly logFile: string,
    private readonly groups: ProcessGroups,
    /** Run the child as this OS user (uid, gid), e.g. `postgres` for Patroni. */
    private readonly user?: { readonly uid: number; readonly gid: number },
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): ChildProcess {
    const fd = openSync(this.logFile, 'a');
    this.logOffset = fstatSync(fd).size;
    const child = spawn(this.command, [...this.args], { detached: true, stdio: ['ignore', fd, fd], env: this.env, ...(this.user ?? {}) });
    closeSync(fd);
    this.child = child;
    if (child.pid !== undefined) this.groups.add(child.pid);
    child.on('exit', () => {
      if (child.pid !== undefined) this.groups.delete(child.pid);
    });
    return child;
  }

  /** What the current child wrote to its log so far. */
  ownLog(): string {
    return readFileSync(this.logFile).subarray(this.logOffset).toString('utf8');
  }

  signal(sig: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined || !this.running) return;
    try {
      process.kill(-pid, sig);
    } catch {
      // already gone
    }
  }

  /** SIGKILL and wait for the exit. */
  async kill9(): Promise<void> {
    const child = this.child;
    if (child === null || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.signal('SIGCONT');
    this.signal('SIGKILL');
    await Promise.race([exited, sleep(5000)]);
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    const child = this.child;
    if (child === null || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    await Promise.race([exited, sleep(graceMs)]);
    if (this.running) await this.kill9();
  }
}

/** The process groups this run started, mirrored into a file for the watchdog. */
export class ProcessGroups {
  readonly #groups = new Set<number>();
  constructor(readonly file: string) {
    writeFileSync(file, '');
  }
  add(pgid: number): void {
    this.#groups.add(pgid);
    this.#flush();
  }
  delete(pgid: number): void {
    this.#groups.delete(pgid);
    this.#flush();
  }
  #flush(): void {
    writeFileSync(this.file, [...this.#groups].join('\n'));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A free port for a server that is killed and started again on the same
 * port. It is taken below the kernel's ephemeral range (32768–60999 on
 * Linux), because a port from that range, left free while its process is
 * down, can be taken as the local port of any outgoing connection meanwhile
 * (the rig makes thousands), and the restart then fails with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  const tryPort = (port: number): Promise<boolean> =>
    new Promise((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await tryPort(port)) return port;
  }
  throw new Error('no free port found in 20000-31999');
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
  await res.body?.cancel();
  return res.ok;
}

/** The admin URL databases are created through. */
export function adminUrl(): string {
  return process.env.ONEJOB_CHAOS_ADMIN_URL ?? process.env.ONEJOB_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}

/** Makes sure a load balancer is installed: HAProxy (installed with apt-get when missing), else nginx. */
export function ensureLoadBalancer(log: (line: string) => void): 'haproxy' | 'nginx' {
  const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  if (ensureHaproxy(log)) return 'haproxy';
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (has('nginx')) {
    log('haproxy could not be installed; using nginx');
    return 'nginx';
  }
  spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'nginx-light'], { stdio: 'ignore', env, timeout: 300_000 });
  if (has('nginx')) return 'nginx';
  throw new Error('neither haproxy nor nginx is installed, and apt-get could not install them (run as root, or install haproxy)');
}

/** One fake provider process and the proxy in front of it. */
export interface FakeEndpoint {
  /** The provider name configured for it (`p1`, `p2`). */
  readonly name: string;
  /** The fake's own URL (control plane: /script, /calls, /release). */
  readonly url: string;
  readonly process: ManagedProcess;
  readonly proxy: TcpProxy;
}

/** A running cluster. */
export interface Cluster {
  readonly dir: string;
  readonly database: { readonly name: string; readonly url: string };
  /** The load balancer's URL: what clients use. */
  readonly url: string;
  /** `executor`: the process runs an executor too (`onejob serve` without `--no-executor`). */
  readonly apis: readonly (ManagedProcess & { port?: number; executor?: boolean })[];
  readonly apiUrls: readonly string[];
  readonly executors: readonly ManagedProcess[];
  readonly fakes: readonly FakeEndpoint[];
  /** The fake behind the providers with a lookup (chaos/doubt-cluster.ts). */
  readonly doubt: DoubtEndpoint;
  readonly loadBalancer: ManagedProcess;
  /**
   * The TCP proxy the API and executor processes reach PostgreSQL through
   * (the rig's own reads go around it): `setDown(true)` is a database outage
   * for onejob alone (chaos/database-outage.ts).
   */
  readonly databaseProxy: TcpProxy;
  /** Starts a killed process again and waits until it is ready. */
  restart(p: ManagedProcess): Promise<void>;
  /** `pg_ctlcluster … restart`; resolves when PostgreSQL accepts connections again. */
  restartPostgres(): Promise<void>;
  /** Stops every process, closes the proxies, drops the database (unless kept). */
  stop(keepDatabase?: boolean): Promise<void>;
}

/** Starts the whole cluster; on failure everything started so far is stopped. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const lb = ensureLoadBalancer(o.log);
  const groups = new ProcessGroups(join(o.dir, `pgids.${process.pid}`));
  const serverUrl = o.databaseAdminUrl ?? adminUrl();
  const watchdog = spawn(process.execPath, [join(ROOT, 'chaos', 'watchdog.mjs'), String(process.pid), groups.file, String(o.hardDeadline)], { detached: true, stdio: 'ignore' });
  watchdog.unref();

  const started: ManagedProcess[] = [];
  const proxies: TcpProxy[] = [];
  const dbName = `onejob_chaos_${randomBytes(5).toString('hex')}`;
  const dbUrl = new URL(serverUrl);
  dbUrl.pathname = `/${dbName}`;
  const admin = async (sql: string): Promise<void> => {
    const c = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 10_000 });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  const stopAll = async (keepDatabase = false): Promise<void> => {
    await Promise.all(started.map((p) => p.stop(3000)));
    await Promise.all(proxies.map((p) => p.close()));
    if (!keepDatabase) await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch((e: unknown) => o.log(`could not drop ${dbName}: ${String(e)}`));
    try {
      process.kill(watchdog.pid!, 'SIGTERM');
    } catch {
      // gone
    }
  };

  try {
    // Databases of earlier runs that were killed before they could drop theirs (nobody connected).
    const c = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 10_000 });
    await c.connect();
    try {
      const { rows } = await c.query<{ datname: string }>(
        `SELECT datname FROM pg_database d WHERE datname LIKE 'onejob\\_chaos\\_%' AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`);
      for (const { datname } of rows) await c.query(`DROP DATABASE IF EXISTS ${datname}`).catch(() => undefined);
    } finally {
      await c.end();
    }
    await admin(`CREATE DATABASE ${dbName}`);
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: dbUrl.toString(), LOG_LEVEL: 'warn' };
    delete env.ONEJOB_API_KEYS;
    delete env.ONEJOB_CONFIG;
    delete env.PORT;
    // The API and executor processes reach PostgreSQL through a proxy of their own, which an outage cuts.
    const databaseProxy = await startTcpProxy({ target: { host: dbUrl.hostname, port: Number(dbUrl.port || 5432) } });
    proxies.push(databaseProxy);
    const proxiedUrl = new URL(dbUrl);
    proxiedUrl.hostname = '127.0.0.1';
    proxiedUrl.port = String(databaseProxy.port);
    const appEnv: NodeJS.ProcessEnv = { ...env, DATABASE_URL: proxiedUrl.toString() };

    // Fake providers (own processes), each behind a TCP proxy.
    const fakes: FakeEndpoint[] = [];
    for (const name of ['p1', 'p2']) {
      const p = new ManagedProcess(`fake-${name}`, process.execPath, [BIN, 'fake-provider', '--port', '0'], env, join(o.dir, `fake-${name}.log`), groups);
      p.start();
      started.push(p);
      let url = '';
      await waitFor(`fake provider ${name}`, async () => {
        // The first stdout line is the URL (stdout and stderr share the log file).
        const first = p.ownLog().split('\n').find((l) => l.startsWith('http://'));
        if (first === undefined) return false;
        url = first.trim();
        return httpOk(`${url}/healthz`);
      }, 30_000);
      const port = Number(new URL(url).port);
      const proxy = await startTcpProxy({ target: { host: '127.0.0.1', port } });
      proxies.push(proxy);
      fakes.push({ name, url, process: p, proxy });
    }

    // The providers with a lookup (CONTRACT §11) and their routes, on a fake of their own.
    const doubt = await startDoubtFake({ dir: o.dir, env, groups, bin: BIN, port: await freePort(), waitFor, makeProcess: (...a) => new ManagedProcess(...a) });
    started.push(doubt.process);
    proxies.push(doubt.proxy);
    // The counting tool server behind /mcp (chaos/tool-server.ts): never faulted; it logs every execution.
    const tools = new ManagedProcess('tool-server', process.execPath, ['--import', 'tsx', join(ROOT, 'chaos', 'tool-server.ts'), '--log', join(o.dir, TOOL_EXECUTIONS_FILE)], env, join(o.dir, 'tool-server.log'), groups);
    tools.start();
    started.push(tools);
    let toolsUrl = '';
    await waitFor('the tool server', async () => {
      toolsUrl = tools.ownLog().split('\n').find((l) => l.startsWith('http://'))?.trim() ?? '';
      return toolsUrl !== '' && httpOk(`${toolsUrl}/healthz`);
    }, 30_000);

    const config = {
      mcpServers: { [TOOL_SERVER]: { url: `${toolsUrl}/mcp`, timeoutMs: PROVIDER_TIMEOUT_MS } },
      apiKeys: API_KEYS,
      providers: { ...Object.fromEntries(fakes.map((f) => [f.name, { type: 'openai', baseUrl: `http://127.0.0.1:${f.proxy.port}/v1`, model: `model-${f.name}`, timeoutMs: PROVIDER_TIMEOUT_MS, idleTimeoutMs: PROVIDER_TIMEOUT_MS }])), ...doubtProviders(doubt, PROVIDER_TIMEOUT_MS) },
      routes: { ...ROUTES, ...DOUBT_ROUTES },
      contracts: CONTRACTS,
    };
    const configFile = join(o.dir, 'onejob.config.json');
    writeFileSync(configFile, JSON.stringify(config, null, 2));

    // Migrate once, so the processes do not race on a fresh database.
    execFileSync(process.execPath, [BIN, 'migrate', '--config', configFile], { env, stdio: 'ignore', timeout: 60_000 });
    // Certify both fakes for the contract route (failover and hedges only go to certified providers):
    // the verification case is answered by a rule of its own, never by the workload's script.
    for (const f of fakes) {
      await fetch(`${f.url}/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rules: [{ match: { contains: VERIFY_CASE_TEXT }, behaviour: { reply: { summary: 'verified' } } }] }) });
    }
    // Not spawnSync: the TCP proxies in front of the fakes run in this process's event loop.
    const verify = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, 'verify', '--config', configFile, '--route', 'contract'], { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.on('error', reject);
      child.on('exit', (code) => resolve({ code, out }));
    });
    if (verify.code !== 0) throw new Error(`onejob verify --route contract failed (${verify.code}): ${verify.out.trim().split('\n').slice(-5).join(' | ')}`);

    const apis: (ManagedProcess & { port?: number; executor?: boolean })[] = [];
    const apiUrls: string[] = [];
    const combined = o.combinedApis ?? 1;
    for (let i = 1; i <= o.apis; i++) {
      const port = await freePort();
      const executor = i <= combined;
      const p = new ManagedProcess(`api-${i}`, process.execPath, [BIN, 'serve', ...(executor ? ['--lease-ms', String(o.leaseMs)] : ['--no-executor']), '--config', configFile, '--port', String(port), '--host', '127.0.0.1'], appEnv, join(o.dir, `api-${i}.log`), groups);
      p.start();
      started.push(p);
      apis.push(Object.assign(p, { port, executor }));
      apiUrls.push(`http://127.0.0.1:${port}`);
    }
    const executors: ManagedProcess[] = [];
    for (let i = 1; i <= o.executors; i++) {
      const p = new ManagedProcess(`executor-${i}`, process.execPath, [BIN, 'executor', '--config', configFile, '--lease-ms', String(o.leaseMs), '--concurrency', '64'], { ...appEnv, LOG_LEVEL: 'info' }, join(o.dir, `executor-${i}.log`), groups);
      p.start();
      started.push(p);
      executors.push(p);
    }
    const ready = async (p: ManagedProcess): Promise<void> => {
      const i = apis.indexOf(p as ManagedProcess & { port?: number });
      // A process that exits while starting ends the wait at once.
      if (i >= 0) await waitFor(`${p.name} ready`, async () => !p.running || (await httpOk(`${apiUrls[i]}/readyz`)), 60_000);
      else if (executors.includes(p)) await waitFor(`${p.name} ready`, async () => !p.running || p.ownLog().includes('executor ready'), 60_000);
      if (!p.running) throw new Error(`${p.name} exited while starting: ${p.ownLog().trim().split('\n').at(-1)?.slice(0, 300) ?? ''}`);
    };
    await Promise.all([...apis, ...executors].map(ready));

    // The load balancer over the API processes.
    const lbPort = await freePort();
    let loadBalancer: ManagedProcess;
    if (lb === 'haproxy') {
      const cfg = join(o.dir, 'haproxy.cfg');
      // The shipped deploy/haproxy.cfg (hash on token + Idempotency-Key, /readyz checks), with
      // this cluster's ports and shorter check timings so a killed process is noticed quickly.
      writeFileSync(cfg, renderHaproxyConfig({
        bind: `127.0.0.1:${lbPort}`,
        servers: apis.map((a, i) => ({ name: `api${i + 1}`, address: `127.0.0.1:${a.port}` })),
        defaultServer: 'inter 500 fall 2 rise 1',
      }));
      loadBalancer = new ManagedProcess('haproxy', 'haproxy', ['-db', '-f', cfg], process.env, join(o.dir, 'haproxy.log'), groups);
    } else {
      // The fallback when HAProxy cannot be installed: the same affinity (token + key), without /readyz checks.
      const cfg = join(o.dir, 'nginx.conf');
      writeFileSync(cfg, [
        'daemon off;', 'worker_processes 1;', `pid ${join(o.dir, 'nginx.pid')};`, `error_log ${join(o.dir, 'nginx-error.log')};`,
        'events { worker_connections 1024; }',
        'http {', `  access_log off; client_body_temp_path ${o.dir};`,
        `  upstream api { hash $http_authorization$http_x_api_key$http_idempotency_key consistent; ${apis.map((a) => `server 127.0.0.1:${a.port} max_fails=1 fail_timeout=1s;`).join(' ')} }`,
        `  server { listen 127.0.0.1:${lbPort}; client_max_body_size 4m; location / { proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_read_timeout 75s; proxy_next_upstream error; } }`,
        '}', '',
      ].join('\n'));
      loadBalancer = new ManagedProcess('nginx', 'nginx', ['-c', cfg], process.env, join(o.dir, 'nginx.log'), groups);
    }
    loadBalancer.start();
    started.push(loadBalancer);
    const url = `http://127.0.0.1:${lbPort}`;
    await waitFor('load balancer', () => httpOk(`${url}/readyz`), 30_000);
    doubt.relay.setTarget(url); // the doubt fake's task callbacks reach onejob from now on (chaos/callback-replayer.ts)
    o.log(`cluster up: ${lb} ${url} → ${apiUrls.join(', ')} (${combined} with an executor in-process); ${executors.length} executors (lease ${o.leaseMs} ms); fakes ${fakes.map((f) => `${f.name} ${f.url} via :${f.proxy.port}`).join(', ')}; database ${dbName}`);

    const pgCluster = (process.env.CHAOS_PG_CLUSTER ?? '15 main').split(/\s+/);
  const restarting = new Map<ManagedProcess, Promise<void>>();
  async function restartOnce(p: ManagedProcess): Promise<void> {
    if (p.running) return;
    p.restarts++;
    // Like a supervisor: a process that exits while starting (onejob exits when its database
    // is unreachable at start, e.g. during a failover) is started again, for up to 2 minutes.
    const deadline = Date.now() + 120_000;
    for (;;) {
      p.start();
      try {
        await ready(p);
        return;
      } catch (e) {
        if (p.running || Date.now() > deadline) throw e;
      }
      await sleep(1000);
    }
  }
  return {
    dir: o.dir,
      database: { name: dbName, url: dbUrl.toString() },
      url,
      apis,
      apiUrls,
      executors,
      fakes,
      doubt,
      loadBalancer,
      databaseProxy,
      restart(p) {
        // One restart per process at a time: a second caller (a fault's own restart while the
        // supervisor loop below is still retrying) joins it instead of starting a second child,
        // which would be orphaned holding the port (seen: "api-2 is gone after fuzzing").
        const pending = restarting.get(p);
        if (pending) return pending;
        const run = restartOnce(p).finally(() => restarting.delete(p));
        restarting.set(p, run);
        return run;
      },
      async restartPostgres() {
        await new Promise<void>((resolve, reject) => {
          const c = spawn('pg_ctlcluster', ['--skip-systemctl-redirect', ...pgCluster, 'restart'], { stdio: 'ignore' });
          c.on('error', reject);
          c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_ctlcluster restart exited with ${code}`))));
        });
        await waitFor('PostgreSQL back', async () => {
          const c = new pg.Client({ connectionString: dbUrl.toString(), connectionTimeoutMillis: 1000 });
          await c.connect();
          await c.end();
          return true;
        }, 60_000);
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** Reads a process's resident set size in bytes (Linux), or null. */
export function rssBytes(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) * 1024;
  } catch {
    return null;
  }
}
