/**
 * An upstream over Streamable HTTP that keeps sessions (its server-initiated
 * stream open) says its tools changed: onejob reads them anew and tells its
 * own connected clients (CONTRACT §14; docs/mcp.md). The gateway test covers
 * a stdio upstream; this one the HTTP transport's GET stream, on SQLite.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod/v4';
import { defineConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_listchanged_0123456789';
const db = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

/** A session-keeping MCP server over HTTP; `servers` are its sessions' servers (one per session); `streams()` counts GET streams opened. */
async function startSessionServer(): Promise<{ url: string; servers: McpServer[]; streams: () => number; close(): Promise<void> }> {
  const servers: McpServer[] = [];
  let streams = 0;
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http: HttpServer = createServer((req, res) => {
    void (async () => {
      const sid = req.headers['mcp-session-id'];
      const existing = typeof sid === 'string' ? transports.get(sid) : undefined;
      if (existing && req.method === 'GET') streams++;
      if (existing) return existing.handleRequest(req, res);
      if (req.method !== 'POST') return void res.writeHead(400).end();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void transports.set(id, transport) });
      const server = new McpServer({ name: 'inventory', version: '1' });
      server.registerTool('count', { description: 'Counts.', inputSchema: { n: z.number() } }, async ({ n }) => ({ content: [{ type: 'text', text: String(n) }] }));
      servers.push(server);
      await server.connect(transport);
      await transport.handleRequest(req, res);
    })();
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    servers,
    streams: () => streams,
    close: async () => {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(db.skip !== null)('list_changed from an HTTP upstream with sessions', () => {
  let store: JobStore;
  let cleanup: () => Promise<void>;
  let upstream: Awaited<ReturnType<typeof startSessionServer>>;
  let runtime: Runtime;
  let app: FastifyInstance;
  let client: Client | null = null;

  beforeAll(async () => {
    ({ store, cleanup } = await createTestStore(db));
    upstream = await startSessionServer();
    const config = defineConfig({ apiKeys: { [TOKEN]: 'alice' }, mcpServers: { inv: { url: upstream.url, timeoutMs: 2_000 } } });
    runtime = await createRuntime({ config, store });
    app = buildApp({ store, config, mcp: runtime.mcp });
    await app.listen({ host: '127.0.0.1', port: 0 });
  }, 30_000);
  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await app?.close();
    await runtime?.close(100);
    await upstream?.close();
    await cleanup?.();
  });

  it('a tool the upstream adds is read anew by onejob and told to its connected client, which sees inv.<newtool>', async () => {
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    let opened!: () => void;
    const streamOpen = new Promise<void>((r) => { opened = r; });
    const told: string[][] = [];
    client = new Client({ name: 'listener', version: '1' });
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      told.push((await client!.listTools()).tools.map((t) => t.name));
    });
    const watched: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if ((init?.method ?? 'GET') === 'GET' && response.headers.get('content-type')?.includes('text/event-stream')) opened();
      return response;
    };
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: watched, requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['inv.count']);
    await streamOpen;
    // onejob's own session with the upstream (its GET stream open too) is the one server there.
    await until('onejob connected upstream', () => upstream.servers.length === 1 && upstream.servers[0]!.isConnected());
    // The upstream's notification reaches onejob only on the GET stream onejob's SDK client opens there.
    await until('onejob\'s stream to the upstream open', () => upstream.streams() === 1);
    told.length = 0;
    upstream.servers[0]!.registerTool('restock', { description: 'Restocks.', inputSchema: { sku: z.string() } }, async ({ sku }) => ({ content: [{ type: 'text', text: sku }] }));
    await until('the client told of inv.restock', () => told.some((names) => names.includes('inv.restock')));
    expect(told.at(-1)).toEqual(['inv.count', 'inv.restock']);
  });
});
