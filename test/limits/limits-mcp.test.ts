/**
 * `requestsPerMinute` and `concurrency` on the MCP gateway (CONTRACT §16):
 * a tool call that would create a job past either is refused (a JSON-RPC
 * error whose `data.code` is `rate_limited` / `concurrency_limited`), nothing
 * created and no upstream call; a repeat of an earlier call is never refused;
 * a tool reserves no spend even under a spend limit.
 */
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { spendPolicyOf } from '../../src/config/limits-config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startPaymentsHttp, type PaymentsLedger } from '../../examples/mcp/payments-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`limits on the MCP gateway (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let payments: { url: string; ledger: PaymentsLedger; close(): Promise<void> };
    let runtime: Runtime;
    let app: FastifyInstance;
    let client: Client;

    beforeAll(async () => {
      payments = await startPaymentsHttp();
      const config = defineConfig({
        apiKeys: { tok_alice_mcp_limits: 'alice' },
        mcpServers: { pay: { url: payments.url, timeoutMs: 2_000 } },
        // A spend limit too: a tool has no price and reserves nothing (it is never skipped unsupported:pricing).
        limits: { owners: { alice: { requestsPerMinute: 2, spendUsd: { day: 0 } } } },
      });
      ({ store, cleanup } = await createTestStore(db, { spend: spendPolicyOf(config) }));
      runtime = await createRuntime({ config, store });
      const executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, mcp: runtime.mcp, waitRecheckMs: 100, mcpRoutes: { maxWaitMs: 4_000 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      client = new Client({ name: 'limits-test', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/mcp`), { requestInit: { headers: { authorization: 'Bearer tok_alice_mcp_limits' } } }));
    }, 30_000);
    afterAll(async () => {
      await client?.close().catch(() => undefined);
      await app?.close();
      await runtime?.close(100);
      await payments?.close();
      await cleanup?.();
    });

    const charge = (key: string, amount: number) =>
      client.callTool({ name: 'pay.charge', arguments: { amount }, _meta: { 'onejob/idempotencyKey': key } }) as Promise<CallToolResult>;

    it('two tool calls run; the third new one is refused rate_limited, nothing created; repeats still answer', async () => {
      expect((await charge(`${db.name}-a`, 1)).isError).toBeFalsy();
      expect((await charge(`${db.name}-b`, 2)).isError).toBeFalsy();
      const refused = await charge(`${db.name}-c`, 3).then(() => null, (e: unknown) => e as { code?: number; data?: { code?: string } });
      expect(refused?.data?.code).toBe('rate_limited');
      expect(payments.ledger.calls).toBe(2);
      const jobs = (await store.listJobs({ ownerId: 'alice', limit: 50 })).jobs;
      expect(jobs.map((j) => j.idempotencyKey).sort()).toEqual([`${db.name}-a`, `${db.name}-b`]);
      // No spend reserved or spent by tools, although the day limit is 0.
      expect((await store.ownerUse('alice')).use.day).toEqual({ spentMicros: 0, reservedMicros: 0 });
      const repeat = await charge(`${db.name}-a`, 1);
      expect(repeat._meta?.['onejob/replayed']).toBe(true);
      expect(payments.ledger.calls).toBe(2);
    });
  });
}
