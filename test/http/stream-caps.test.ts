/**
 * Long-lived streams are bounded per owner (issue 35), over real sockets on
 * SQLite and PostgreSQL: `GET /mcp` streams follow the `/v1/events` rule
 * (`eventFeeds.maxPerOwner`, read-only tokens of the owner counted too, `429
 * too_many_requests` past it) and end after their lifetime; SSE followers of
 * a job's stream (duplicates, `GET /v1/responses/{id}?stream=true`) are
 * capped by `eventFeeds.maxFollowersPerOwner`; a slot comes back when its
 * stream ends.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const WRITER = 'tok_alice_stream_caps_writer_01';
const READER = 'tok_alice_stream_caps_reader_01';
const OTHER = 'tok_bob_stream_caps_0123456789';
const LIFETIME_MS = 700;

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`per-owner stream caps (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let origin: string;
    let seq = 0;
    const open: AbortController[] = [];

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [WRITER]: 'alice', [READER]: { owner: 'alice', readOnly: true }, [OTHER]: 'bob' },
        eventFeeds: { maxPerOwner: 2, maxFollowersPerOwner: 1 },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 10_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100 }, mcpRoutes: { streamLifetimeMs: LIFETIME_MS } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      origin = `http://127.0.0.1:${address.port}`;
    });
    afterAll(async () => {
      for (const c of open) c.abort();
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const mcpStream = (token: string) => {
      const c = new AbortController();
      open.push(c);
      return fetch(`${origin}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-protocol-version': '2025-06-18' }, signal: c.signal })
        .then((r) => ({ r, close: () => c.abort() }));
    };

    it('GET /mcp: the owner\'s streams are capped by eventFeeds.maxPerOwner, read-only tokens included; another owner is not affected', async () => {
      const a = await mcpStream(WRITER);
      const b = await mcpStream(READER);
      expect([a.r.status, b.r.status]).toEqual([200, 200]);
      const c = await mcpStream(READER);
      expect(c.r.status).toBe(429);
      expect(((await c.r.json()) as { code: string }).code).toBe('too_many_requests');
      expect((await mcpStream(OTHER)).r.status).toBe(200);
      // A slot comes back when its stream ends.
      a.close();
      await new Promise((r) => setTimeout(r, 200));
      const d = await mcpStream(WRITER);
      expect(d.r.status).toBe(200);
      b.close();
      d.close();
    });

    it('GET /mcp: a stream ends after its lifetime', async () => {
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      const s = await mcpStream(WRITER);
      expect(s.r.status).toBe(200);
      await s.r.text(); // resolves when the server ends the body
      const lived = Date.now() - started;
      expect(lived).toBeGreaterThanOrEqual(LIFETIME_MS - 50);
      expect(lived).toBeLessThan(LIFETIME_MS + 5_000);
    });

    it('stream followers are capped by eventFeeds.maxFollowersPerOwner; the creating request is not a follower', async () => {
      const content = `followed ${++seq}`;
      const gate = `g-${db.name}-${seq}`;
      fake.when({ contains: content }, { chunks: ['a ', 'b'], streamGate: { afterChunks: 1, gate } });
      const body = JSON.stringify({ model: 'chat', stream: true, messages: [{ role: 'user', content }] });
      const key = `caps-${db.name}-${seq}`;
      const post = (): Promise<Response> => {
        const c = new AbortController();
        open.push(c);
        return fetch(`${origin}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${WRITER}`, 'content-type': 'application/json', 'idempotency-key': key }, body, signal: c.signal });
      };
      const creator = await post();
      expect(creator.status).toBe(200);
      const follower = await post();
      expect(follower.status).toBe(200);
      expect(follower.headers.get('idempotent-replayed')).toBe('true');
      const refused = await post();
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { code: string }).code).toBe('too_many_requests');
      fake.release(gate);
      await Promise.all([creator.text(), follower.text()]);
      await new Promise((r) => setTimeout(r, 100));
      // Its stream over, the slot is free: a replay streams again.
      const again = await post();
      expect(again.status).toBe(200);
      expect(await again.text()).toContain('[DONE]');
    });
  });
}
