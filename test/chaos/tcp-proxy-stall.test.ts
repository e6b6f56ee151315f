/**
 * The chaos proxy's network stall (chaos/tcp-proxy.ts `setStalled`): unlike
 * its modes, a stall holds the bytes of connections already open, in both
 * directions, and lets them through in order when it ends.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from '../../chaos/tcp-proxy.ts';

/** An echo server. */
async function echo(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as { port: number }).port };
}

function collect(s: Socket): { text: () => string } {
  let buf = '';
  s.on('data', (c: Buffer) => (buf += c.toString('utf8')));
  return { text: () => buf };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('tcp-proxy stall', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  it('holds the bytes of an open connection while stalled and delivers them in order afterwards', async () => {
    const { server, port } = await echo();
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
    const proxy: TcpProxy = await startTcpProxy({ target: { host: '127.0.0.1', port } });
    cleanup.push(() => proxy.close());
    const client = connect(proxy.port, '127.0.0.1');
    cleanup.push(() => void client.destroy());
    await new Promise<void>((r) => client.once('connect', () => r()));
    const got = collect(client);

    client.write('a');
    await sleep(100);
    expect(got.text()).toBe('a');

    proxy.setStalled(true);
    client.write('b');
    client.write('c');
    await sleep(300);
    expect(got.text()).toBe('a');

    // A connection opened during the stall is held too.
    const late = connect(proxy.port, '127.0.0.1');
    cleanup.push(() => void late.destroy());
    const lateGot = collect(late);
    late.write('x');
    await sleep(300);
    expect(lateGot.text()).toBe('');

    proxy.setStalled(false);
    await sleep(200);
    expect(got.text()).toBe('abc');
    expect(lateGot.text()).toBe('x');
  });
});
