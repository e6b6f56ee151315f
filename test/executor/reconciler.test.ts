/**
 * Doubt that resolves itself (CONTRACT §11), on SQLite and PostgreSQL: the
 * reconciler of an executor asks real fake providers over HTTP (stored
 * completions, tasks) what became of attempts in doubt, and applies the
 * answers through the settle paths. Also: the lookup queue's one asker per
 * attempt, the settle policy, and a loser stopped upstream.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Executor, type ExecutorOptions } from '../../src/executor/executor.ts';
import type { Reconciler } from '../../src/executor/reconciler.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { LookupAnswerKind, Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { waitForJob } from '../support/wait-for-job.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };

/** Resolves at the reconciler's next lookup of `attemptId` that answered `kind`. */
function lookupAnswered(reconciler: Reconciler, attemptId: string, kind: LookupAnswerKind): Promise<void> {
  return new Promise((resolve) => {
    const on = (a: { id: string }, k: LookupAnswerKind) => {
      if (a.id !== attemptId || k !== kind) return;
      reconciler.events.off('lookup', on);
      resolve();
    };
    reconciler.events.on('lookup', on);
  });
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`reconciler on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let upstream: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      upstream = await startFakeProvider();
      fallback = await startFakeProvider();
      providers = new Map([
        ['stored', createProvider('stored', { type: 'openai', baseUrl: `${upstream.url}/v1`, model: 'gpt-fake', timeoutMs: 300, lookup: 'stored-completions', maxDurationMs: 1_500 })],
        ['tasks', createProvider('tasks', { type: 'task', baseUrl: `${upstream.url}/v1/tasks`, timeoutMs: 300, pollIntervalMs: 50, maxDurationMs: 60_000 })],
        ['plain', createProvider('plain', { type: 'openai', baseUrl: `${upstream.url}/v1`, model: 'gpt-fake', timeoutMs: 300, maxDurationMs: 300, settleUnknownAfterMs: 600 })],
        ['responses', createProvider('responses', { type: 'openai-responses', baseUrl: `${upstream.url}/v1`, model: 'gpt-resp', timeoutMs: 300, pollIntervalMs: 50, maxDurationMs: 60_000 })],
        ['fallback', createProvider('fallback', { type: 'openai', baseUrl: `${fallback.url}/v1`, model: 'gpt-fallback', timeoutMs: 2_000 })],
      ]);
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([upstream.close(), fallback.close()]);
      await cleanup();
    });

    function executor(o: Partial<ExecutorOptions> = {}): Executor {
      const e = new Executor({
        store, providers, routes: { r: { hedgeAfterMs: null } }, pollMs: 100, lateAnswerGraceMs: 100,
        reconciler: { everyMs: 50, firstCheckMs: 50, maxCheckMs: 200 }, ...o,
      });
      executors.push(e);
      return e;
    }
    const create = (key: string, first: string, input: unknown = INPUT) =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input, providers: [first, 'fallback'] }).then((r) => r.job);

    it('stored completions: an answer lost after the work is found by the lookup, with exactly one submit upstream', async () => {
      upstream.script([{ reply: 'done upstream', loseAnswer: true }]);
      const e = executor();
      await e.start();
      const job = await create('lost', 'stored');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      const [a] = done.attempts;
      expect(a).toMatchObject({ state: 'succeeded', resolvedBy: 'lookup', providerRequestId: 'chatcmpl-fake-1' });
      expect(a!.unknownAt).not.toBeNull();
      expect(done.result).toMatchObject({ content: 'done upstream', provider: 'stored' });
      // One submit: the request carried store and the attempt's id; the lookup asked, nothing was sent again.
      const submits = upstream.calls.filter((c) => c.method === 'POST');
      expect(submits).toHaveLength(1);
      expect(submits[0]!.body).toMatchObject({ store: true, metadata: { onejob_attempt_id: a!.id } });
      expect(upstream.lookups).toBeGreaterThanOrEqual(1);
      expect(fallback.calls).toHaveLength(0);
      const events = await store.listEvents(OWNER, job.id);
      expect(events.find((ev) => ev.type === 'attempt.succeeded')?.data).toMatchObject({ resolved_by: 'lookup' });
    });

    it('stored completions: not found waits until maxDurationMs has passed, then fails definitely and the job moves down its chain', async () => {
      upstream.script([{ hang: true }]); // never answers, never stores
      fallback.script([{ reply: 'from the fallback' }]);
      const e = executor();
      await e.start();
      const job = await create('missing', 'stored');
      const unknown = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      const attemptId = unknown.attempts[0]!.id;
      await lookupAnswered(e.reconciler!, attemptId, 'not_found');
      // Not found before maxDurationMs: still in doubt, the next ask scheduled.
      const waiting = await store.getAttempt(OWNER, attemptId);
      expect(waiting?.state).toBe('unknown');
      expect(fallback.calls).toHaveLength(0);
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null, a.resolvedBy])).toEqual([
        ['stored', 'failed', 'not_found_at_provider', 'lookup'],
        ['fallback', 'succeeded', null, null],
      ]);
      expect(done.attempts[0]!.finishedAt!.getTime() - done.attempts[0]!.startedAt.getTime()).toBeGreaterThanOrEqual(1_500);
      expect(upstream.calls.filter((c) => c.method === 'POST')).toHaveLength(1);
    });

    it('task: still running waits; succeeded is applied through the compare-and-swap with the output as given', async () => {
      upstream.script([{ task: { runMs: 1_200, output: { url: 'https://cdn.example/render.png', frames: 24 } } }]);
      const e = executor();
      await e.start();
      const job = await create('render', 'tasks', { prompt: 'a red fox' });
      const unknown = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      const a = unknown.attempts[0]!;
      expect(a.providerRequestId).toBe('task_fake_1');
      await lookupAnswered(e.reconciler!, a.id, 'running');
      expect((await store.getAttempt(OWNER, a.id))?.state).toBe('unknown');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: 'lookup' });
      expect((done.result as { content: unknown }).content).toEqual({ url: 'https://cdn.example/render.png', frames: 24 });
      expect(upstream.tasks).toHaveLength(1);
      expect(upstream.tasks[0]).toMatchObject({ submits: 1, idempotencyKey: a.id, input: { prompt: 'a red fox' } });
      expect(fallback.calls).toHaveLength(0);
    });

    it('task: a definite failure found by the lookup moves the job down its chain', async () => {
      upstream.script([{ task: { runMs: 600, status: 'failed' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor().start();
      // A task takes any JSON; this one is also a chat request, so that the fallback can take it.
      const job = await create('fails', 'tasks', { ...INPUT, prompt: 'x' });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null, a.resolvedBy])).toEqual([
        ['tasks', 'failed', 'provider_task_failed', 'lookup'],
        ['fallback', 'succeeded', null, null],
      ]);
      expect(upstream.tasks[0]!.submits).toBe(1);
    });

    it('a found output loses the compare-and-swap when another attempt already won: superseded, the job untouched', async () => {
      upstream.script([{ task: { runMs: 800, output: 'late render' } }]);
      const e = executor();
      await e.start();
      const job = await create('race', 'tasks', { prompt: 'x' });
      const unknown = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      // An operator resolves it first; the lookup's later success can no longer win.
      await store.settleAttempt({ ownerId: OWNER, attemptId: unknown.attempts[0]!.id, outcome: { state: 'succeeded', result: 'by hand' }, resolvedBy: 'operator' });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.result).toBe('by hand');
      expect(done.attempts[0]!.resolvedBy).toBe('operator');
    });

    it('settleUnknownAfterMs: a provider without a lookup settles by policy, resolved_by policy', async () => {
      upstream.script([{ hang: true }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor().start();
      const job = await create('policy', 'plain');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null, a.resolvedBy])).toEqual([
        ['plain', 'failed', 'settled_by_policy', 'policy'],
        ['fallback', 'succeeded', null, null],
      ]);
      expect(done.attempts[0]!.finishedAt!.getTime() - done.attempts[0]!.startedAt.getTime()).toBeGreaterThanOrEqual(600);
    });

    it('a cancelled job stops its task upstream (POST …/cancel)', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      const e = executor({ reconciler: false });
      await e.start();
      const running = await create('cancel', 'tasks', { prompt: 'x' });
      await waitForJob(store, running.id, (j) => j.attempts[0]?.providerRequestId === 'task_fake_1');
      await store.cancelJob(OWNER, running.id);
      await waitForJob(store, running.id, (j) => j.attempts[0]?.state === 'cancelled');
      for (let i = 0; i < 100 && !upstream.tasks[0]?.cancelRequested; i++) await new Promise((r) => setTimeout(r, 20));
      expect(upstream.tasks[0]).toMatchObject({ cancelRequested: true, status: 'canceled', submits: 1 });
    });

    it('openai-responses: background + store, the resp_ id recorded before the wait, a long response resolved by lookup', async () => {
      upstream.script([{ reply: 'a considered answer', task: { runMs: 1_000 } }]);
      const e = executor();
      await e.start();
      const job = await create('resp', 'responses', { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'think' }], max_tokens: 64 });
      const unknown = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      expect(unknown.attempts[0]!.providerRequestId).toBe('resp_fake_1');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: expect.stringMatching(/^(lookup|late_answer)$/), providerRequestId: 'resp_fake_1' });
      expect(done.result).toMatchObject({ content: 'a considered answer', provider: 'responses', finish_reason: 'stop' });
      const submits = upstream.calls.length + upstream.responses.length;
      expect(upstream.responses).toHaveLength(1);
      expect(submits).toBe(1); // no chat call, one response created
      expect(upstream.responses[0]!.attemptId).toBe(done.attempts[0]!.id);
    });

    it('openai-responses: a failed response found by the lookup moves the job down its chain; a cancelled job cancels its response upstream', async () => {
      upstream.script([{ task: { runMs: 600, status: 'failed' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      const e = executor({ lateAnswerGraceMs: 0 });
      await e.start();
      const job = await create('resp-fail', 'responses');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null, a.resolvedBy])).toEqual([
        ['responses', 'failed', 'provider_task_failed', 'lookup'],
        ['fallback', 'succeeded', null, null],
      ]);
      upstream.script([{ task: { runMs: 30_000 } }]);
      const long = await create('resp-cancel', 'responses');
      await waitForJob(store, long.id, (j) => j.attempts[0]?.providerRequestId === 'resp_fake_2');
      await store.cancelJob(OWNER, long.id);
      for (let i = 0; i < 100 && !upstream.responses[1]?.cancelRequested; i++) await new Promise((r) => setTimeout(r, 20));
      expect(upstream.responses[1]).toMatchObject({ cancelRequested: true, status: 'cancelled' });
    });

    it('the lookup queue: one asker per attempt, the next ask after backoff, only providers that can be asked', async () => {
      const lease = { leaseOwner: 'exe_test', leaseMs: 30_000 };
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: `q${i}`, route: 'r', input: INPUT, providers: [i === 5 ? 'plain' : 'stored'], firstAttempt: lease });
        const a = claimed!.attempt;
        expect(await store.markUnknown({ ownerId: OWNER, attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken!, reason: { code: 'deadline_exceeded', message: 't' } })).toBe(true);
        ids.push(a.id);
      }
      const params = { providers: ['stored'], limit: 10, leaseMs: 30_000, firstCheckMs: 0 };
      const [x, y] = await Promise.all([store.claimLookups({ ...params, holder: 'x' }), store.claimLookups({ ...params, holder: 'y' })]);
      const got = [...x, ...y].map((a) => a.id).sort();
      expect(got).toEqual(ids.slice(0, 5).sort()); // each once, the other provider's left out
      expect(await store.claimLookups({ ...params, holder: 'z' })).toEqual([]); // all leased
      const first = x[0] ?? y[0]!;
      const holder = x.length > 0 ? 'x' : 'y';
      expect(await store.deferLookup({ ownerId: OWNER, attemptId: first.id, holder: 'not-the-holder', backoffBaseMs: 60_000, backoffMaxMs: 60_000 })).toBe(false);
      expect(await store.deferLookup({ ownerId: OWNER, attemptId: first.id, holder, backoffBaseMs: 60_000, backoffMaxMs: 60_000 })).toBe(true);
      const deferred = await store.getAttempt(OWNER, first.id);
      expect(deferred!.lookupLastAt).not.toBeNull();
      expect(deferred!.lookupNextAt!.getTime() - deferred!.lookupLastAt!.getTime()).toBe(60_000);
      expect(await store.claimLookups({ ...params, holder: 'z' })).toEqual([]); // released, but not due yet
      expect(await store.oldestUnknownAt()).toBeInstanceOf(Date);
    });

    it('records the provider request id of a stream as soon as its headers arrive, before the answer', async () => {
      fallback.script([{ reply: 'one two three', headers: { 'x-request-id': 'req_stream_7' }, streamGate: { afterChunks: 1, gate: 'rest' } }]);
      await executor({ reconciler: false }).start();
      const job = await create('stream-rid', 'fallback', { ...INPUT, stream: true });
      const mid = await waitForJob(store, job.id, (j) => j.attempts[0]?.providerRequestId === 'req_stream_7');
      expect(mid.attempts[0]!.state).not.toBe('succeeded');
      fallback.release('rest');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ providerRequestId: 'req_stream_7' });
    });

    it('records the provider request id of a plain answer (x-request-id) on the attempt', async () => {
      upstream.script([{ reply: 'ok', headers: { 'x-request-id': 'req_upstream_42' } }]);
      await executor({ reconciler: false }).start();
      const job = await create('rid', 'plain');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ providerRequestId: 'req_upstream_42', resolvedBy: null });
    });
  });
}

