/**
 * Usage and cost of every attempt (CONTRACT §8), recorded by the executor
 * against real fake providers over HTTP, on SQLite and PostgreSQL: the
 * winner, a superseded hedge loser, a contract violation, a late answer of an
 * unknown attempt, and a late answer after an operator already resolved it.
 * Event order is forced with the fake's gates, not sleeps.
 */
import { once } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Executor, type ExecutorOptions, type OutputCheck } from '../../src/executor/executor.ts';
import { jobCostMicros } from '../../src/http/api-bodies.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { instrumentUsage } from '../../src/http/usage-metrics.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };
/** USD per million tokens: 1000 prompt + 500 completion tokens cost 150 + 300 = 450 µ$ on the primary. */
const PRICES = { primary: { inputPerMTok: 0.15, outputPerMTok: 0.6 }, fallback: { inputPerMTok: 3, outputPerMTok: 15 } } as const;
const pricing = (p: string) => PRICES[p as keyof typeof PRICES] ?? null;

/**
 * `inner`, whose outcome is handed back only once the executor aborts the
 * request: an answer that was complete when the abort reached it.
 */
function answerWhenAborted(inner: Provider): Provider {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop !== 'call') {
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      }
      return async (request: Parameters<Provider['call']>[0]) => {
        const { signal, ...rest } = request;
        const outcome = await target.call({ ...rest, signal: new AbortController().signal });
        if (!signal.aborted) await once(signal, 'abort');
        return outcome;
      };
    },
  });
}

async function waitForJob(store: JobStore, jobId: string, pred: (j: NonNullable<Awaited<ReturnType<JobStore['getJob']>>>) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await store.getJob(OWNER, jobId);
    if (job && pred(job)) return job;
    if (Date.now() > deadline) throw new Error(`timed out waiting for job ${jobId}; last: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.usage]) })}`);
    await new Promise<void>((resolve) => {
      const off = store.onJobChanged((_, id) => id === jobId && (off(), resolve()));
      setTimeout(() => (off(), resolve()), 50);
    });
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`usage and cost on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      primary = await startFakeProvider();
      fallback = await startFakeProvider();
      providers = new Map([
        ['primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 300 })],
        ['fallback', createProvider('fallback', { type: 'anthropic', baseUrl: fallback.url, apiKey: 'k', model: 'claude-fake', timeoutMs: 5_000 })],
      ]);
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([primary.close(), fallback.close()]);
      await cleanup();
    });

    function executor(o: Partial<ExecutorOptions> = {}): Executor {
      const e = new Executor({ store, providers, routes: { summarize: { hedgeAfterMs: null }, hedged: { hedgeAfterMs: 100 } }, pollMs: 200, lateAnswerGraceMs: 10_000, pricing, ...o });
      executors.push(e);
      return e;
    }
    const create = (key: string, route = 'summarize') =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route, input: INPUT, providers: ['primary', 'fallback'] }).then((r) => r.job);

    it('the winner records the usage its provider reported and its exact cost in micro-dollars', async () => {
      primary.script([{ reply: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 500 } }]);
      const metrics = createMetrics({ processMetrics: false });
      const e = executor();
      instrumentUsage(e, metrics);
      await e.start();
      const job = await create('won');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', usage: { promptTokens: 1000, completionTokens: 500, totalTokens: 1500 }, costMicros: 450 });
      const text = await metrics.registry.metrics();
      expect(text).toContain('onejob_attempt_tokens_total{route="summarize",provider="primary",outcome="succeeded",kind="prompt"} 1000');
      expect(text).toContain('onejob_attempt_tokens_total{route="summarize",provider="primary",outcome="succeeded",kind="completion"} 500');
      expect(text).toContain('onejob_attempt_cost_usd_total{route="summarize",provider="primary",outcome="succeeded"} 0.00045');
    });

    it('an unpriced provider records usage with a null cost', async () => {
      primary.script([{ reply: 'ok', usage: { prompt_tokens: 7, completion_tokens: 3 } }]);
      await executor({ pricing: () => null }).start();
      const job = await create('unpriced');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ usage: { promptTokens: 7, completionTokens: 3, totalTokens: 10 }, costMicros: null });
    });

    it('a hedge loser stopped before it answered: its request is cancelled at the provider, no usage came back, the job costs what was reported', async () => {
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 }));
      primary.script([{ gate: 'primary', reply: 'primary answer', usage: { prompt_tokens: 2000, completion_tokens: 1000 } }]);
      fallback.script([{ reply: 'hedge answer', usage: { prompt_tokens: 100, completion_tokens: 10 } }]);
      const e = executor();
      await e.start();
      const job = await create('hedge-stopped', 'hedged');
      await once(e.events, 'hedge:started');
      const after = await waitForJob(store, job.id, (j) => j.state === 'succeeded' && j.attempts[0]!.state === 'superseded');
      // The abort reached the provider while it was still working: the client went away, nothing was billed back to us.
      expect((await primary.waitForResult(1)).result).toBe('client-closed');
      primary.release('primary');
      expect(after.result).toMatchObject({ content: 'hedge answer', provider: 'fallback' });
      // fallback: 100 × 3 + 10 × 15 = 450 µ$; the stopped primary reported nothing.
      expect(after.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null, a.usage, a.costMicros])).toEqual([
        ['primary', 'superseded', 'superseded', null, null],
        ['fallback', 'succeeded', null, { promptTokens: 100, completionTokens: 10, totalTokens: 110 }, 450],
      ]);
      expect(jobCostMicros(after.attempts)).toBe(450);
    });

    it('a superseded hedge loser whose answer had arrived when the abort reached it keeps its usage and cost, not its payload', async () => {
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 }));
      // The primary answers at once, but its answer is held (in this process, after the HTTP exchange
      // is over) until the executor stops the request: the answer and the abort cross, deterministically.
      providers.set('primary', answerWhenAborted(providers.get('primary')!));
      primary.script([{ reply: 'primary answer', usage: { prompt_tokens: 2000, completion_tokens: 1000 } }]);
      fallback.script([{ reply: 'hedge answer', usage: { prompt_tokens: 100, completion_tokens: 10 } }]);
      const e = executor();
      await e.start();
      const job = await create('hedge', 'hedged');
      await once(e.events, 'hedge:started');
      const after = await waitForJob(store, job.id, (j) => j.state === 'succeeded' && j.attempts[0]!.state === 'superseded');
      expect((await primary.waitForResult(1)).result).toBe('replied');
      expect(after.result).toMatchObject({ content: 'hedge answer', provider: 'fallback' });
      // primary: 2000 × 0.15 + 1000 × 0.6 = 900 µ$; fallback: 100 × 3 + 10 × 15 = 450 µ$.
      expect(after.attempts.map((a) => [a.provider, a.state, a.usage?.totalTokens, a.costMicros])).toEqual([
        ['primary', 'superseded', 3000, 900],
        ['fallback', 'succeeded', 110, 450],
      ]);
      expect(jobCostMicros(after.attempts)).toBe(1350);
      const events = await store.listEvents(OWNER, job.id);
      expect(events.filter((ev) => ev.type === 'race.lost')).toHaveLength(1);
    });

    it('a failed attempt whose provider answered (contract violation) keeps its usage', async () => {
      const checkOutput: OutputCheck = (_r, _i, c) => (c.content.startsWith('{') ? { ok: true, value: JSON.parse(c.content) } : { ok: false, findings: ['not JSON'] });
      primary.script([{ reply: 'not json at all', usage: { prompt_tokens: 40, completion_tokens: 20 } }]);
      fallback.script([{ reply: { summary: 'x' }, usage: { prompt_tokens: 50, completion_tokens: 5 } }]);
      await executor({ checkOutput }).start();
      const job = await create('contract');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.state, a.error?.code ?? null, a.usage?.promptTokens, a.costMicros])).toEqual([
        ['failed', 'contract_violation', 40, 18], // 40 × 0.15 + 20 × 0.6 = 18
        ['succeeded', null, 50, 225], // 50 × 3 + 5 × 15 = 225
      ]);
    });

    it('a late answer of an unknown attempt records its usage when it settles', async () => {
      primary.script([{ gate: 'late', reply: 'late but first', usage: { prompt_tokens: 10, completion_tokens: 10 } }]);
      const e = executor();
      await e.start();
      const job = await create('late');
      await once(e.events, 'attempt:unknown');
      const blocked = await waitForJob(store, job.id, (j) => j.state === 'unknown');
      expect(blocked.attempts[0]).toMatchObject({ state: 'unknown', usage: null, costMicros: null });
      primary.release('late');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', usage: { totalTokens: 20 }, costMicros: 8 }); // 1.5 + 6 = 7.5 → 8
    });

    it('a late answer after an operator resolved the attempt, while the job is still undecided, keeps its cost, not its payload', async () => {
      primary.script([{ gate: 'late', reply: 'too late', usage: { prompt_tokens: 1000, completion_tokens: 1000 } }]);
      fallback.script([{ gate: 'fallback', reply: 'from the fallback', usage: { prompt_tokens: 1, completion_tokens: 1 } }]);
      const e = executor();
      await e.start();
      const job = await create('resolved-then-late');
      const [unknownAttempt] = await once(e.events, 'attempt:unknown');
      await store.settleAttempt({ ownerId: OWNER, attemptId: unknownAttempt.id, outcome: { state: 'failed', error: { code: 'resolved', message: 'operator: it never ran' } }, actor: 'api', reason: 'provider status page says it never ran' });
      // The failover to the fallback is on its way (held at its gate): the job is not decided, so the executor still listens.
      await fallback.waitForCalls(1);
      primary.release('late');
      const late = await waitForJob(store, job.id, (j) => j.attempts[0]!.usage !== null);
      expect(late.state).toBe('running');
      expect(late.attempts[0]).toMatchObject({ state: 'failed', usage: { promptTokens: 1000, completionTokens: 1000 }, costMicros: 750 });
      expect((await primary.waitForResult(1)).result).toBe('replied');
      fallback.release('fallback');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.result).toMatchObject({ content: 'from the fallback', provider: 'fallback' });
      expect(done.attempts.map((a) => [a.state, a.costMicros])).toEqual([['failed', 750], ['succeeded', 18]]); // 1 × 3 + 1 × 15 = 18
      expect(jobCostMicros(done.attempts)).toBe(768);
      const events = await store.listEvents(OWNER, job.id);
      expect(events.find((ev) => ev.type === 'attempt.failed')?.data).toMatchObject({ actor: 'api', reason: 'provider status page says it never ran' });
      expect(events.find((ev) => ev.type === 'attempt.usage_recorded')?.data).toMatchObject({ state: 'failed', cost_micros: 750 });
      // Recorded once: a second report changes nothing.
      expect(await store.recordLateUsage({ ownerId: OWNER, attemptId: unknownAttempt.id, usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, costMicros: 1 })).toBe(false);
    });

    it('once the job is decided after a resolve, the resolved attempt\'s request is stopped: no late answer, no usage', async () => {
      primary.script([{ gate: 'late', reply: 'too late', usage: { prompt_tokens: 1000, completion_tokens: 1000 } }]);
      fallback.script([{ reply: 'from the fallback', usage: { prompt_tokens: 1, completion_tokens: 1 } }]);
      const e = executor();
      await e.start();
      const job = await create('resolved-then-decided');
      const [unknownAttempt] = await once(e.events, 'attempt:unknown');
      const primaryFinished = new Promise<void>((r) => e.events.on('attempt:finished', (a) => a.id === unknownAttempt.id && r()));
      await store.settleAttempt({ ownerId: OWNER, attemptId: unknownAttempt.id, outcome: { state: 'failed', error: { code: 'resolved', message: 'operator: it never ran' } }, actor: 'api', reason: 'provider status page says it never ran' });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      // The fallback won: the executor aborts the primary's request, which had not answered.
      expect((await primary.waitForResult(1)).result).toBe('client-closed');
      primary.release('late');
      await primaryFinished;
      const after = await store.getJob(OWNER, job.id);
      expect(after!.attempts.map((a) => [a.state, a.usage, a.costMicros])).toEqual([
        ['failed', null, null],
        ['succeeded', { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 18],
      ]);
      expect(jobCostMicros(after!.attempts)).toBe(18);
      expect(after!.result).toEqual(done.result);
      const events = await store.listEvents(OWNER, job.id);
      expect(events.filter((ev) => ev.type === 'attempt.usage_recorded')).toEqual([]);
    });
  });
}
