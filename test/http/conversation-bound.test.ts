/**
 * A continued conversation is bounded (issue 35), over real HTTP on SQLite
 * and PostgreSQL: `previous_response_id` expanded with the request's input
 * may not exceed `maxConversationBytes`; past it `413 conversation_too_large`
 * (problem+json with the OpenAI `error` member), and nothing is created.
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

const TOKEN = 'tok_alice_conversation_bound_01';
const MAX = 3_000;

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`conversation bound (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let origin: string;
    let seq = 0;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [TOKEN]: 'alice' },
        maxConversationBytes: MAX,
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 5_000, retryAfterMs: 100 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      origin = `http://127.0.0.1:${address.port}`;
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const respond = (body: Record<string, unknown>) => fetch(`${origin}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': `conv-${db.name}-${++seq}` },
      body: JSON.stringify({ model: 'chat', ...body }),
    });

    it('continuing past maxConversationBytes is 413 conversation_too_large and creates nothing; below it continues', async () => {
      const turn = 'x'.repeat(700);
      let previous: string | null = null;
      let refused: Response | null = null;
      // Each turn adds the input and the (echoed) answer: the conversation grows ~1.4 kB a turn.
      for (let i = 0; i < 6 && refused === null; i++) {
        const r = await respond({ input: `${turn} ${i}`, ...(previous === null ? {} : { previous_response_id: previous }) });
        if (r.status === 413) refused = r;
        else {
          expect(r.status).toBe(200);
          previous = ((await r.json()) as { id: string }).id;
        }
      }
      expect(refused).not.toBeNull();
      const before = (await store.listJobs({ ownerId: 'alice', limit: 200 })).jobs.length;
      const problem = (await refused!.json()) as { code: string; error: { code: string; message: string }; max_bytes: number };
      expect(problem.code).toBe('conversation_too_large');
      expect(problem.error.code).toBe('conversation_too_large');
      expect(problem.error.message).toContain(`maxConversationBytes (${MAX})`);
      expect(problem.max_bytes).toBe(MAX);
      expect((await store.listJobs({ ownerId: 'alice', limit: 200 })).jobs.length).toBe(before);
    });
  });
}
