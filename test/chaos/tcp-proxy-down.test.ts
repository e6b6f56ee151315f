/**
 * The chaos proxy's outage (chaos/tcp-proxy.ts `setDown`, the database
 * outage fault of chaos/database-outage.ts): while down, every connection
 * open through it is reset and new ones are reset on connect, as a stopped
 * server would; afterwards connections work again.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { databaseOutage } from '../../chaos/database-outage.ts';
import { startTcpProxy, type TcpProxy } from '../../chaos/tcp-proxy.ts';

/** An echo server (the proxy resets its side of a connection too). */
async function echo(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as { port: number }).port };
}

/** Connects; resolves with how the connection ended ('reset', 'closed') or the echo of `text`. */
function roundTrip(port: number, text: string): { socket: Socket; result: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  const result = new Promise<string>((resolve) => {
    let buf = '';
    socket.on('connect', () => socket.write(text));
    socket.on('data', (c: Buffer) => {
      buf += c.toString('utf8');
      if (buf === text) resolve(buf);
    });
    socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNRESET' ? 'reset' : `error ${e.code}`));
    socket.on('close', () => resolve('closed'));
  });
  return { socket, result };
}

describe('tcp-proxy down', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  it('resets the connections open, refuses new ones while down, and serves again afterwards', async () => {
    const { server, port } = await echo();
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
    const proxy: TcpProxy = await startTcpProxy({ target: { host: '127.0.0.1', port } });
    cleanup.push(() => proxy.close());

    const open = connect(proxy.port, '127.0.0.1');
    cleanup.push(() => void open.destroy());
    await new Promise<void>((r) => open.once('connect', () => r()));
    const openEnded = new Promise<string>((resolve) => {
      open.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      open.on('close', () => resolve('closed'));
    });
    open.write('a');
    await new Promise<void>((r) => open.once('data', () => r()));

    proxy.setDown(true);
    expect(await openEnded).toBe('ECONNRESET');
    const during = roundTrip(proxy.port, 'b');
    cleanup.push(() => void during.socket.destroy());
    expect(await during.result).toBe('reset');

    proxy.setDown(false);
    const after = roundTrip(proxy.port, 'c');
    cleanup.push(() => void after.socket.destroy());
    expect(await after.result).toBe('c');
  });

  it('the outage fault records itself, takes the proxy down for its duration and always brings it back', async () => {
    const calls: boolean[] = [];
    const records: string[] = [];
    await databaseOutage({ afterMs: 10, durationMs: 50, proxy: { setDown: (d) => calls.push(d) }, record: (k, t) => records.push(`${k} ${t}`), log: () => undefined, stopped: () => false });
    expect(calls).toEqual([true, false]);
    expect(records).toEqual(['database-outage postgresql']);
    const skipped: boolean[] = [];
    await databaseOutage({ afterMs: 10, durationMs: 50, proxy: { setDown: (d) => skipped.push(d) }, record: () => undefined, log: () => undefined, stopped: () => true });
    expect(skipped).toEqual([]);
  });
});
