/**
 * `onejob/client`'s tool-call helpers (src/client/tool-call.ts) against a
 * real onejob app (executor in-process) in front of the example payments
 * server over Streamable HTTP, driven through the official SDK's `Client`,
 * on SQLite and PostgreSQL. The payments server's ledger counts what ran.
 */
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnejobClient, callToolOnce, isOnejobClientError, jobOfToolCall, toolCallInfo } from '../../src/client/index.ts';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startPaymentsHttp, type PaymentsLedger } from '../../examples/mcp/payments-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_toolcall_0123456789';
const OWNER = 'alice';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`onejob/client tool calls through /mcp (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let payments: { url: string; ledger: PaymentsLedger; close(): Promise<void> };
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let baseUrl: string;
    let onejob: OnejobClient;
    const clients: Client[] = [];
    let seq = 0;

    /** An SDK client; `fetchFor` may replace the transport's fetch (to lose answers). */
    async function connect(fetchFor?: typeof fetch): Promise<Client> {
      const client = new Client({ name: 'helper-test', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } }, ...(fetchFor ? { fetch: fetchFor } : {}),
      }));
      clients.push(client);
      return client;
    }

    /** A fetch whose first `n` tools/call answers are lost after the server answered them (the call ran). */
    function losingAnswers(n: number): { fetch: typeof fetch; lost: () => number; bodies: string[] } {
      let lost = 0;
      const bodies: string[] = [];
      return {
        bodies,
        lost: () => lost,
        fetch: async (input, init) => {
          const body = typeof init?.body === 'string' ? init.body : '';
          const response = await fetch(input, init);
          if (body.includes('"tools/call"')) {
            bodies.push(body);
            if (lost < n) {
              await response.arrayBuffer();
              lost++;
              throw new TypeError('fetch failed (the test lost the answer)');
            }
          }
          return response;
        },
      };
    }

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      payments = await startPaymentsHttp();
      const config = defineConfig({ apiKeys: { [TOKEN]: OWNER }, mcpServers: { pay: { url: payments.url, timeoutMs: 700 } } });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50, lateAnswerGraceMs: 300 });
      await executor.start();
      // The server's wait for a tool job ends after 250 ms: a slower tool (within its 700 ms deadline) answers attempt_in_flight first.
      app = buildApp({ store, config, executor, mcp: runtime.mcp, waitRecheckMs: 50, mcpRoutes: { maxWaitMs: 250 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      baseUrl = `http://127.0.0.1:${address.port}`;
      onejob = new OnejobClient({ baseUrl, token: TOKEN, inDoubtPollMs: 50 });
    }, 30_000);
    afterAll(async () => {
      for (const c of clients) await c.close().catch(() => undefined);
      await app?.close();
      await runtime?.close(100);
      await payments?.close();
      await cleanup?.();
    });

    it('one key per intended call: the key goes in _meta, a repeat with it replays; two intents with equal arguments are two calls', async () => {
      const client = await connect();
      const before = payments.ledger.charges;
      const amount = 100 + ++seq;
      const first = await callToolOnce(client, { name: 'pay.charge', arguments: { amount } });
      expect(first.idempotencyKey).toMatch(/^ik_/);
      expect(first.result._meta?.['onejob/idempotencyKey']).toBe(first.idempotencyKey);
      expect(first).toMatchObject({ replayed: false, state: 'succeeded', inDoubt: false, tries: 1 });
      const again = await callToolOnce(client, { name: 'pay.charge', arguments: { amount } }, { idempotencyKey: first.idempotencyKey });
      expect(again).toMatchObject({ replayed: true, jobId: first.jobId });
      expect(again.result.structuredContent).toEqual(first.result.structuredContent);
      // A second intent with the same arguments gets its own key: a second charge (keyless, the fingerprint would join them).
      const second = await callToolOnce(client, { name: 'pay.charge', arguments: { amount } });
      expect(second.jobId).not.toBe(first.jobId);
      expect(payments.ledger.charges - before).toBe(2);
      // The job behind a call, through the API.
      const job = await jobOfToolCall(onejob, first);
      expect(job).toMatchObject({ id: first.jobId, state: 'succeeded', route: 'mcp:pay.charge', idempotency_key: first.idempotencyKey });
    });

    it('an answer lost on the way back is asked for again with the same key: the tool ran once', async () => {
      const losing = losingAnswers(2);
      const client = await connect(losing.fetch);
      const before = payments.ledger.calls;
      const out = await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 200 + ++seq } }, { retry: { baseDelayMs: 20 } });
      expect(losing.lost()).toBe(2);
      expect(out.tries).toBe(3);
      expect(out.replayed).toBe(true);
      expect(new Set(losing.bodies.map((b) => JSON.parse(b).params._meta['onejob/idempotencyKey']))).toEqual(new Set([out.idempotencyKey]));
      expect(payments.ledger.calls - before).toBe(1);
      // Without the helper, a resend by hand with a new key (as a framework that mints one per try would) runs again.
      const control = losingAnswers(1);
      const plain = await connect(control.fetch);
      const amount = 300 + ++seq;
      await expect(plain.callTool({ name: 'pay.charge', arguments: { amount }, _meta: { 'onejob/idempotencyKey': `try-1-${seq}` } })).rejects.toThrow(/fetch failed/);
      await plain.callTool({ name: 'pay.charge', arguments: { amount }, _meta: { 'onejob/idempotencyKey': `try-2-${seq}` } });
      expect(payments.ledger.calls - before).toBe(3);
    });

    it('a tool slower than the server\'s wait (attempt_in_flight) is asked again with the same key until it answers', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const out = await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 400 + ++seq, delayMs: 550 } }, { retry: { baseDelayMs: 50 } });
      expect(out.tries).toBeGreaterThan(1);
      expect(out.state).toBe('succeeded');
      expect(payments.ledger.calls - before).toBe(1);
    });

    it('a call past the server\'s wait answers a tool result (not an error) naming the job, saying it is still running and how to follow it', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const args = { amount: 450 + ++seq, delayMs: 550 };
      // A plain MCP client, no helper: what a model sees.
      const first = (await client.callTool({ name: 'pay.charge', arguments: args })) as { isError?: boolean; content: { type: string; text: string }[]; _meta: Record<string, unknown> };
      expect(first.isError ?? false).toBe(false);
      const jobId = first._meta['onejob/jobId'] as string;
      expect(jobId).toMatch(/^job_/);
      expect(['queued', 'running']).toContain(first._meta['onejob/state']);
      expect(first._meta['onejob/followUrl']).toBe(`/v1/jobs/${jobId}`);
      const text = first.content[0]!.text;
      expect(text).toContain(`still running (job ${jobId}`);
      expect(text).toContain('repeat this exact call');
      expect(text).toContain('do not call the tool again with other arguments');
      expect(toolCallInfo(first)).toMatchObject({ stillRunning: true, inDoubt: false, jobId });
      // Following it as told: the exact call again (keyless: the same arguments) waits for the same job; the tool ran once.
      await new Promise((r) => setTimeout(r, 500));
      const again = await client.callTool({ name: 'pay.charge', arguments: args });
      expect(toolCallInfo(again)).toMatchObject({ jobId, state: 'succeeded', replayed: true, stillRunning: false });
      expect(payments.ledger.calls - before).toBe(1);
    });

    it('a refusal is not repeated: the same key with other arguments throws idempotency_key_reused with the key', async () => {
      const client = await connect();
      const key = `reuse-${++seq}`;
      await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 5 } }, { idempotencyKey: key });
      const before = payments.ledger.calls;
      const error = await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 6 } }, { idempotencyKey: key }).catch((e: unknown) => e);
      expect(isOnejobClientError(error, 'idempotency_key_reused')).toBe(true);
      expect(error).toMatchObject({ tries: 1, idempotencyKey: key });
      expect(payments.ledger.calls).toBe(before);
    });

    it('an answer in doubt is returned as such; the job behind it is resolved through the API and the same key then answers the resolution', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const out = await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 500 + ++seq, hang: true } });
      // (attempt_in_flight first, the server's wait being shorter than the tool's deadline.)
      expect(out).toMatchObject({ inDoubt: true, state: 'unknown' });
      expect(out.attemptId).not.toBeNull();
      const job = await jobOfToolCall(onejob, out.result);
      expect(job?.state).toBe('unknown');
      await onejob.resolveAttempt(out.attemptId!, { state: 'succeeded', result: { content: [{ type: 'text', text: 'charged (checked)' }], structuredContent: { id: 'ch_checked' } } });
      const after = await callToolOnce(client, { name: 'pay.charge', arguments: { amount: 500 + seq, hang: true } }, { idempotencyKey: out.idempotencyKey });
      expect(after).toMatchObject({ inDoubt: false, state: 'succeeded', replayed: true });
      expect(after.result.structuredContent).toEqual({ id: 'ch_checked' });
      expect(payments.ledger.calls - before).toBe(1);
    });

    it('with an API client, an answer in doubt is followed until it is resolved, then answered; cancel goes through the API too', async () => {
      const client = await connect();
      const before = payments.ledger.calls;
      const amount = 600 + ++seq;
      const key = `follow-${seq}`;
      const pending = callToolOnce(client, { name: 'pay.charge', arguments: { amount, hang: true } }, { idempotencyKey: key, onejob, inDoubtWaitMs: 20_000 });
      // An operator, elsewhere, finds the job in doubt and resolves it failed.
      let doubt = null;
      for (let i = 0; i < 200 && doubt === null; i++) {
        const page = await onejob.listJobs({ state: 'unknown' });
        doubt = page.data.find((j) => j.idempotency_key === key) ?? null;
        if (doubt === null) await new Promise((r) => setTimeout(r, 50));
      }
      expect(doubt).not.toBeNull();
      const attempts = await onejob.listAttempts(doubt!.id);
      await onejob.resolveAttempt(attempts[0]!.id, { state: 'failed', error: { note: 'the bank has no such charge' } });
      const error = await pending.catch((e: unknown) => e);
      expect(isOnejobClientError(error, 'job_failed')).toBe(true);
      expect(error).toMatchObject({ jobId: doubt!.id, idempotencyKey: key });
      expect((await jobOfToolCall(onejob, error))?.state).toBe('failed');
      expect(payments.ledger.calls - before).toBe(1);
      // Another one in doubt, cancelled: the helper, following, gets job_finished.
      const other = callToolOnce(client, { name: 'pay.charge', arguments: { amount: amount + 1, hang: true } }, { idempotencyKey: `${key}-c`, onejob, inDoubtWaitMs: 20_000 });
      let jobId: string | null = null;
      for (let i = 0; i < 200 && jobId === null; i++) {
        jobId = (await onejob.listJobs({ state: 'unknown' })).data.find((j) => j.idempotency_key === `${key}-c`)?.id ?? null;
        if (jobId === null) await new Promise((r) => setTimeout(r, 50));
      }
      await onejob.cancelJob(jobId!);
      expect(isOnejobClientError(await other.catch((e: unknown) => e), 'job_finished')).toBe(true);
    });

    it('toolCallInfo reads a read-only tool\'s result (no job) and a plain value as nothing', async () => {
      const client = await connect();
      const stats = await client.callTool({ name: 'pay.stats', arguments: {} });
      expect(toolCallInfo(stats)).toEqual({ jobId: null, idempotencyKey: null, replayed: false, state: null, inDoubt: false, attemptId: null, stillRunning: false });
      expect(toolCallInfo(null).jobId).toBeNull();
      expect(await jobOfToolCall(onejob, stats)).toBeNull();
    });
  });
}
