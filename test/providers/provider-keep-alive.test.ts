/**
 * Provider connections are reused (keep-alive), and a reused socket the
 * provider closed before the request was written is never an ambiguous
 * outcome: the request goes out once, on a fresh connection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createProviderAgent, postJson, type HttpExchange } from '../../src/providers/http-exchange.ts';

interface CountingServer {
  readonly url: URL;
  readonly connections: () => number;
  /** Calls executed, by the `id` of the request body. */
  readonly calls: Map<string, number>;
  readonly idleCloses: () => number;
  close(): Promise<void>;
}

/**
 * A provider that counts connections and calls. With `closeIdle`, after each
 * response it closes the (then idle) socket with that probability, either at
 * once (FIN right behind the response) or after a random 0–3 ms if no
 * request is being served on it by then.
 */
async function countingServer(closeIdle = 0): Promise<CountingServer> {
  let connections = 0;
  let idleCloses = 0;
  const calls = new Map<string, number>();
  const busy = new WeakMap<Socket, number>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string };
      calls.set(body.id, (calls.get(body.id) ?? 0) + 1);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: body.id }));
    });
    res.on('finish', () => {
      busy.set(socket, (busy.get(socket) ?? 1) - 1);
      if (Math.random() >= closeIdle) return;
      const closeIfIdle = () => {
        if ((busy.get(socket) ?? 0) > 0 || socket.destroyed) return;
        idleCloses += 1;
        socket.destroy();
      };
      if (Math.random() < 0.5) {
        idleCloses += 1;
        socket.end();
      } else setTimeout(closeIfIdle, Math.random() * 3);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  return {
    url: new URL(`http://127.0.0.1:${address.port}/v1/chat/completions`),
    connections: () => connections,
    calls,
    idleCloses: () => idleCloses,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(closeIdle = 0) {
  const server = await countingServer(closeIdle);
  const agent = createProviderAgent();
  cleanups.push(() => server.close(), () => agent.destroy());
  let n = 0;
  const post = (): Promise<{ id: string; exchange: HttpExchange }> => {
    n += 1;
    const id = `call_${n}`;
    return postJson(agent, { url: server.url, headers: {}, body: { id }, signal: new AbortController().signal }).then(
      (exchange) => ({ id, exchange }),
    );
  };
  return { server, post };
}

describe('provider connections', () => {
  // undici marks an idle socket busy for one event-loop turn before reusing
  // it (it reads any FIN/RST pending on it first), so the pool may open one
  // more connection while that turn lasts: at most two per call in flight.
  it('reuses kept-alive connections for sequential calls', async () => {
    const { server, post } = await setup();
    for (let i = 0; i < 50; i++) {
      const { exchange } = await post();
      expect(exchange.kind).toBe('response');
    }
    expect(server.calls.size).toBe(50);
    expect(server.connections()).toBeLessThanOrEqual(2);
  });

  it('opens at most two connections per call in flight', async () => {
    const { server, post } = await setup();
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(Array.from({ length: 8 }, () => post()));
      for (const r of results) expect(r.exchange.kind).toBe('response');
    }
    expect(server.calls.size).toBe(40);
    expect(server.connections()).toBeLessThanOrEqual(16);
  });

  // The provider closes at random moments, but always before the next request
  // is written (the client pauses 3.5–5 ms, the closes come within 3 ms): the
  // close has reached us, so the request must go out once, on a fresh socket.
  it('a provider closing idle sockets at random causes no lost call and no duplicate', async () => {
    const { server, post } = await setup(0.3);
    const pause = () => new Promise((r) => setTimeout(r, 3.5 + Math.random() * 1.5));
    const outcomes: { id: string; exchange: HttpExchange }[] = [];
    for (let i = 0; i < 300; i++) {
      outcomes.push(await post());
      await pause();
    }
    for (let round = 0; round < 30; round++) {
      outcomes.push(...(await Promise.all(Array.from({ length: 10 }, () => post()))));
      await pause();
    }
    const notResponses = outcomes.filter((o) => o.exchange.kind !== 'response');
    expect(
      notResponses.map((o) => ({ id: o.id, kind: o.exchange.kind, calls: server.calls.get(o.id) ?? 0, cause: String((o.exchange as { cause?: unknown }).cause) })),
    ).toEqual([]);
    expect(outcomes).toHaveLength(600);
    for (const o of outcomes) expect(server.calls.get(o.id)).toBe(1);
    expect(server.calls.size).toBe(600);
    // The closes happened, and connections were reused between them.
    expect(server.idleCloses()).toBeGreaterThan(100);
    expect(server.connections()).toBeLessThan(500);
  });

  // The other side of the line: a provider that drops the connection once the
  // request's bytes have reached it may have read them. That stays ambiguous.
  it('a close that comes after the request reached the provider stays lost', async () => {
    let requests = 0;
    const server = createNetServer((socket) => {
      socket.on('data', () => {
        requests += 1;
        if (requests === 1) socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
        else socket.destroy();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no address');
    const agent = createProviderAgent();
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())), () => agent.destroy());
    const url = new URL(`http://127.0.0.1:${address.port}/v1/chat/completions`);
    const first = await postJson(agent, { url, headers: {}, body: { n: 1 }, signal: new AbortController().signal });
    expect(first.kind).toBe('response');
    const second = await postJson(agent, { url, headers: {}, body: { n: 2 }, signal: new AbortController().signal });
    expect(second.kind).toBe('lost');
    expect(requests).toBe(2);
  });
});
