/**
 * A highly available PostgreSQL for `npm run chaos -- --ha`, entirely on
 * loopback and entirely separate from the shared server at 5432: one etcd,
 * three PostgreSQL 15 nodes managed by Patroni (`synchronous_mode: true`),
 * and HAProxy in front, sending connections to whichever node Patroni's REST
 * API says is the primary (`GET /primary` answers 200 only on the leader).
 *
 * ```text
 *  onejob processes ──► HAProxy :P ──► tcp-proxy ──► PostgreSQL n1 (Patroni REST n1 checked by HAProxy)
 *                                  ├─► tcp-proxy ──► PostgreSQL n2
 *                                  └─► tcp-proxy ──► PostgreSQL n3
 *  Patroni n1/n2/n3 ──► tcp-proxy (one per node) ──► etcd
 * ```
 *
 * The proxies (in a process of their own, chaos/proxy-host.ts) exist to stall one node's network: its clients' connections
 * and its Patroni's link to etcd (so its Patroni cannot renew the leader key
 * and demotes itself, as it would behind a real partition). Replication
 * between the nodes goes direct.
 *
 * Timing: `ttl 15 s, loop_wait 2 s, retry_timeout 6 s` (Patroni requires
 * ttl ≥ loop_wait + 2 × retry_timeout) and `master_start_timeout 0` (a
 * crashed primary fails over at once instead of being restarted in place
 * for up to 5 minutes), so a failover takes at most about ttl + loop_wait.
 * 10/2/4 lost the leader key without any fault on this 2-core machine under
 * load: Patroni's etcd reads time out after retry_timeout / 3 = 1.3 s.
 *
 * Everything lives in one temp dir, on tmpfs (/dev/shm) when there is one
 * (fsyncs of etcd and PostgreSQL cost nothing there; the faults kill
 * processes, never the machine, so durability across a process crash is
 * unchanged), and runs as the `postgres` OS user when
 * this process is root (PostgreSQL refuses root). Every process group,
 * Patroni's and each postmaster's (Patroni starts PostgreSQL in a session of
 * its own), is registered with a watchdog (chaos/watchdog.mjs), so nothing is
 * left behind even if the runner is killed.
 */
import { execFileSync, fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, ManagedProcess, ProcessGroups, sleep, waitFor } from './cluster.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PG_BIN = process.env.CHAOS_PG_BIN ?? '/usr/lib/postgresql/15/bin';

/** Patroni's timing (seconds); see the module comment and docs/reliability.md. */
export const PATRONI_TIMING = { ttl: 15, loop_wait: 2, retry_timeout: 6, master_start_timeout: 0 } as const;

/** One Patroni-managed PostgreSQL node. */
export interface PatroniNode {
  readonly name: string;
  readonly pgPort: number;
  readonly restPort: number;
  readonly dataDir: string;
  readonly patroni: ManagedProcess;
  /** The proxy between HAProxy and this node's PostgreSQL (in chaos/proxy-host.ts). */
  readonly pgProxyPort: number;
  /** The proxy between this node's Patroni and etcd. */
  readonly etcdProxyPort: number;
}

/** The proxies' process (chaos/proxy-host.ts), driven over IPC. */
class ProxyHost {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, (m: { error?: string; ports?: Record<string, number> }) => void>();
  #seq = 0;

  constructor(groups: ProcessGroups) {
    this.#child = fork(join(ROOT, 'chaos', 'proxy-host.ts'), [], { detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const pid = this.#child.pid;
    if (pid !== undefined) {
      groups.add(pid);
      this.#child.on('exit', () => groups.delete(pid));
    }
    this.#child.on('message', (m: { id: number; error?: string; ports?: Record<string, number> }) => {
      this.#waiting.get(m.id)?.(m);
      this.#waiting.delete(m.id);
    });
  }

  async #ask(m: Record<string, unknown>, timeoutMs = 10_000): Promise<Record<string, number>> {
    const id = ++this.#seq;
    const reply = await new Promise<{ error?: string; ports?: Record<string, number> }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`proxy host: no answer to ${String(m.op)}`)), timeoutMs);
      this.#waiting.set(id, (r) => (clearTimeout(timer), resolve(r)));
      this.#child.send({ ...m, id });
    });
    if (reply.error !== undefined) throw new Error(`proxy host: ${reply.error}`);
    return reply.ports ?? {};
  }

  /** One proxy per name, in front of 127.0.0.1:port; answers each proxy's own port. */
  start(targets: Record<string, number>): Promise<Record<string, number>> {
    return this.#ask({ op: 'start', targets });
  }

  async stall(name: string, on: boolean): Promise<void> {
    await this.#ask({ op: 'stall', name, on });
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null || !this.#child.connected) return;
    const exited = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()));
    await this.#ask({ op: 'close' }, 3000).catch(() => this.#child.kill('SIGKILL'));
    await Promise.race([exited, sleep(3000)]);
  }
}

/** A member as Patroni's `GET /cluster` lists it. */
export interface PatroniMember {
  readonly name: string;
  readonly role: string;
  readonly state: string;
  readonly timeline?: number;
  readonly lag?: number | string;
}

/** A running Patroni cluster. */
export interface PatroniCluster {
  readonly dir: string;
  /** `postgres://postgres@127.0.0.1:<haproxy>/postgres`: writes reach the leader. */
  readonly url: string;
  readonly nodes: readonly PatroniNode[];
  /** The members, as the first node that answers (and is not stalled) sees them. */
  members(): Promise<PatroniMember[]>;
  /** The node holding the leader key, or null. */
  leader(): Promise<PatroniNode | null>;
  /** Resolves when there is a leader, two replicas running with a known lag, and a synchronous standby. */
  waitHealthy(timeoutMs: number): Promise<void>;
  /** `kill -9` of the node's whole PostgreSQL (postmaster and backends); returns the pid killed. */
  killPostgres(node: PatroniNode): number | null;
  /** A planned switchover away from `leader` through Patroni's REST API; resolves with Patroni's answer. */
  switchover(leader: PatroniNode): Promise<string>;
  /** Stalls (or un-stalls) every connection to the node's PostgreSQL and its Patroni's link to etcd. */
  stall(node: PatroniNode, on: boolean): Promise<void>;
  /** Whether the node is stalled now. */
  stalled(node: PatroniNode): boolean;
  /** Stops everything and removes the temp dir (unless `keep`). */
  stop(keep?: boolean): Promise<void>;
}

/** Options of {@link startPatroniCluster}. */
export interface PatroniClusterOptions {
  /** The run directory: logs go there (data lives in a temp dir). */
  readonly runDir: string;
  readonly hardDeadline: number;
  readonly log: (line: string) => void;
  /** How long to wait for the cluster to come up. Default 240 s (initdb and two base backups on a busy machine). */
  readonly startTimeoutMs?: number;
}

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

/** Installs `patroni`, `etcd-server`, `haproxy` with apt-get when one is missing (needs root). */
export function ensurePatroniPackages(log: (line: string) => void): void {
  const missing = [['patroni', 'patroni'], ['etcd', 'etcd-server'], ['haproxy', 'haproxy']].filter(([cmd]) => !has(cmd!)).map(([, pkg]) => pkg!);
  if (!existsSync(join(PG_BIN, 'postgres'))) missing.push('postgresql-15');
  if (missing.length === 0) return;
  log(`installing ${missing.join(', ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update'], { stdio: 'ignore', env, timeout: 300_000 });
  spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing, 'python3-etcd'], { stdio: 'ignore', env, timeout: 600_000 });
  const still = ['patroni', 'etcd', 'haproxy'].filter((c) => !has(c));
  if (still.length > 0) throw new Error(`could not install ${still.join(', ')} (apt-get needs root): install patroni, etcd-server and haproxy`);
}

/** uid/gid of the `postgres` user when we are root (PostgreSQL refuses to run as root), else undefined. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

function chownTree(path: string, user: { uid: number; gid: number } | undefined): void {
  if (user === undefined) return;
  chownSync(path, user.uid, user.gid);
  if (statSync(path).isDirectory()) for (const e of readdirSync(path)) chownTree(join(path, e), user);
}

async function getJson(url: string, timeoutMs = 1500): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // plain text
  }
  return { status: res.status, body };
}

/** The postmaster's pid from `postmaster.pid`, if that process is a running postgres. */
function postmasterPid(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (!Number.isInteger(pid) || pid <= 1) return null;
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmd.includes('postgres') ? pid : null;
  } catch {
    return null;
  }
}

/** Starts etcd, three Patroni nodes and HAProxy; on failure stops what it started. */
export async function startPatroniCluster(o: PatroniClusterOptions): Promise<PatroniCluster> {
  ensurePatroniPackages(o.log);
  const user = postgresUser();
  const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'onejob-ha-'));
  const groups = new ProcessGroups(join(o.runDir, `ha-pgids.${process.pid}`));
  const watchdog = spawn(process.execPath, [join(ROOT, 'chaos', 'watchdog.mjs'), String(process.pid), groups.file, String(o.hardDeadline)], { detached: true, stdio: 'ignore' });
  watchdog.unref();
  const started: ManagedProcess[] = [];
  const proxies = new ProxyHost(groups);
  const nodes: PatroniNode[] = [];
  const stalledNodes = new Set<string>();
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: user === undefined ? process.env.HOME : '/var/lib/postgresql', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' };

  // Postmasters run in sessions of their own: follow their pids into the watchdog's file.
  const postmasters = new Map<string, number>();
  const trackPostmasters = (): void => {
    for (const n of nodes) {
      const pid = postmasterPid(n.dataDir);
      const old = postmasters.get(n.name);
      if (pid === old) continue;
      if (old !== undefined) groups.delete(old);
      if (pid === null) postmasters.delete(n.name);
      else {
        postmasters.set(n.name, pid);
        groups.add(pid);
      }
    }
  };
  const tracker = setInterval(trackPostmasters, 500);

  const stopAll = async (keep = false): Promise<void> => {
    clearInterval(tracker);
    trackPostmasters();
    for (const name of stalledNodes) {
      await proxies.stall(`pg-${name}`, false).catch(() => undefined);
      await proxies.stall(`etcd-${name}`, false).catch(() => undefined);
    }
    // Patroni stops its PostgreSQL on SIGTERM (fast shutdown).
    await Promise.all(started.filter((p) => p.name.startsWith('patroni')).map((p) => p.stop(20_000)));
    for (const [, pid] of postmasters) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await Promise.all(started.filter((p) => !p.name.startsWith('patroni')).map((p) => p.stop(3000)));
    await proxies.close();
    try {
      process.kill(watchdog.pid!, 'SIGTERM');
    } catch {
      // gone
    }
    if (!keep) rmSync(dir, { recursive: true, force: true });
  };

  try {
    // etcd, single member.
    const [etcdClient, etcdPeer] = [await freePort(), await freePort()];
    mkdirSync(join(dir, 'etcd'), { recursive: true });
    chownTree(dir, user);
    const etcd = new ManagedProcess('etcd', 'etcd', [
      '--name', 'e1', '--data-dir', join(dir, 'etcd', 'data'),
      '--listen-client-urls', `http://127.0.0.1:${etcdClient}`, '--advertise-client-urls', `http://127.0.0.1:${etcdClient}`,
      '--listen-peer-urls', `http://127.0.0.1:${etcdPeer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster', `e1=http://127.0.0.1:${etcdPeer}`, '--initial-cluster-state', 'new', '--log-level', 'warn',
    ], env, join(o.runDir, 'etcd.log'), groups, user);
    etcd.start();
    started.push(etcd);
    await waitFor('etcd', async () => (await getJson(`http://127.0.0.1:${etcdClient}/health`)).status === 200, 30_000);

    const hba = ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust'];
    const names = ['n1', 'n2', 'n3'];
    const pgPorts = await Promise.all(names.map(() => freePort()));
    const proxyPorts = await proxies.start(Object.fromEntries(names.flatMap((n, i) => [[`pg-${n}`, pgPorts[i]!], [`etcd-${n}`, etcdClient]])));
    for (const [i, name] of names.entries()) {
      const [pgPort, restPort] = [pgPorts[i]!, await freePort()];
      const nodeDir = join(dir, name);
      mkdirSync(nodeDir, { recursive: true });
      const pgProxyPort = proxyPorts[`pg-${name}`]!;
      const etcdProxyPort = proxyPorts[`etcd-${name}`]!;
      const config = {
        scope: 'onejob-chaos',
        name,
        log: { level: 'INFO' },
        restapi: { listen: `127.0.0.1:${restPort}`, connect_address: `127.0.0.1:${restPort}` },
        etcd3: { hosts: [`127.0.0.1:${etcdProxyPort}`], use_proxies: true },
        bootstrap: {
          dcs: {
            ...PATRONI_TIMING,
            maximum_lag_on_failover: 16 * 1024 * 1024,
            synchronous_mode: true,
            postgresql: {
              use_pg_rewind: true,
              use_slots: true,
              parameters: {
                wal_level: 'replica', hot_standby: 'on', wal_log_hints: 'on', max_connections: 200, max_wal_senders: 10,
                max_replication_slots: 10, wal_keep_size: '256MB', shared_buffers: '64MB',
              },
            },
          },
          initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }, { 'auth-local': 'trust' }, { 'auth-host': 'trust' }],
        },
        postgresql: {
          listen: `127.0.0.1:${pgPort}`,
          connect_address: `127.0.0.1:${pgPort}`,
          data_dir: join(nodeDir, 'data'),
          bin_dir: PG_BIN,
          pgpass: join(nodeDir, 'pgpass'),
          authentication: { superuser: { username: 'postgres' }, replication: { username: 'postgres' }, rewind: { username: 'postgres' } },
          parameters: { unix_socket_directories: nodeDir },
          pg_hba: hba,
          basebackup: [{ checkpoint: 'fast' }],
        },
      };
      const configFile = join(nodeDir, 'patroni.yml');
      // JSON is YAML.
      writeFileSync(configFile, JSON.stringify(config, null, 2));
      chownTree(nodeDir, user);
      const patroni = new ManagedProcess(`patroni-${name}`, 'patroni', [configFile], env, join(o.runDir, `patroni-${name}.log`), groups, user);
      patroni.start();
      started.push(patroni);
      nodes.push({ name, pgPort, restPort, dataDir: join(nodeDir, 'data'), patroni, pgProxyPort, etcdProxyPort });
    }

    const hapPort = await freePort();
    const cfg = join(dir, 'haproxy-pg.cfg');
    writeFileSync(cfg, [
      'global', '  maxconn 2000', '',
      'defaults', '  mode tcp', '  timeout connect 2s', '  timeout client 30m', '  timeout server 30m', '  timeout check 2s', '',
      'listen postgres', `  bind 127.0.0.1:${hapPort}`,
      '  option httpchk GET /primary', '  http-check expect status 200',
      // Every 500 ms; down after 3 failures (a refused connection fails at once, a slow answer after 2 s);
      // the sessions of a server marked down are cut at once.
      '  default-server inter 500ms fall 3 rise 1 on-marked-down shutdown-sessions',
      ...nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pgProxyPort} check port ${n.restPort}`), '',
    ].join('\n'));
    const haproxy = new ManagedProcess('haproxy-pg', 'haproxy', ['-db', '-f', cfg], env, join(o.runDir, 'haproxy-pg.log'), groups);
    haproxy.start();
    started.push(haproxy);

    const members = async (): Promise<PatroniMember[]> => {
      for (const n of nodes) {
        if (stalledNodes.has(n.name) || !n.patroni.running) continue;
        try {
          const { status, body } = await getJson(`http://127.0.0.1:${n.restPort}/cluster`);
          if (status === 200) return ((body as { members?: PatroniMember[] }).members ?? []);
        } catch {
          // try the next node
        }
      }
      return [];
    };
    const leader = async (): Promise<PatroniNode | null> => {
      const m = (await members()).find((x) => x.role === 'leader' && x.state === 'running');
      return nodes.find((n) => n.name === m?.name) ?? null;
    };
    const healthy = async (): Promise<boolean> => {
      const m = await members();
      const lead = m.filter((x) => x.role === 'leader' && x.state === 'running');
      const replicas = m.filter((x) => x.role !== 'leader' && (x.state === 'running' || x.state === 'streaming') && typeof x.lag === 'number');
      if (lead.length !== 1 || replicas.length !== 2 || !replicas.some((x) => x.role === 'sync_standby')) return false;
      // And HAProxy reaches the leader.
      const pg = (await import('pg')).default;
      const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${hapPort}/postgres`, connectionTimeoutMillis: 1500 });
      try {
        await c.connect();
        const r = await c.query<{ ro: boolean }>('SELECT pg_is_in_recovery() AS ro');
        return r.rows[0]?.ro === false;
      } finally {
        await c.end().catch(() => undefined);
      }
    };
    const waitHealthy = (timeoutMs: number): Promise<void> => waitFor('a healthy Patroni cluster (leader, 2 replicas, a sync standby)', healthy, timeoutMs);

    await waitHealthy(o.startTimeoutMs ?? 240_000);
    trackPostmasters();
    const first = await leader();
    o.log(`Patroni cluster up in ${dir}: etcd :${etcdClient}, nodes ${nodes.map((n) => `${n.name} pg :${n.pgPort} rest :${n.restPort} via :${n.pgProxyPort}`).join(', ')}; leader ${first?.name}; HAProxy :${hapPort}`);

    return {
      dir,
      url: `postgres://postgres@127.0.0.1:${hapPort}/postgres`,
      nodes,
      members,
      leader,
      waitHealthy,
      killPostgres(node) {
        const pid = postmasterPid(node.dataDir);
        if (pid === null) return null;
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          process.kill(pid, 'SIGKILL');
        }
        return pid;
      },
      async switchover(from) {
        const res = await fetch(`http://127.0.0.1:${from.restPort}/switchover`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ leader: from.name }), signal: AbortSignal.timeout(60_000),
        });
        return `${res.status} ${(await res.text()).trim()}`;
      },
      async stall(node, on) {
        if (on) stalledNodes.add(node.name);
        else stalledNodes.delete(node.name);
        await Promise.all([proxies.stall(`pg-${node.name}`, on), proxies.stall(`etcd-${node.name}`, on)]);
      },
      stalled: (node) => stalledNodes.has(node.name),
      stop: stopAll,
    };
  } catch (error) {
    o.log(`the Patroni cluster did not come up; logs in ${o.runDir} (patroni-n*.log, etcd.log); data in ${dir}`);
    await stopAll(true);
    throw error;
  }
}

/** Waits `ms`, but at most until `until` (epoch ms). */
export async function sleepUntil(ms: number, until: number): Promise<void> {
  await sleep(Math.max(0, Math.min(ms, until - Date.now())));
}
