/**
 * The MCP gateway's fast path gives back the room it reserves (issue #20 §2
 * "the executor's fast path reserves room before it leases"; the lease step
 * of src/executor/attempt-machine.ts, `planLeaseAfterCreate`): a tool call
 * that joins its job (a repeat) or is refused (its key reused with other
 * arguments) runs nothing here, so the room the in-process executor reserved
 * for it is given back. Before, each such call kept its room for ever: after
 * `concurrency` of them the executor claimed nothing more, and every later
 * call waited in vain.
 */
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startPaymentsHttp, type PaymentsLedger } from '../../examples/mcp/payments-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_room_0123456789';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`MCP gateway: the reserved room comes back (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let payments: { url: string; ledger: PaymentsLedger; close(): Promise<void> };
    let runtime: Runtime;
    let app: FastifyInstance;
    let client: Client;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      payments = await startPaymentsHttp();
      const config = defineConfig({ apiKeys: { [TOKEN]: 'alice' }, mcpServers: { pay: { url: payments.url, timeoutMs: 2_000 } } });
      runtime = await createRuntime({ config, store });
      // Room for two attempts: three calls that keep their room would stop the executor.
      const executor = runtime.createExecutor({ pollMs: 50, concurrency: 2 });
      await executor.start();
      app = buildApp({ store, config, executor, mcp: runtime.mcp, waitRecheckMs: 100, mcpRoutes: { maxWaitMs: 4_000 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      client = new Client({ name: 'room-test', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
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

    it('repeats and refused calls (more than the executor\'s concurrency) leave it room: the next new call runs at once', async () => {
      const first = await charge('room-1', 5);
      expect(first.isError).toBeFalsy();
      expect(payments.ledger.calls).toBe(1);
      for (let i = 0; i < 4; i++) expect((await charge('room-1', 5))._meta?.['onejob/replayed']).toBe(true);
      for (let i = 0; i < 3; i++) await charge('room-1', 6).then(() => expect.unreachable('a key reused with other arguments is refused'), () => undefined);
      const started = Date.now();
      const next = await charge('room-2', 7);
      expect(next.isError).toBeFalsy();
      expect(next._meta?.['onejob/replayed']).toBe(false);
      expect(payments.ledger.calls).toBe(2);
      const job = await store.getJob('alice', next._meta?.['onejob/jobId'] as string);
      expect(job?.state).toBe('succeeded');
      // Not a measure of speed: a call the executor cannot take waits the whole maxWaitMs (4 s) and comes back unfinished.
      expect(Date.now() - started).toBeLessThan(4_000);
    });
  });
}
