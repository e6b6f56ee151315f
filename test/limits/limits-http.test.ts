/**
 * Budgets and limits over HTTP (CONTRACT §16), both engines, with the
 * executor in the process and a priced fake provider: refusals are 429 with
 * their code (OpenAI `insufficient_quota`), Retry-After where the contract
 * gives one, nothing created and the key unused; replays never refused;
 * `GET /v1/limits` and `/metrics`; concurrent creates never reserve past the
 * limit at any sampled moment, and what was spent stays within it.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import { spendPolicyOf } from '../../src/config/limits-config.ts';
import { worstCaseMicros } from '../../src/core/limits.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const pricing = { inputPerMTok: 1, outputPerMTok: 1 };
const MAX_OUT = 1000;
const messages = [{ role: 'user', content: 'hi' }];
const chatBody = { model: 'chat', messages };
/** The worst case of one chat job: the input onejob stores (the body without `model`) and the provider's maxOutputTokens. */
const WORST = worstCaseMicros({ messages }, pricing, MAX_OUT);

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip)(`limits over HTTP (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let runtime: Runtime;
    let app: FastifyInstance;
    let fake: FakeProvider;
    let base: string;
    let config: OnejobConfig;
    let seq = 0;

    beforeAll(async () => {
      fake = await startFakeProvider();
      config = defineConfig({
        apiKeys: { tok_spender: 'spender', tok_rater: 'rater', tok_busy: 'busy', tok_crowd: 'crowd' },
        providers: { p: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'm', timeoutMs: 10_000, pricing, maxOutputTokens: MAX_OUT } },
        routes: { chat: { providers: ['p'] } },
        limits: {
          owners: {
            spender: { spendUsd: { day: (10 * WORST) / 1e6 } },
            crowd: { spendUsd: { day: (25 * WORST) / 1e6, month: 1000 } },
            rater: { requestsPerMinute: 3 },
            busy: { concurrency: 1 },
          },
        },
      });
      ({ store, cleanup } = await createTestStore(db, { spend: spendPolicyOf(config) }));
      runtime = await createRuntime({ config, store });
      const executor = runtime.createExecutor({ pollMs: 100 });
      await executor.start();
      app = buildApp({ store, config, metrics: createMetrics({ processMetrics: false }), executor, waitRecheckMs: 200 });
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
    beforeEach(() => fake.reset());

    const post = async (path: string, token: string, key: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, headers: res.headers, body: await res.json() as any };
    };
    const get = async (path: string, token: string) => {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, text: await res.text() };
    };
    const limitsOf = async (token: string) => JSON.parse((await get('/v1/limits', token)).text);
    const key = () => `k-${db.name}-${Date.now()}-${++seq}`;

    it('spends down to the limit, then 429 budget_exceeded (insufficient_quota), nothing created; a replay still answers', async () => {
      fake.script({ replace: true, default: { reply: 'ok', usage: { prompt_tokens: 10, completion_tokens: 90 } } });
      const keys: string[] = [];
      let refused: Awaited<ReturnType<typeof post>> | null = null;
      for (let i = 0; i < 200 && refused === null; i++) {
        const k = key();
        const r = await post('/v1/chat/completions', 'tok_spender', k, chatBody);
        if (r.status === 429) refused = { ...r, body: { ...r.body, key: k } };
        else {
          expect(r.status).toBe(200);
          keys.push(k);
        }
      }
      expect(refused).not.toBeNull();
      expect(refused!.body).toMatchObject({ code: 'budget_exceeded', window: 'day', error: { type: 'insufficient_quota', code: 'budget_exceeded' } });
      // Each answer cost 100 µ$ and reserved WORST while running: the limit (10 worst cases) is what was let through.
      const l = await limitsOf('tok_spender');
      expect(l.spend_usd.day.reserved).toBe(0);
      expect(l.spend_usd.day.spent * 1e6).toBeLessThanOrEqual(10 * WORST);
      expect(Math.round(l.spend_usd.day.spent * 1e6) + WORST).toBeGreaterThan(10 * WORST);
      expect(l).toMatchObject({ spend_usd: { day: { limit: (10 * WORST) / 1e6 }, month: { limit: null, resets_at: expect.any(String) } }, concurrency: { limit: null, in_use: 0 }, requests_per_minute: { limit: null } });
      // Nothing created for the refused key, on either endpoint.
      const jobs = await store.listJobs({ ownerId: 'spender', limit: 200 });
      expect(jobs.jobs.map((j) => j.idempotencyKey)).not.toContain(refused!.body.key);
      expect(jobs.jobs).toHaveLength(keys.length);
      const viaJobs = await post('/v1/jobs', 'tok_spender', key(), { route: 'chat', input: { messages } });
      expect(viaJobs.status).toBe(429);
      expect(viaJobs.body.code).toBe('budget_exceeded');
      // A replay is never refused.
      const replay = await post('/v1/chat/completions', 'tok_spender', keys[0]!, chatBody);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      // /metrics per owner.
      const metrics = (await get('/metrics', 'tok_spender')).text;
      expect(metrics).toMatch(/onejob_limit_spend_usd\{owner="spender",window="day",kind="limit"\} /);
      expect(metrics).toMatch(/onejob_limit_refusals_total\{owner="spender",code="budget_exceeded"\} 2/);
      expect((await limitsOf('tok_spender')).refusals).toEqual({ budget_exceeded: 2, concurrency_limited: 0, rate_limited: 0 });
    }, 60_000);

    it('100 concurrent distinct creates against 25 worst cases: ≤ the limit reserved+spent at every sample, refused ones 429 with no job, spent ≤ limit', async () => {
      const limit = 25 * WORST;
      fake.script({ replace: true, default: { delayMs: 150, reply: 'ok', usage: { prompt_tokens: 10, completion_tokens: 900 } } });
      let sampling = true;
      let samples = 0;
      let maxSeen = 0;
      const sampler = (async () => {
        while (sampling) {
          const { use } = await store.ownerUse('crowd');
          maxSeen = Math.max(maxSeen, use.day.spentMicros + use.day.reservedMicros);
          samples++;
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const keys = Array.from({ length: 100 }, key);
      const results = await Promise.all(keys.map((k, i) => (i % 4 === 0 ? post('/v1/jobs', 'tok_crowd', k, { route: 'chat', input: { messages } }) : post('/v1/chat/completions', 'tok_crowd', k, chatBody))));
      // Wait for the POST /v1/jobs ones to finish.
      for (let i = 0; i < 100; i++) {
        const { use } = await store.ownerUse('crowd');
        if (use.day.reservedMicros === 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      sampling = false;
      await sampler;
      expect(samples).toBeGreaterThan(5);
      expect(maxSeen).toBeLessThanOrEqual(limit);
      const jobs = (await store.listJobs({ ownerId: 'crowd', limit: 200 })).jobs;
      const created = new Set(jobs.map((j) => j.idempotencyKey));
      results.forEach((r, i) => {
        if (r.status === 429) {
          expect(r.body.code).toBe('budget_exceeded');
          expect(created.has(keys[i]!)).toBe(false);
        } else expect([200, 201]).toContain(r.status);
      });
      expect(results.filter((r) => r.status === 429).length).toBeGreaterThan(0);
      const spent = jobs.flatMap((j) => j.attempts).reduce((s, a) => s + (a.costMicros ?? 0), 0);
      expect(spent).toBeLessThanOrEqual(limit);
      expect((await store.ownerUse('crowd')).use.day).toEqual({ spentMicros: spent, reservedMicros: 0 });
    }, 90_000);

    it('requestsPerMinute: creates that created a job count; the next is 429 rate_limited with Retry-After; replays pass', async () => {
      fake.script({ replace: true, default: { reply: 'ok' } });
      const first = key();
      for (const k of [first, key(), key()]) expect((await post('/v1/jobs', 'tok_rater', k, { route: 'chat', input: { messages } })).status).toBe(201);
      const over = await post('/v1/jobs', 'tok_rater', key(), { route: 'chat', input: { messages } });
      expect(over.status).toBe(429);
      expect(over.body.code).toBe('rate_limited');
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      expect((await post('/v1/jobs', 'tok_rater', first, { route: 'chat', input: { messages } })).status).toBe(200);
      expect((await store.listJobs({ ownerId: 'rater', limit: 200 })).jobs).toHaveLength(3);
      expect((await limitsOf('tok_rater')).requests_per_minute).toEqual({ limit: 3, used: 3 });
    });

    it('concurrency: a gateway request over it is 429 concurrency_limited (Retry-After: 1); a POST /v1/jobs job waits queued', async () => {
      fake.script({ replace: true, default: { delayMs: 1_500, reply: 'slow' } });
      const slow = post('/v1/chat/completions', 'tok_busy', key(), chatBody);
      for (let i = 0; i < 50 && (await limitsOf('tok_busy')).concurrency.in_use < 1; i++) await new Promise((r) => setTimeout(r, 20));
      const refused = await post('/v1/chat/completions', 'tok_busy', key(), chatBody);
      expect(refused.status).toBe(429);
      expect(refused.body.code).toBe('concurrency_limited');
      expect(refused.headers.get('retry-after')).toBe('1');
      const queued = await post('/v1/jobs', 'tok_busy', key(), { route: 'chat', input: { messages } });
      expect(queued.status).toBe(201);
      expect(queued.body.state).toBe('queued');
      expect((await slow).status).toBe(200);
      // Once the slow one is done, the queued job runs.
      for (let i = 0; i < 100; i++) {
        const j = await store.getJob('busy', queued.body.id);
        if (j?.state === 'succeeded') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await store.getJob('busy', queued.body.id))?.state).toBe('succeeded');
    }, 30_000);
  });
}
