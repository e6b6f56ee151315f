/**
 * `Server-Timing` and `onejob_gateway_overhead_seconds` (issue 11): the
 * answer splits its time into onejob's and the provider's, from the provider
 * calls this process made for the job within the request's window.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { providerWaitWithin, recordProviderWait } from '../../src/core/provider-waits.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics, type Metrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_timing_0123456789';
const messages = [{ role: 'user', content: 'Say hi' }];

/** `onejob;dur=1.2, provider;dur=3.4` → { onejob: 1.2, provider: 3.4 }. */
function parseServerTiming(value: string | null): Record<string, number> {
  expect(value).not.toBeNull();
  const out: Record<string, number> = {};
  for (const metric of value!.split(',')) {
    const [name, ...params] = metric.trim().split(';');
    const dur = params.find((p) => p.startsWith('dur='));
    if (dur !== undefined) out[name!] = Number(dur.slice(4));
  }
  return out;
}

describe('provider waits', () => {
  it('counts overlapping intervals once and only inside the window', () => {
    const job = `job_pw_${Date.now()}`;
    recordProviderWait(job, 100, 200);
    recordProviderWait(job, 150, 260); // a hedge overlapping the first
    recordProviderWait(job, 300, 310);
    expect(providerWaitWithin(job, 0, 1_000)).toBeCloseTo(170);
    expect(providerWaitWithin(job, 250, 1_000)).toBeCloseTo(20);
    expect(providerWaitWithin(job, 400, 1_000)).toBe(0);
    expect(providerWaitWithin(`${job}_other`, 0, 1_000)).toBeNull();
  });
});

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`Server-Timing (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let app: FastifyInstance;
    let metrics: Metrics;
    let base: string;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [TOKEN]: 'alice' },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      const executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      metrics = createMetrics({ processMetrics: false });
      app = buildApp({ store, config, metrics, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 5_000, retryAfterMs: 100 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      base = `http://127.0.0.1:${address.port}`;
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const post = (path: string, key: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
      });
    const overheadCount = async (route: string) => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`onejob_gateway_overhead_seconds_count{route="${route}"}`));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };

    it('a chat completion reports the provider time it waited and onejob time as the rest', async () => {
      fake.script([{ delayMs: 150, reply: 'hi' }]);
      const before = await overheadCount('chat_completions');
      const key = `timing-${db.name}-${Date.now()}`;
      const res = await post('/v1/chat/completions', key, { model: 'chat', messages });
      expect(res.status).toBe(200);
      const timing = parseServerTiming(res.headers.get('server-timing'));
      // The provider held the answer for 150 ms; the provider share contains that, onejob's is what is left.
      expect(timing.provider).toBeGreaterThanOrEqual(150);
      expect(timing.onejob).toBeGreaterThanOrEqual(0);
      expect(await overheadCount('chat_completions')).toBe(before + 1);

      // The same key again: joined a finished job, no provider call inside this request.
      const replay = await post('/v1/chat/completions', key, { model: 'chat', messages });
      expect(replay.status).toBe(200);
      expect(parseServerTiming(replay.headers.get('server-timing')).provider).toBe(0);
      expect(await overheadCount('chat_completions')).toBe(before + 2);
    });

    it('POST /v1/jobs waits on no provider', async () => {
      const before = await overheadCount('jobs_create');
      const res = await post('/v1/jobs', `timing-job-${db.name}-${Date.now()}`, { route: 'chat', input: { messages } });
      expect(res.status).toBe(201);
      const timing = parseServerTiming(res.headers.get('server-timing'));
      expect(timing.provider).toBe(0);
      expect(timing.onejob).toBeGreaterThan(0);
      expect(await overheadCount('jobs_create')).toBe(before + 1);
    });

    it('other routes carry no Server-Timing', async () => {
      const res = await fetch(`${base}/v1/jobs?limit=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('server-timing')).toBeNull();
    });
  });
}
