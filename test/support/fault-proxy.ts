/**
 * A TCP proxy between onejob and its database, for tests that make the
 * database misbehave without touching the server: it passes bytes through,
 * refuses connections, cuts every open one, or stalls (holds every byte in
 * both directions, the way a dead network or a frozen server looks).
 *
 * @example
 * const proxy = await startFaultProxy({ host: '127.0.0.1', port: 5432 });
 * proxy.stall();    // nothing moves; a statement waits for its client-side timeout
 * proxy.heal();     // bytes held during the stall are delivered (to connections still open), then traffic flows
 * proxy.refuse();   // new connections are reset at once
 * proxy.cutAll();   // every open connection is reset now
 * await proxy.close();
 */
import { connect, createServer, type Socket } from 'node:net';

/** What the proxy does now. */
export type FaultMode = 'pass' | 'refuse' | 'stall';

/** A running proxy. */
export interface FaultProxy {
  readonly port: number;
  /** A copy of `url` with the host and port replaced by the proxy's. */
  via(url: string): string;
  readonly mode: FaultMode;
  /** New connections are reset at once; open ones keep flowing. */
  refuse(): void;
  /** Nothing moves in either direction, on open and new connections, until {@link heal}. */
  stall(): void;
  /** Back to passing bytes (held bytes are delivered first). */
  heal(): void;
  /** Resets every open connection now. */
  cutAll(): void;
  readonly stats: { accepted: number; refused: number; cut: number };
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Bytes held during a stall, in arrival order, with where they go. */
  held: [Socket, Buffer][] | null;
}

/** Starts a proxy on 127.0.0.1 (a free port) in front of `target`. */
export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let mode: FaultMode = 'pass';
  const pairs = new Set<Pair>();
  const stats = { accepted: 0, refused: 0, cut: 0 };

  const server = createServer((client) => {
    client.on('error', () => undefined);
    if (mode === 'refuse') {
      stats.refused++;
      client.resetAndDestroy();
      return;
    }
    stats.accepted++;
    const upstream = connect(target.port, target.host);
    upstream.on('error', () => client.destroy());
    const pair: Pair = { client, upstream, held: mode === 'stall' ? [] : null };
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop);
    upstream.on('close', drop);
    const forward = (from: Socket, to: Socket): void => {
      from.on('data', (chunk: Buffer) => {
        if (pair.held) pair.held.push([to, chunk]);
        else if (!to.destroyed) to.write(chunk);
      });
    };
    forward(client, upstream);
    forward(upstream, client);
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;

  return {
    port,
    stats,
    get mode() {
      return mode;
    },
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    refuse() {
      mode = 'refuse';
    },
    stall() {
      mode = 'stall';
      for (const p of pairs) p.held ??= [];
    },
    heal() {
      mode = 'pass';
      for (const p of pairs) {
        const held = p.held ?? [];
        p.held = null;
        for (const [to, chunk] of held) if (!to.destroyed) to.write(chunk);
      }
    },
    cutAll() {
      for (const p of [...pairs]) {
        stats.cut++;
        pairs.delete(p);
        p.upstream.destroy();
        if (!p.client.destroyed) p.client.resetAndDestroy();
      }
    },
    close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
