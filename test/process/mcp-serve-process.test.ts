/**
 * The MCP gateway across a crash, with real processes (SQLite and
 * PostgreSQL): an agent's tool call is running upstream when its `onejob
 * serve` is killed -9; another `onejob serve` on the same database rescues the
 * attempt to `unknown`, and the agent's repeat of the call (same key) gets
 * the "outcome unknown" answer without a second upstream execution, until an
 * operator resolves it; then every repeat gets the resolution's result.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPaymentsHttp, type PaymentsLedger } from '../../examples/mcp/payments-server.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const TOKEN = 'tok_alice_mcp_process_0123456789';

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`MCP gateway: serve killed -9 during a tool call (${db.name})`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let payments: { url: string; ledger: PaymentsLedger; close(): Promise<void> };
    let dir: string;
    const children: ChildProcess[] = [];
    const clients: Client[] = [];

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      payments = await startPaymentsHttp();
      dir = mkdtempSync(join(tmpdir(), 'onejob-mcp-process-'));
      writeFileSync(join(dir, 'onejob.config.json'), JSON.stringify({
        apiKeys: { [TOKEN]: 'alice' },
        mcpServers: { pay: { url: payments.url, timeoutMs: 60_000 } },
      }));
    });
    afterEach(async () => {
      for (const c of clients.splice(0)) await c.close().catch(() => undefined);
      for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await payments.close();
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    async function serve(): Promise<{ child: ChildProcess; base: string }> {
      const port = await freePort();
      const child = spawn(process.execPath, [BIN, 'serve', '--port', String(port), '--host', '127.0.0.1', '--lease-ms', '1500', '--config', join(dir, 'onejob.config.json')], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'ignore'],
      });
      children.push(child);
      const base = `http://127.0.0.1:${port}`;
      await until('serve ready', async () => (await fetch(`${base}/readyz`)).status === 200, 60_000);
      return { child, base };
    }

    async function connect(base: string): Promise<Client> {
      const client = new Client({ name: 'agent', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
      clients.push(client);
      return client;
    }

    it('the repeat through another process answers "unknown" and executes nothing; after the resolve it answers the result', async () => {
      const a = await serve();
      const call = (client: Client) => client.callTool({ name: 'pay.charge', arguments: { amount: 9, hang: true }, _meta: { 'onejob/idempotencyKey': 'order-9' } }) as Promise<CallToolResult>;
      const first = call(await connect(a.base)).catch((e: unknown) => e);
      await until('the call upstream', async () => payments.ledger.calls === 1, 20_000);
      a.child.kill('SIGKILL');
      await first;

      const b = await serve();
      const repeat = await call(await connect(b.base));
      expect(repeat.isError).toBe(true);
      expect((repeat.content[0] as { text: string }).text).toContain('unknown');
      expect(payments.ledger.calls).toBe(1);
      const jobId = repeat._meta?.['onejob/jobId'] as string;
      const job = await store.getJob('alice', jobId);
      expect(job).toMatchObject({ state: 'unknown', route: 'mcp:pay.charge' });
      expect(job!.attempts).toHaveLength(1);

      const resolved = await fetch(`${b.base}/v1/attempts/${job!.attempts[0]!.id}/resolve`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'succeeded', result: { content: [{ type: 'text', text: 'charged 9 EUR (confirmed with the bank)' }] }, reason: 'bank statement' }),
      });
      expect(resolved.status).toBe(200);
      const after = await call(await connect(b.base));
      expect(after.isError).toBeFalsy();
      expect(after.content).toEqual([{ type: 'text', text: 'charged 9 EUR (confirmed with the bank)' }]);
      expect(payments.ledger.calls).toBe(1);
    }, 120_000);
  });
}
