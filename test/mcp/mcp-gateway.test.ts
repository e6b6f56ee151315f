/**
 * The MCP gateway (CONTRACT §14) end to end, on SQLite and PostgreSQL: the
 * official SDK's client talks to `POST /mcp` of a real onejob app (an
 * executor in-process), which talks to the example payments server over
 * Streamable HTTP and over stdio (a child process it starts). Throughout,
 * the payments server's own ledger counts what really executed.
 */
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createMCPClient } from '@ai-sdk/mcp';
import { MCPServerStreamableHttp, mcpToFunctionTool, RunContext } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startPaymentsHttp, type PaymentsLedger } from '../../examples/mcp/payments-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_mcp_0123456789';
const READER = 'tok_alice_reader_0123456789';
const OWNER = 'alice';
const STDIO_COMMAND = [process.execPath, '--import', 'tsx', 'examples/mcp/payments-server.ts'];

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`MCP gateway with the SDK client (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let payments: { url: string; ledger: PaymentsLedger; close(): Promise<void> };
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let baseUrl: string;
    const clients: Client[] = [];
    let seq = 0;

    async function connect(token = TOKEN, headers: Record<string, string> = {}): Promise<Client> {
      const client = new Client({ name: 'test-agent', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } } }));
      clients.push(client);
      return client;
    }

    const stats = async (client: Client, server = 'pay') =>
      (await client.callTool({ name: `${server}.stats`, arguments: {} })).structuredContent as { calls: number; charges: number; keys: (string | null)[]; pid: number };

    async function errorOf(p: Promise<unknown>): Promise<McpError> {
      try {
        await p;
      } catch (e) {
        if (e instanceof McpError) return e;
        throw e;
      }
      throw new Error('expected a JSON-RPC error');
    }

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      payments = await startPaymentsHttp();
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        mcpServers: {
          pay: { url: payments.url, timeoutMs: 700 },
          local: { command: STDIO_COMMAND, timeoutMs: 5_000 },
        },
      });
      // A read-only token beside the writer (defineConfig takes names only).
      const withReader = { ...config, apiKeys: { ...config.apiKeys, [READER]: { owner: OWNER, readOnly: true } } };
      runtime = await createRuntime({ config: withReader, store });
      executor = runtime.createExecutor({ pollMs: 50, lateAnswerGraceMs: 300 });
      await executor.start();
      app = buildApp({ store, config: withReader, executor, mcp: runtime.mcp, waitRecheckMs: 100, mcpRoutes: { maxWaitMs: 10_000 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      baseUrl = `http://127.0.0.1:${address.port}`;
    }, 30_000);
    afterAll(async () => {
      for (const c of clients) await c.close().catch(() => undefined);
      await app?.close();
      await runtime?.close(100);
      await payments?.close();
      await cleanup?.();
    });

    it('lists every upstream tool as <server>.<tool>, with its schema and annotations', async () => {
      const client = await connect();
      const { tools } = await client.listTools();
      const charge = tools.find((t) => t.name === 'pay.charge');
      expect(charge?.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false });
      expect(charge?.inputSchema.properties).toHaveProperty('amount');
      expect(tools.find((t) => t.name === 'pay.stats')?.annotations?.readOnlyHint).toBe(true);
      expect(tools.map((t) => t.name)).toContain('local.charge');
    });

    it('a repeated call with one key executes once: the repeat gets the stored result; the key seen upstream is the attempt id', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const key = `charge-${++seq}`;
      const call = () => client.callTool({ name: 'pay.charge', arguments: { amount: 12 }, _meta: { 'onejob/idempotencyKey': key } }) as Promise<CallToolResult>;
      const first = await call();
      const again = await call();
      expect(payments.ledger.calls - before).toBe(1);
      expect(first.isError).toBeFalsy();
      expect(again.structuredContent).toEqual(first.structuredContent);
      expect(first._meta?.['onejob/replayed']).toBe(false);
      expect(again._meta?.['onejob/replayed']).toBe(true);
      const jobId = first._meta?.['onejob/jobId'] as string;
      expect(again._meta?.['onejob/jobId']).toBe(jobId);
      const job = await store.getJob(OWNER, jobId);
      expect(job).toMatchObject({ route: 'mcp:pay.charge', input: { arguments: { amount: 12 } }, state: 'succeeded', idempotencyKey: key });
      // The job's result is the upstream's CallToolResult as received.
      expect(job!.result).toEqual({ content: first.content, structuredContent: first.structuredContent });
      expect(payments.ledger.keys.at(-1)).toBe(job!.attempts[0]!.id);
      expect((first.structuredContent as { received_key: string }).received_key).toBe(job!.attempts[0]!.id);
      // The Idempotency-Key header is the second place a key is read from.
      const viaHeader = await connect(TOKEN, { 'idempotency-key': `header-${seq}` });
      const h1 = await viaHeader.callTool({ name: 'pay.charge', arguments: { amount: 3 } }) as CallToolResult;
      const h2 = await viaHeader.callTool({ name: 'pay.charge', arguments: { amount: 3 } }) as CallToolResult;
      expect(h1._meta?.['onejob/idempotencyKey']).toBe(`header-${seq}`);
      expect(h2._meta?.['onejob/jobId']).toBe(h1._meta?.['onejob/jobId']);
      expect(payments.ledger.calls - before).toBe(2);
    });

    it('concurrent keyless repeats (the same arguments) are one job and one upstream call', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const amount = 1000 + ++seq;
      const results = await Promise.all(Array.from({ length: 6 }, () =>
        client.callTool({ name: 'pay.charge', arguments: { amount, delayMs: 200 } }) as Promise<CallToolResult>));
      expect(payments.ledger.calls - before).toBe(1);
      expect(new Set(results.map((r) => r._meta?.['onejob/jobId'])).size).toBe(1);
      expect(results.filter((r) => r._meta?.['onejob/replayed'] === false)).toHaveLength(1);
      expect(String(results[0]!._meta?.['onejob/idempotencyKey'])).toMatch(/^keyless:/);
      // A repeat later, in the window, is replayed too.
      const later = await client.callTool({ name: 'pay.charge', arguments: { amount, delayMs: 200 } }) as CallToolResult;
      expect(later._meta?.['onejob/jobId']).toBe(results[0]!._meta?.['onejob/jobId']);
      expect(payments.ledger.calls - before).toBe(1);
    });

    it('the same key with other arguments is refused with data.code idempotency_key_reused, and runs nothing', async () => {
      const client = await connect();
      const key = `reuse-${++seq}`;
      await client.callTool({ name: 'pay.charge', arguments: { amount: 5 }, _meta: { 'onejob/idempotencyKey': key } });
      const before = payments.ledger.calls;
      const error = await errorOf(client.callTool({ name: 'pay.charge', arguments: { amount: 6 }, _meta: { 'onejob/idempotencyKey': key } }));
      expect((error.data as { code: string }).code).toBe('idempotency_key_reused');
      expect(payments.ledger.calls).toBe(before);
    });

    it('a tool result with isError: true is the tool\'s answer, stored and replayed as received; an unknown tool is refused', async () => {
      const client = await connect();
      const key = `bad-amount-${++seq}`;
      const call = () => client.callTool({ name: 'pay.charge', arguments: { amount: -1 }, _meta: { 'onejob/idempotencyKey': key } }) as Promise<CallToolResult>;
      const first = await call();
      expect(first.isError).toBe(true);
      const job = await store.getJob(OWNER, first._meta?.['onejob/jobId'] as string);
      expect(job).toMatchObject({ state: 'succeeded', result: { isError: true, content: first.content } });
      expect((await call()).content).toEqual(first.content);
      expect(job!.attempts).toHaveLength(1);
      const unknown = await errorOf(client.callTool({ name: 'pay.refund_everything', arguments: {} }));
      expect((unknown.data as { code: string }).code).toBe('not_found');
      expect((await errorOf(client.callTool({ name: 'nosuchserver.charge', arguments: {} }))).message).toContain('<server>.<tool>');
    });

    it('a hanging tool is unknown: repeats execute nothing until it is resolved; then the job moves on', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const key = `hang-${++seq}`;
      const call = () => client.callTool({ name: 'pay.charge', arguments: { amount: 7, hang: true }, _meta: { 'onejob/idempotencyKey': key } }) as Promise<CallToolResult>;
      const first = await call();
      expect(first.isError).toBe(true);
      const jobId = first._meta?.['onejob/jobId'] as string;
      const text = (first.content[0] as { text: string }).text;
      expect(text).toContain('unknown');
      expect(text).toContain(jobId);
      const repeats = await Promise.all([call(), call()]);
      expect(repeats.every((r) => r.isError === true && r._meta?.['onejob/jobId'] === jobId)).toBe(true);
      expect(payments.ledger.calls - before).toBe(1);
      const job = await store.getJob(OWNER, jobId);
      expect(job?.state).toBe('unknown');
      // An operator resolves it succeeded: its result is the answer of every later repeat.
      const resolved = { content: [{ type: 'text', text: 'charged 7 EUR (checked by hand)' }], structuredContent: { id: 'ch_manual' } };
      const r = await fetch(`${baseUrl}/v1/attempts/${job!.attempts[0]!.id}/resolve`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'succeeded', result: resolved }),
      });
      expect(r.status).toBe(200);
      const after = await call();
      expect(after.isError).toBeFalsy();
      expect(after.structuredContent).toEqual({ id: 'ch_manual' });
      expect(after.content).toEqual(resolved.content);
      expect(payments.ledger.calls - before).toBe(1);
    });

    it('an unknown call resolved failed fails its job (the chain is one tool): repeats get the failure, still nothing executed', async () => {
      const client = await connect();
      const key = `hang-failed-${++seq}`;
      const call = () => client.callTool({ name: 'pay.charge', arguments: { amount: 8, hang: true }, _meta: { 'onejob/idempotencyKey': key } }) as Promise<CallToolResult>;
      const first = await call();
      const before = payments.ledger.calls;
      const job = await store.getJob(OWNER, first._meta?.['onejob/jobId'] as string);
      const r = await fetch(`${baseUrl}/v1/attempts/${job!.attempts[0]!.id}/resolve`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'failed', error: { note: 'never reached the bank' } }),
      });
      expect(r.status).toBe(200);
      const error = await errorOf(call());
      expect((error.data as { code: string; job_id: string }).code).toBe('job_failed');
      expect((error.data as { job_id: string }).job_id).toBe(job!.id);
      expect(payments.ledger.calls).toBe(before);
    });

    it('a read-only tool is passed through without a job; a read-only token may list and call only such tools', async () => {
      const client = await connect();
      const jobsBefore = (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.length;
      const s1 = await stats(client);
      const s2 = await stats(client);
      expect(s2.calls).toBe(s1.calls);
      expect((await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.length).toBe(jobsBefore);
      const reader = await connect(READER);
      expect((await reader.listTools()).tools.length).toBeGreaterThan(0);
      expect((await stats(reader)).calls).toBe(s1.calls);
      const refused = await errorOf(reader.callTool({ name: 'pay.charge', arguments: { amount: 1 } }));
      expect((refused.data as { code: string }).code).toBe('read_only_token');
      expect((await stats(client)).calls).toBe(s1.calls);
    });

    it('a stdio server: calls run in the child onejob started; one that dies mid-call leaves the call unknown; it is restarted and serves again', async () => {
      const client = await connect();
      const upstream = runtime.mcp.server('local')!;
      const ok = await client.callTool({ name: 'local.charge', arguments: { amount: 2 }, _meta: { 'onejob/idempotencyKey': `stdio-${++seq}` } }) as CallToolResult;
      expect(ok.isError).toBeFalsy();
      const pid = (ok.structuredContent as { pid: number }).pid;
      expect(pid).toBe(upstream.pid);
      // The child exits while the call runs: the outcome is unknown, never failed.
      const cut = await client.callTool({ name: 'local.charge', arguments: { amount: 3, crash: true }, _meta: { 'onejob/idempotencyKey': `crash-${seq}` } }) as CallToolResult;
      expect(cut.isError).toBe(true);
      expect((cut.content[0] as { text: string }).text).toContain('unknown');
      expect((await store.getJob(OWNER, cut._meta?.['onejob/jobId'] as string))?.state).toBe('unknown');
      // onejob starts it again by itself.
      const newPid = await until('the restarted child', async () => upstream.connected && upstream.pid !== pid && upstream.pid);
      const after = await client.callTool({ name: 'local.charge', arguments: { amount: 4 }, _meta: { 'onejob/idempotencyKey': `after-${seq}` } }) as CallToolResult;
      expect((after.structuredContent as { pid: number }).pid).toBe(newPid);
      // Killed from outside too.
      process.kill(newPid, 'SIGKILL');
      await until('the second restart', async () => upstream.connected && upstream.pid !== newPid);
      expect((await stats(client, 'local')).calls).toBe(0);
    });

    it('an upstream that says its tools changed is read anew, and every connected client is told its list changed (GET /mcp stream)', async () => {
      // Two listening clients; the GET stream of each is seen open (its answer arrived) before the change.
      const listening: Promise<void>[] = [];
      const told: string[][] = [];
      const listeners = await Promise.all([0, 1].map(async (i) => {
        let opened!: () => void;
        listening.push(new Promise<void>((r) => { opened = r; }));
        const client = new Client({ name: `listener-${i}`, version: '1' });
        const seen: string[] = [];
        told.push(seen);
        client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
          seen.push(...(await client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('local.')));
        });
        const fetchWatched: typeof fetch = async (input, init) => {
          const response = await fetch(input, init);
          if ((init?.method ?? 'GET') === 'GET' && response.headers.get('content-type')?.includes('text/event-stream')) opened();
          return response;
        };
        await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { fetch: fetchWatched, requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
        clients.push(client);
        return client;
      }));
      expect(listeners[0]!.getServerCapabilities()?.tools?.listChanged).toBe(true);
      await Promise.all(listening);
      expect((await listeners[0]!.listTools()).tools.map((t) => t.name)).not.toContain('local.refund');
      const caller = await connect();
      await caller.callTool({ name: 'local.enable_refunds', arguments: {}, _meta: { 'onejob/idempotencyKey': `refunds-${++seq}` } });
      // Each listener re-lists when told, and its list has the new tool.
      await until('both listeners told', async () => told.every((names) => names.includes('local.refund')));
      expect((await caller.listTools()).tools.map((t) => t.name)).toContain('local.refund');
    });

    it("the Vercel AI SDK's MCP client (@ai-sdk/mcp): an agent step repeated twice charges once", async () => {
      const mcp = await createMCPClient({ transport: { type: 'http', url: `${baseUrl}/mcp`, headers: { authorization: `Bearer ${TOKEN}` } }, maxRetries: 2 });
      try {
        const tools = await mcp.tools();
        const charge = tools['pay.charge']!;
        const before = payments.ledger.calls;
        const amount = 2000 + ++seq;
        const options = { toolCallId: `call_${seq}`, messages: [] };
        const [a, b] = await Promise.all([charge.execute!({ amount, delayMs: 100 }, options), charge.execute!({ amount, delayMs: 100 }, options)]) as CallToolResult[];
        const c = await charge.execute!({ amount, delayMs: 100 }, options) as CallToolResult;
        expect(payments.ledger.calls - before).toBe(1);
        expect(new Set([a, b, c].map((r) => r!._meta?.['onejob/jobId'])).size).toBe(1);
        expect(c.structuredContent).toEqual(a!.structuredContent);
      } finally {
        await mcp.close();
      }
    });

    it("the OpenAI Agents SDK's MCP server (@openai/agents MCPServerStreamableHttp): a key per call from its toolMetaResolver; the repeat charges nothing", async () => {
      const resolved: string[] = [];
      const keys = new Map<string, string>();
      const mcp = new MCPServerStreamableHttp({
        url: `${baseUrl}/mcp`, name: 'onejob', cacheToolsList: true, useStructuredContent: true,
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
        // One key per intended call: here the order id the agent's arguments carry.
        toolMetaResolver: ({ arguments: args }) => {
          const order = String((args as { note?: unknown } | null)?.note);
          if (!keys.has(order)) keys.set(order, `order-${order}-${++seq}`);
          resolved.push(keys.get(order)!);
          return { 'onejob/idempotencyKey': keys.get(order)! };
        },
      });
      await mcp.connect();
      try {
        const listed = await mcp.listTools();
        expect(listed.map((t) => t.name)).toEqual(expect.arrayContaining(['pay.charge', 'pay.stats']));
        // The function tool the Agents SDK gives a model for pay.charge, invoked as its runner does.
        const charge = mcpToFunctionTool(listed.find((t) => t.name === 'pay.charge')!, mcp, false);
        const runContext = new RunContext();
        const before = payments.ledger.charges;
        const order = `o${++seq}`;
        const first = await charge.invoke(runContext, JSON.stringify({ amount: 77, note: order }));
        const again = await charge.invoke(runContext, JSON.stringify({ amount: 77, note: order }));
        expect(resolved).toEqual([keys.get(order), keys.get(order)]);
        expect(JSON.stringify(again)).toEqual(JSON.stringify(first));
        expect(payments.ledger.charges - before).toBe(1);
        const job = (await store.listJobs({ ownerId: OWNER, limit: 50 })).jobs.find((j) => j.idempotencyKey === keys.get(order));
        expect(job?.state).toBe('succeeded');
        // Another order with the same amount is another call.
        await charge.invoke(runContext, JSON.stringify({ amount: 77, note: `${order}-b` }));
        expect(payments.ledger.charges - before).toBe(2);
      } finally {
        await mcp.close();
      }
    });

    it('/mcp needs a token however it is spelled; GET without text/event-stream is 406; DELETE answers 405', async () => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      for (const path of ['/mcp', '/%6Dcp', '/MCP', '/mcp/', '//mcp']) {
        const r = await fetch(`${baseUrl}${path}`, { method: 'POST', headers, body });
        expect([path, r.status]).toEqual([path, 401]);
      }
      expect((await fetch(`${baseUrl}/mcp`)).status).toBe(401);
      expect((await fetch(`${baseUrl}/mcp`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(406);
      expect((await fetch(`${baseUrl}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(405);
    });
  });
}
