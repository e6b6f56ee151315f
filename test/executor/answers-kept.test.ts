/**
 * No answer dropped, no doubt of our own making (issue #20 §2), against real
 * fake providers over HTTP, on SQLite and PostgreSQL.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Executor, type ExecutorOptions } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider, ProviderRequest } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };

/** `inner`, its request leaving only after `ms` (a slow connect: DNS, TCP, TLS, a busy pool): nothing is sent before. */
function slowToConnect(inner: Provider, ms: number): Provider {
  const later = async <T>(go: () => Promise<T>): Promise<T> => {
    await new Promise((r) => setTimeout(r, ms));
    return go();
  };
  return Object.assign(Object.create(inner) as Provider, {
    call: (request: ProviderRequest) => later(() => inner.call(request)),
    stream: (request: ProviderRequest, onDelta: Parameters<Provider['stream']>[1]) => later(() => inner.stream(request, onDelta)),
  });
}

async function waitForJob(store: JobStore, jobId: string, pred: (j: NonNullable<Awaited<ReturnType<JobStore['getJob']>>>) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await store.getJob(OWNER, jobId);
    if (job && pred(job)) return job;
    if (Date.now() > deadline) throw new Error(`timed out waiting for job ${jobId}; last: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.error?.code]) })}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`answers kept, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let fallback: FakeProvider;
    const providers: Provider[] = [];
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      primary = await startFakeProvider();
      fallback = await startFakeProvider();
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all(providers.splice(0).map((p) => p.close()));
      await Promise.all([primary.close(), fallback.close()]);
      await cleanup();
    });

    function executor(map: Map<string, Provider>, o: Partial<ExecutorOptions> = {}): Executor {
      const e = new Executor({ store, providers: map, routes: { summarize: { hedgeAfterMs: null } }, pollMs: 100, lateAnswerGraceMs: 10_000, ...o });
      e.events.on('error', () => undefined);
      executors.push(e);
      return e;
    }
    const openai = (name: string, url: string, timeoutMs: number) => {
      const p = createProvider(name, { type: 'openai', baseUrl: `${url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs });
      providers.push(p);
      return p;
    };
    const create = (key: string) =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'summarize', input: INPUT, providers: ['primary', 'fallback'] }).then((r) => r.job);

    it('the deadline counts from when the request was written: a connect slower than timeoutMs still gets its answer recorded', async () => {
      // timeoutMs 300; the request leaves at 400 ms and is answered 150 ms later (550 ms after the claim).
      primary.script([{ delayMs: 150, reply: 'worth paying for', usage: { prompt_tokens: 11, completion_tokens: 5 } }]);
      const map = new Map([['primary', slowToConnect(openai('primary', primary.url, 300), 400)], ['fallback', openai('fallback', fallback.url, 300)]]);
      const lost: string[] = [];
      const e = executor(map, { runningMarkDelayMs: 0 });
      e.events.on('attempt:lease_lost', (a) => lost.push(a.id));
      await e.start();
      const job = await create('slow-connect');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded' || j.attempts.some((a) => a.state !== 'starting' && a.state !== 'running' && a.state !== 'unknown'), 10_000)
        .catch(async (err: unknown) => {
          throw new Error(`${String(err)}; events: ${JSON.stringify((await store.listEvents(OWNER, job.id)).map((ev) => ev.type))}`);
        });
      expect(done).toMatchObject({ state: 'succeeded', result: { content: 'worth paying for' } });
      expect(done.attempts.map((a) => [a.state, a.usage?.promptTokens ?? null])).toEqual([['succeeded', 11]]);
      expect((await store.listEvents(OWNER, job.id)).map((ev) => ev.type)).not.toContain('attempt.unknown');
      expect(lost).toEqual([]);
      expect(primary.calls).toHaveLength(1);
    });

    it('a connect that fails is a definite "not sent": failed, the job fails over, never unknown (even when it fails after timeoutMs)', async () => {
      fallback.script([{ reply: 'from the fallback' }]);
      const closed = await freePort();
      const map = new Map([['primary', slowToConnect(openai('primary', `http://127.0.0.1:${closed}`, 200), 400)], ['fallback', openai('fallback', fallback.url, 2_000)]]);
      await executor(map).start();
      const job = await create('refused');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded' || j.state === 'failed' || j.state === 'unknown');
      expect(done.state).toBe('succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null])).toEqual([['primary', 'failed', 'provider_unreachable'], ['fallback', 'succeeded', null]]);
      expect((await store.listEvents(OWNER, job.id)).map((ev) => ev.type)).not.toContain('attempt.unknown');
    });

    it('a settle whose first try committed but whose answer was lost is re-read: the attempt that won is reported won, not superseded', async () => {
      primary.script([{ reply: 'won once' }]);
      // The first settle commits, then its connection drops before the answer arrives (ECONNRESET): the executor tries again.
      let dropped = 0;
      const lossy = new Proxy(store, {
        get(target, name) {
          const v = Reflect.get(target, name, target) as unknown;
          if (name === 'settleAttempt') {
            return async (...args: Parameters<JobStore['settleAttempt']>) => {
              const first = dropped++ === 0;
              const r = await target.settleAttempt(...args);
              if (first) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
              return r;
            };
          }
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const map = new Map([['primary', openai('primary', primary.url, 5_000)], ['fallback', openai('fallback', fallback.url, 5_000)]]);
      const e = executor(map, { store: lossy, writeRetryBaseMs: 10 });
      const settled: { state: string; won: boolean }[] = [];
      e.events.on('attempt:settled', (_a, r) => settled.push({ state: r.state, won: r.won }));
      await e.start();
      const job = await create('lost-commit-answer');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      await new Promise((r) => setTimeout(r, 100));
      expect(dropped).toBeGreaterThanOrEqual(2);
      expect(done.attempts.map((a) => a.state)).toEqual(['succeeded']);
      expect(settled).toEqual([{ state: 'succeeded', won: true }]);
    });

    it('an answer whose job was deleted meanwhile still reports what it cost (CONTRACT §8: whatever the end)', async () => {
      primary.script([{ gate: 'late', reply: 'too late', usage: { prompt_tokens: 9, completion_tokens: 2 } }]);
      // This executor hears of no job change (as if the cancel came from a process it cannot hear) and renews nothing.
      const deaf = new Proxy(store, {
        get(target, name) {
          if (name === 'onJobChanged') return () => () => undefined;
          const v = Reflect.get(target, name, target) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const map = new Map([['primary', openai('primary', primary.url, 200)], ['fallback', openai('fallback', fallback.url, 200)]]);
      const e = executor(map, { store: deaf, heartbeatMs: 3_600_000, runningMarkDelayMs: 0 });
      const unrecorded: { tokens: number | undefined }[] = [];
      e.events.on('attempt:usage_unrecorded', (_a, u) => unrecorded.push({ tokens: u.usage?.promptTokens }));
      await e.start();
      const job = await create('deleted-meanwhile');
      await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      await store.cancelJob(OWNER, job.id);
      // "Older than 0 ms" is strictly before now: a delete in the cancel's own millisecond finds nothing to delete.
      await new Promise((r) => setTimeout(r, 5));
      expect((await store.deleteFinishedJobs({ olderThanMs: 0 })).jobs).toBe(1);
      const finished = new Promise((r) => e.events.once('attempt:finished', r));
      primary.release('late');
      await finished;
      expect(unrecorded).toEqual([{ tokens: 9 }]);
    });
  });
}
