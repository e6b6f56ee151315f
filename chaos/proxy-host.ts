/**
 * TCP proxies (chaos/tcp-proxy.ts) in a process of their own, driven over
 * the IPC channel of `child_process.fork`. The Patroni cluster's proxies
 * carry every byte between Patroni and etcd and between HAProxy and
 * PostgreSQL: in the runner's own event loop, any synchronous stretch of the
 * runner (an `execFileSync`, a long check) would stall them all, and Patroni
 * would demote a healthy leader. Here nothing else runs.
 *
 * Messages in: `{ id, op: 'start', targets: { name: port } }` (answers
 * `{ id, ports: { name: port } }`), `{ id, op: 'stall', name, on }`,
 * `{ id, op: 'close' }` (answers, then exits). Every answer carries the `id`.
 */
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

interface Message {
  readonly id: number;
  readonly op: 'start' | 'stall' | 'close';
  readonly targets?: Readonly<Record<string, number>>;
  readonly name?: string;
  readonly on?: boolean;
}

const proxies = new Map<string, TcpProxy>();
const answer = (m: object): void => {
  process.send?.(m);
};

process.on('message', (raw: unknown) => {
  const m = raw as Message;
  void (async () => {
    try {
      if (m.op === 'start') {
        const ports: Record<string, number> = {};
        for (const [name, port] of Object.entries(m.targets ?? {})) {
          const p = await startTcpProxy({ target: { host: '127.0.0.1', port } });
          proxies.set(name, p);
          ports[name] = p.port;
        }
        answer({ id: m.id, ports });
      } else if (m.op === 'stall') {
        const p = proxies.get(m.name ?? '');
        if (p === undefined) throw new Error(`no proxy ${m.name}`);
        p.setStalled(m.on === true);
        answer({ id: m.id });
      } else {
        await Promise.all([...proxies.values()].map((p) => p.close()));
        answer({ id: m.id });
        process.exit(0);
      }
    } catch (e) {
      answer({ id: m.id, error: String(e) });
    }
  })();
});
// The runner gone (the IPC channel closed): nothing to proxy for.
process.on('disconnect', () => process.exit(0));
