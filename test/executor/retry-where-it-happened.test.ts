/**
 * A definite failure retried where it happened (CONTRACT §11, a provider's
 * `retry`), on SQLite and PostgreSQL, against fake providers over real HTTP:
 * a 429 with `Retry-After` under a policy starts a new attempt on the same
 * provider once the wait is over; without a policy, or when the provider asks
 * for more than `maxWaitMs`, the job fails over at once; a refused connection
 * is retried too.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RetryPolicy } from '../../src/core/job-rules.ts';
import { Executor, type ExecutorOptions } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };

type JobView = NonNullable<Awaited<ReturnType<JobStore['getJob']>>>;

async function waitForJob(store: JobStore, jobId: string, pred: (j: JobView) => boolean, timeoutMs = 15_000): Promise<JobView> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await store.getJob(OWNER, jobId);
    if (job && pred(job)) return job;
    if (Date.now() > deadline) throw new Error(`timed out waiting for job ${jobId}; last: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.provider, a.state, a.error?.code]) })}`);
    await new Promise<void>((resolve) => {
      const off = store.onJobChanged((_, id) => id === jobId && (off(), resolve()));
      setTimeout(() => (off(), resolve()), 50);
    });
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`retry where it happened (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    const executors: Executor[] = [];
    const extraFakes: FakeProvider[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [primary, fallback] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      providers = new Map([
        ['primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 })],
        ['fallback', createProvider('fallback', { type: 'openai', baseUrl: `${fallback.url}/v1`, apiKey: 'k', model: 'gpt-fallback', timeoutMs: 5_000 })],
      ]);
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([primary.close(), fallback.close(), ...extraFakes.splice(0).map((f) => f.close())]);
      await cleanup();
    });

    function executor(retry: Readonly<Record<string, RetryPolicy>>, o: Partial<ExecutorOptions> = {}): Executor {
      // A slow poll: a retry that is claimed on time was woken by its own timer, not found by chance.
      const e = new Executor({ store, providers, routes: { summarize: { hedgeAfterMs: null } }, pollMs: 10_000, retry: (p) => retry[p] ?? null, ...o });
      executors.push(e);
      return e;
    }
    const create = (key: string, chain = ['primary', 'fallback']) =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'summarize', input: INPUT, providers: chain }).then((r) => r.job);

    it('a 429 with Retry-After: 1 under retry {attempts: 2}: a second attempt on the same provider after the wait succeeds; the fallback is never called', async () => {
      primary.script([{ status: 429, headers: { 'retry-after': '1' } }, { reply: 'second time lucky' }]);
      await executor({ primary: { attempts: 2, maxWaitMs: 5_000 } }).start();
      const job = await create('rate-limited');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.number, a.provider, a.state, a.error?.code ?? null])).toEqual([
        [1, 'primary', 'failed', 'provider_rate_limited'],
        [2, 'primary', 'succeeded', null],
      ]);
      expect(done.result).toMatchObject({ content: 'second time lucky', provider: 'primary' });
      // The new attempt became claimable exactly the wait the provider asked for after the failure (both times are the database's).
      expect(done.attempts[1]!.startedAt.getTime() - done.attempts[0]!.finishedAt!.getTime()).toBe(1_000);
      expect(primary.calls).toHaveLength(2);
      expect(Date.parse(primary.calls[1]!.receivedAt) - Date.parse(primary.calls[0]!.receivedAt)).toBeGreaterThanOrEqual(1_000);
      expect(primary.calls[1]!.idempotencyKey).toBe(`${job.id}:2`);
      expect(fallback.calls).toHaveLength(0);
      // Visible in the event log: the retry names the attempt it retries and when it is due.
      const started = (await store.listEvents(OWNER, job.id)).filter((e) => e.type === 'attempt.started');
      expect(started.map((e) => e.data)).toEqual([
        expect.objectContaining({ number: 1, provider: 'primary', kind: 'first' }),
        expect.objectContaining({ number: 2, provider: 'primary', kind: 'failover', retry_of: done.attempts[0]!.id, due_at: done.attempts[1]!.startedAt.toISOString() }),
      ]);
    });

    it('without a retry policy a 429 with Retry-After fails over at once, as before', async () => {
      primary.script([{ status: 429, headers: { 'retry-after': '1' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor({}).start();
      const job = await create('no-policy');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state])).toEqual([['primary', 'failed'], ['fallback', 'succeeded']]);
      expect(done.attempts[1]!.startedAt.getTime()).toBe(done.attempts[0]!.finishedAt!.getTime());
      expect(primary.calls).toHaveLength(1);
    });

    it('a Retry-After longer than maxWaitMs fails over at once', async () => {
      primary.script([{ status: 503, headers: { 'retry-after': '30' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor({ primary: { attempts: 3, maxWaitMs: 5_000 } }).start();
      const job = await create('too-long');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null])).toEqual([['primary', 'failed', 'provider_overloaded'], ['fallback', 'succeeded', null]]);
      expect(primary.calls).toHaveLength(1);
    });

    it('a 429 without Retry-After fails over at once even under a policy (nothing says when to come back)', async () => {
      primary.script([{ status: 429, headers: { 'retry-after': '' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor({ primary: { attempts: 3, maxWaitMs: 5_000 } }).start();
      const job = await create('no-header');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state])).toEqual([['primary', 'failed'], ['fallback', 'succeeded']]);
      expect(done.attempts[0]!.error?.details).not.toHaveProperty('retry_after_ms');
    });

    it('the attempts of a policy are used up, then the job fails over', async () => {
      primary.script([{ status: 429, headers: { 'retry-after': '0' } }, { status: 429, headers: { 'retry-after': '0' } }, { reply: 'never asked' }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor({ primary: { attempts: 2, maxWaitMs: 5_000 } }).start();
      const job = await create('used-up');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.number, a.provider, a.state])).toEqual([[1, 'primary', 'failed'], [2, 'primary', 'failed'], [3, 'fallback', 'succeeded']]);
      expect(primary.calls).toHaveLength(2);
    });

    it('a connection refused before anything was sent is retried on the same provider', async () => {
      const port = await freePort();
      providers.set('refusing', createProvider('refusing', { type: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'k', model: 'gpt-late', timeoutMs: 5_000 }));
      const e = executor({ refusing: { attempts: 2, maxWaitMs: 5_000 } });
      // The provider comes up once the first attempt was refused (the retry waits 500 ms).
      let late: Promise<FakeProvider> | null = null;
      e.events.on('attempt:settled', (a, r) => {
        if (a.provider === 'refusing' && r.state === 'failed' && late === null) {
          late = startFakeProvider({ port, script: { default: { reply: 'up now' } } });
          void late.then((f) => extraFakes.push(f));
        }
      });
      await e.start();
      const job = await create('refused', ['refusing', 'fallback']);
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null])).toEqual([['refusing', 'failed', 'provider_unreachable'], ['refusing', 'succeeded', null]]);
      expect(done.attempts[0]!.error?.details).toMatchObject({ phase: 'before_send', cause_code: 'ECONNREFUSED' });
      expect(done.attempts[1]!.startedAt.getTime() - done.attempts[0]!.finishedAt!.getTime()).toBe(500);
      expect(done.result).toMatchObject({ content: 'up now', provider: 'refusing' });
      expect(fallback.calls).toHaveLength(0);
    });

    it('while a retry waits, no other attempt may start (attempt_in_doubt) and a cancel cancels it unsent', async () => {
      primary.script([{ status: 429, headers: { 'retry-after': '3' } }, { reply: 'too late' }]);
      await executor({ primary: { attempts: 2, maxWaitMs: 5_000 } }).start();
      const job = await create('waiting');
      const waiting = await waitForJob(store, job.id, (j) => j.attempts.length === 2);
      expect(waiting.state).toBe('running');
      expect(waiting.attempts[1]).toMatchObject({ provider: 'primary', state: 'starting', leaseOwner: null });
      await expect(store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', provider: 'fallback', hedgeAfterMs: null })).rejects.toMatchObject({ code: 'attempt_in_doubt' });
      const cancelled = await store.cancelJob(OWNER, job.id);
      expect(cancelled.state).toBe('cancelled');
      expect(cancelled.attempts.map((a) => a.state)).toEqual(['failed', 'cancelled']);
      expect(primary.calls).toHaveLength(1);
      expect(fallback.calls).toHaveLength(0);
    });
  });
}
