/**
 * The gateway's fast path (a new chat job's first attempt leased to this
 * process inside the insert), on SQLite and PostgreSQL: a create whose answer
 * was lost never leaves a never-sent attempt to doubt, and a burst of creates
 * never runs more than the executor's `concurrency` at once (issue #20 §2).
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_fast_0123456789';
const OWNER = 'alice';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the fast path keeps its first attempts (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let baseURL: string;

    async function start(appStore: JobStore, concurrency: number): Promise<void> {
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 10_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100, leaseMs: 1_500, rescueEveryMs: 200, concurrency });
      executor.events.on('error', () => undefined);
      await executor.start();
      app = buildApp({ store: appStore, config, metrics: createMetrics({ processMetrics: false }), executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      baseURL = `http://127.0.0.1:${address.port}/v1`;
    }
    const chat = (key: string, content: string) =>
      fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content }] }),
      });

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake.close();
      await cleanup();
    });

    it('a create whose commit answer was lost: the attempt leased in the insert is handed back and runs; never unknown, the retry gets the answer', async () => {
      fake.script([{ reply: 'ran once' }]);
      // The first create commits, then its connection drops before the answer (ECONNRESET): the request fails.
      let creates = 0;
      const lossy = new Proxy(store, {
        get(target, name) {
          const v = Reflect.get(target, name, target) as unknown;
          if (name === 'createJob') {
            return async (...args: Parameters<JobStore['createJob']>) => {
              const first = creates++ === 0;
              const r = await target.createJob(...args);
              if (first) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
              return r;
            };
          }
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      await start(lossy, 8);
      const first = await chat('lost-create', 'hello');
      expect(first.status).toBeGreaterThanOrEqual(500);
      // Longer than the lease and a rescue pass: a leased, never-sent attempt would be unknown by now.
      await new Promise((r) => setTimeout(r, 2_500));
      const [job] = (await store.listJobs({ ownerId: OWNER })).jobs;
      expect(job?.attempts.map((a) => a.state)).toEqual(['succeeded']);
      expect((await store.listEvents(OWNER, job!.id)).map((e) => e.type)).not.toContain('attempt.unknown');
      const retry = await chat('lost-create', 'hello');
      expect(retry.status).toBe(200);
      expect(((await retry.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('ran once');
      expect(fake.calls).toHaveLength(1);
    });

    it('a burst of creates never runs more than concurrency attempts at once: room is reserved before the lease', async () => {
      fake.setDefault({ gate: 'open', reply: 'ok' });
      await start(store, 2);
      let most = 0;
      executor.events.on('attempt:claimed', () => (most = Math.max(most, executor.inFlight)));
      const answers = Promise.all(Array.from({ length: 6 }, (_, i) => chat(`burst-${i}`, `q${i}`)));
      await fake.waitForCalls(2);
      await new Promise((r) => setTimeout(r, 300));
      expect(fake.calls.length).toBe(2);
      fake.release('open');
      const statuses = (await answers).map((r) => r.status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
      expect(most).toBeLessThanOrEqual(2);
      expect(fake.calls).toHaveLength(6);
    });
  });
}
