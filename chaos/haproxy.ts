/**
 * The shipped HAProxy configuration (`deploy/haproxy.cfg`) rendered for a
 * bind address and a list of API processes. The chaos cluster and the load
 * balancer test run the file operators get, with only the lines marked
 * `# onejob:bind` and `# onejob:servers` replaced (and, optionally, the
 * `default-server` check timings, which a chaos run wants shorter).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The shipped configuration. */
export const HAPROXY_CFG = join(dirname(fileURLToPath(import.meta.url)), '..', 'deploy', 'haproxy.cfg');

/** Options of {@link renderHaproxyConfig}. */
export interface HaproxyConfigOptions {
  /** What follows `bind`, e.g. `127.0.0.1:8080`. */
  readonly bind: string;
  /** One per API process: a server name and its `host:port`. */
  readonly servers: readonly { readonly name: string; readonly address: string }[];
  /** Replaces the arguments of the `default-server` line, e.g. `inter 500 fall 2 rise 1`. */
  readonly defaultServer?: string;
  /** The file to render (default: the shipped one). */
  readonly template?: string;
}

/**
 * The shipped configuration with its own bind line and server lines.
 *
 * @throws Error when the template lacks the `onejob:bind` or `onejob:servers` marker.
 * @example renderHaproxyConfig({ bind: '127.0.0.1:9000', servers: [{ name: 'api1', address: '127.0.0.1:9001' }] })
 */
export function renderHaproxyConfig(o: HaproxyConfigOptions): string {
  const template = o.template ?? HAPROXY_CFG;
  const out: string[] = [];
  let bind = false;
  let servers = false;
  let skippingServers = false;
  for (const line of readFileSync(template, 'utf8').split('\n')) {
    if (skippingServers && /^\s*server\s/.test(line)) continue;
    skippingServers = false;
    if (/#\s*onejob:bind\b/.test(line)) {
      out.push(`  bind ${o.bind}`);
      bind = true;
    } else if (/#\s*onejob:servers\b/.test(line)) {
      out.push(line, ...o.servers.map((s) => `  server ${s.name} ${s.address} check`));
      servers = true;
      skippingServers = true;
    } else if (o.defaultServer !== undefined && /^\s*default-server\s/.test(line)) {
      out.push(`  default-server ${o.defaultServer}`);
    } else {
      out.push(line);
    }
  }
  if (!bind || !servers) throw new Error(`${template} lacks the "# onejob:bind" or "# onejob:servers" marker`);
  return out.join('\n');
}

/** Whether `haproxy` is on the PATH; when not, tries `apt-get install -y haproxy` once (as root). */
export function ensureHaproxy(log: (line: string) => void): boolean {
  const has = (): boolean => spawnSync('sh', ['-c', 'command -v haproxy'], { stdio: 'ignore' }).status === 0;
  if (has()) return true;
  log('haproxy is not installed: apt-get install -y haproxy');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update'], { stdio: 'ignore', env, timeout: 300_000 });
  spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'haproxy'], { stdio: 'ignore', env, timeout: 300_000 });
  return has();
}
