/**
 * A TCP proxy for chaos runs: sits between executors and a provider and, on
 * command, delays bytes or cuts connections at a chosen point. It knows
 * nothing about HTTP; "after the request" means "after the first bytes from
 * the client were forwarded".
 *
 * @example
 * const proxy = await startTcpProxy({ target: { host: '127.0.0.1', port: 4010 } });
 * proxy.setMode({ delayMs: 300 });                       // every chunk waits 300 ms
 * proxy.setMode({ cut: 'after-request', cutRate: 0.5 }); // half the connections die after the request reached the provider
 * proxy.setMode({});                                      // heal
 * proxy.setStalled(true);                                 // every connection, open or new, stops forwarding (bytes are held)
 * proxy.setStalled(false);                                // held bytes flow on, in order
 * proxy.setDown(true);                                    // every open connection reset, new ones refused (a stopped server)
 * proxy.setDown(false);                                   // connections accepted again
 * await proxy.close();
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

/** Where a connection is cut. */
export type CutPoint = 'on-connect' | 'after-request' | 'mid-response';

/** What the proxy does to new connections (connections already open keep the mode they started with). */
export interface ProxyMode {
  /** Milliseconds every forwarded chunk waits, in both directions. Default 0. */
  readonly delayMs?: number;
  /** Cut connections at this point. */
  readonly cut?: CutPoint;
  /** The share of connections cut, 0–1. Default 1 when `cut` is set. */
  readonly cutRate?: number;
}

/** A running proxy. */
export interface TcpProxy {
  readonly port: number;
  setMode(mode: ProxyMode): void;
  /**
   * A network stall: while on, no byte moves in either direction on any
   * connection, including those already open (unlike {@link setMode});
   * bytes are held in order and forwarded when it is turned off.
   */
  setStalled(stalled: boolean): void;
  /**
   * The target unreachable, as a stopped server: while on, every connection
   * open is reset and every new one is reset on connect.
   */
  setDown(down: boolean): void;
  /** Connections accepted, and cut on purpose. */
  readonly stats: { accepted: number; cut: number };
  close(): Promise<void>;
}

/** Options of {@link startTcpProxy}. */
export interface StartTcpProxyOptions {
  readonly target: { readonly host: string; readonly port: number };
  /** Default 0 (a free port). */
  readonly port?: number;
  /** Random numbers in [0, 1); default Math.random (a seeded one makes runs repeatable). */
  readonly random?: () => number;
}

/** Starts a proxy on 127.0.0.1. */
export async function startTcpProxy(options: StartTcpProxyOptions): Promise<TcpProxy> {
  const random = options.random ?? Math.random;
  let mode: ProxyMode = {};
  const stats = { accepted: 0, cut: 0 };
  const open = new Set<Socket>();
  let stalled = false;
  let down = false;
  let held: (() => void)[] = [];
  /** Runs `fn` now, or when the stall ends. */
  const gate = (fn: () => void): void => {
    if (stalled) held.push(fn);
    else fn();
  };

  const server: Server = createServer((client) => {
    stats.accepted++;
    const m = mode;
    const cutHere = down ? 'on-connect' : m.cut !== undefined && random() < (m.cutRate ?? 1) ? m.cut : undefined;
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => undefined);
    if (cutHere === 'on-connect') {
      stats.cut++;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(options.target.port, options.target.host);
    open.add(upstream);
    upstream.on('close', () => {
      open.delete(upstream);
      if (!client.destroyed) client.end();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    const cutBoth = (): void => {
      stats.cut++;
      upstream.destroy();
      if (!client.destroyed) client.resetAndDestroy();
    };
    const delay = m.delayMs ?? 0;
    const forward = (from: Socket, to: Socket, onChunk?: (n: number) => void): void => {
      from.on('data', (chunk: Buffer) => {
        const send = (): void => {
          if (to.destroyed) return;
          to.write(chunk);
          onChunk?.(chunk.length);
        };
        if (delay > 0) setTimeout(() => gate(send), delay).unref();
        else gate(send);
      });
    };
    let requested = false;
    forward(client, upstream, () => {
      if (cutHere === 'after-request' && !requested) {
        requested = true;
        // Give the request time to reach the provider, then cut before (or while) it answers.
        setTimeout(cutBoth, 20 + Math.floor(random() * 400)).unref();
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      const send = (): void => {
        if (client.destroyed) return;
        if (cutHere === 'mid-response') {
          // Forward a part of the first chunk only, then cut.
          client.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))));
          cutBoth();
          return;
        }
        client.write(chunk);
      };
      if (delay > 0) setTimeout(() => gate(send), delay).unref();
      else gate(send);
    });
    upstream.on('end', () => {
      const finish = (): void => {
        if (!client.destroyed) client.end();
      };
      if (delay > 0) setTimeout(() => gate(finish), delay + 1).unref();
      else gate(finish);
    });
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    stats,
    setMode(next) {
      mode = next;
    },
    setStalled(next) {
      stalled = next;
      if (!next) {
        const release = held;
        held = [];
        for (const fn of release) fn();
      }
    },
    setDown(next) {
      down = next;
      if (next) for (const s of open) s.resetAndDestroy();
    },
    close() {
      for (const s of open) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
