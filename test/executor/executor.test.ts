/**
 * The executor against real fake providers over HTTP, on SQLite and PostgreSQL.
 * Event order is forced with the fake's gates and the executor's events, not sleeps.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnejobError } from '../../src/core/errors.ts';
import { Executor, type ExecutorOptions, type OutputCheck } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };

/** Resolves when `pred` holds for the job, re-checking on every change. */
async function waitForJob(store: JobStore, jobId: string, pred: (j: NonNullable<Awaited<ReturnType<JobStore['getJob']>>>) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await store.getJob(OWNER, jobId);
    if (job && pred(job)) return job;
    if (Date.now() > deadline) throw new Error(`timed out waiting for job ${jobId}; last: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => a.state) })}`);
    await new Promise<void>((resolve) => {
      const off = store.onJobChanged((_, id) => id === jobId && (off(), resolve()));
      setTimeout(() => (off(), resolve()), 50);
    });
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`executor on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      primary = await startFakeProvider();
      fallback = await startFakeProvider();
      providers = new Map([
        ['primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 300 })],
        ['fallback', createProvider('fallback', { type: 'anthropic', baseUrl: fallback.url, apiKey: 'k', model: 'claude-fake', timeoutMs: 300 })],
      ]);
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([primary.close(), fallback.close()]);
      await cleanup();
    });

    function executor(o: Partial<ExecutorOptions> = {}): Executor {
      const e = new Executor({ store, providers, routes: { summarize: { hedgeAfterMs: null }, hedged: { hedgeAfterMs: 100 } }, pollMs: 200, lateAnswerGraceMs: 10_000, ...o });
      executors.push(e);
      return e;
    }
    const create = (key: string, route = 'summarize', input: unknown = INPUT) =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route, input, providers: ['primary', 'fallback'] }).then((r) => r.job);

    it('runs a job once on the primary and stores the normalized completion', async () => {
      primary.script([{ reply: 'a short summary' }]);
      await executor().start();
      const job = await create('happy');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.result).toMatchObject({ content: 'a short summary', finish_reason: 'stop', provider: 'primary', model: 'gpt-fake' });
      expect(done.completedBy).toBe(done.attempts[0]!.id);
      expect(primary.calls).toHaveLength(1);
      expect(primary.calls[0]).toMatchObject({ idempotencyKey: `${job.id}:1`, jobId: job.id, attemptId: done.attempts[0]!.id });
      expect(fallback.calls).toHaveLength(0);
    });

    it('fails over to the next provider after a definite failure (503), each called once', async () => {
      primary.script([{ status: 503 }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor().start();
      const job = await create('failover');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.kind])).toEqual([
        ['primary', 'failed', 'first'],
        ['fallback', 'succeeded', 'failover'],
      ]);
      expect(done.attempts[0]!.error?.code).toBe('provider_overloaded');
      expect(done.result).toMatchObject({ content: 'from the fallback', provider: 'fallback' });
      expect([primary.calls.length, fallback.calls.length]).toEqual([1, 1]);
      expect(fallback.calls[0]!.idempotencyKey).toBe(`${job.id}:2`);
    });

    it('a hang becomes unknown at the deadline, blocks new attempts, and a resolve unblocks it', async () => {
      primary.script([{ hang: true }]);
      fallback.script([{ reply: 'after resolve' }]);
      const e = executor();
      await e.start();
      const job = await create('hang');
      const [unknownAttempt] = await once(e.events, 'attempt:unknown');
      const blocked = await waitForJob(store, job.id, (j) => j.state === 'unknown');
      expect(blocked.attempts[0]).toMatchObject({ state: 'unknown' });
      expect(blocked.attempts[0]!.error?.code).toBe('deadline_exceeded');
      const refused = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null }).catch((err: unknown) => err);
      expect(isOnejobError(refused, 'attempt_in_doubt')).toBe(true);
      expect(fallback.calls).toHaveLength(0);
      await store.settleAttempt({ ownerId: OWNER, attemptId: unknownAttempt.id, outcome: { state: 'failed', error: { code: 'resolved', message: 'operator: never ran' } }, actor: 'test' });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.result).toMatchObject({ content: 'after resolve' });
      expect([primary.calls.length, fallback.calls.length]).toEqual([1, 1]);
    });

    it('a late answer within the grace period still wins through the compare-and-swap', async () => {
      primary.script([{ gate: 'late', reply: 'late but first' }]);
      const e = executor();
      await e.start();
      const job = await create('late');
      await once(e.events, 'attempt:unknown');
      await waitForJob(store, job.id, (j) => j.state === 'unknown');
      primary.release('late');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.result).toMatchObject({ content: 'late but first' });
      expect(done.attempts.map((a) => a.state)).toEqual(['succeeded']);
    });

    it('an ambiguous failure (500) is unknown, never failed, and never fails over by itself', async () => {
      primary.script([{ status: 500 }]);
      const e = executor();
      await e.start();
      const job = await create('ambiguous');
      const blocked = await waitForJob(store, job.id, (j) => j.state === 'unknown');
      expect(blocked.attempts.map((a) => a.state)).toEqual(['unknown']);
      expect(blocked.attempts[0]!.error?.code).toBe('provider_server_error');
      expect(fallback.calls).toHaveLength(0);
    });

    it('a hedge that answers first wins; the primary is stopped at the provider (its request cancelled) and ends superseded; the result never changes', async () => {
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 }));
      primary.script([{ gate: 'primary', reply: 'primary answer' }]);
      fallback.script([{ reply: 'hedge answer' }]);
      const e = executor();
      await e.start();
      const job = await create('hedge', 'hedged');
      await once(e.events, 'hedge:started');
      const won = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(won.result).toMatchObject({ content: 'hedge answer', provider: 'fallback' });
      // The loser's gate is never opened: it ends because the executor stopped it, long before its 5 s deadline.
      const after = await waitForJob(store, job.id, (j) => j.attempts[0]!.state === 'superseded', 3_000);
      expect(after.attempts[0]!.error?.code).toBe('superseded');
      expect(after.attempts[0]!.leaseOwner).toBeNull();
      const call = await primary.waitForResult(1);
      expect(call.result).toBe('client-closed');
      expect(after.result).toEqual(won.result);
      expect(after.completedBy).toBe(won.completedBy);
      expect(after.version).toBe(won.version);
      primary.release('primary');
      expect([primary.calls.length, fallback.calls.length]).toEqual([1, 1]);
      expect((await store.getJob(OWNER, job.id))).toMatchObject({ result: won.result, version: won.version });
    });

    it('a win decided by another process stops this executor\'s loser at its next heartbeat', async () => {
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 20_000 }));
      primary.script([{ hang: true }]);
      fallback.script([{ reply: 'from the other process' }]);
      const a = executor({ leaseMs: 900 });
      await a.start();
      const job = await create('remote-win');
      await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'running');
      // Another process (its own store, so no in-process notice reaches executor a) runs a hedge and wins.
      const other = await openStore(url);
      try {
        const hedge = await other.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'hedge', hedgeAfterMs: 0, lease: { leaseOwner: 'exe_other', leaseMs: 30_000 } });
        const r = await other.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: { leaseOwner: 'exe_other', leaseToken: hedge.leaseToken! }, outcome: { state: 'succeeded', result: 'remote' } });
        expect(r.won).toBe(true);
      } finally {
        await other.close();
      }
      const after = await waitForJob(store, job.id, (j) => j.attempts[0]!.state === 'superseded', 5_000);
      expect(after).toMatchObject({ state: 'succeeded', result: 'remote' });
      expect((await primary.waitForResult(1)).result).toBe('client-closed');
      expect(primary.calls).toHaveLength(1);
    });

    it('an output that breaks the route contract is a failed attempt (contract_violation) and the job fails over', async () => {
      const checkOutput: OutputCheck = (_route, _input, c) => {
        try {
          return { ok: true, value: JSON.parse(c.content) };
        } catch {
          return { ok: false, findings: [{ code: 'not_json', message: 'output is not JSON' }] };
        }
      };
      primary.script([{ reply: 'Sure! Here is your JSON: {"summary": "x"}' }]);
      fallback.script([{ reply: { summary: 'x' } }]);
      await executor({ checkOutput }).start();
      const job = await create('contract');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts[0]).toMatchObject({ state: 'failed', error: { code: 'contract_violation' } });
      expect(done.result).toMatchObject({ content: { summary: 'x' }, provider: 'fallback' });
    });

    it('an executor paused past its lease: the rescuer makes the attempt unknown, and its answer, when it comes, is still recorded by the lease\'s token', async () => {
      primary.script([{ gate: 'wake', reply: 'late but paid' }]);
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 60_000 }));
      // No heartbeat: the lease lapses as if the process were stopped.
      const paused = executor({ leaseMs: 300, heartbeatMs: 3_600_000, rescueEveryMs: 3_600_000 });
      const lost: string[] = [];
      paused.events.on('attempt:lease_lost', (a) => lost.push(a.id));
      await paused.start();
      const job = await create('paused');
      await once(paused.events, 'attempt:dispatched');
      await new Promise((r) => setTimeout(r, 350));
      expect(await store.rescueExpiredLeases()).toBe(1);
      const blocked = await waitForJob(store, job.id, (j) => j.state === 'unknown');
      expect(blocked.attempts[0]!.error?.code).toBe('lease_expired');
      const settled = once(paused.events, 'attempt:settled');
      primary.release('wake');
      await settled;
      const after = await store.getJob(OWNER, job.id);
      expect(after).toMatchObject({ state: 'succeeded', result: { content: 'late but paid' }, completedBy: blocked.attempts[0]!.id });
      expect(after!.attempts.map((a) => a.state)).toEqual(['succeeded']);
      expect(lost).toEqual([]);
      expect(primary.calls).toHaveLength(1);
    });

    it('cancelling a job aborts its request in this process and records the attempt cancelled', async () => {
      primary.script([{ hang: true }]);
      providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 60_000 }));
      const e = executor();
      await e.start();
      const job = await create('cancel');
      await once(e.events, 'attempt:dispatched');
      await store.cancelJob(OWNER, job.id);
      const done = await waitForJob(store, job.id, (j) => j.attempts[0]!.state === 'cancelled');
      expect(done).toMatchObject({ state: 'cancelled', result: null });
      expect(fallback.calls).toHaveLength(0);
    });

    it('an executor stopped before a request was sent hands the attempt back unclaimed, not failed', async () => {
      // A listener that never accepts, its one-slot queue already taken: connecting hangs (nothing is ever sent).
      const listener = spawn('python3', ['-c', 'import socket,sys,time\ns=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(0)\nprint(s.getsockname()[1], flush=True)\ntime.sleep(60)']);
      try {
        const [line] = (await once(listener.stdout!, 'data')) as [Buffer];
        const port = Number(String(line).trim());
        const filler = connect(port, '127.0.0.1');
        await once(filler, 'connect');
        providers.set('primary', createProvider('primary', { type: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 60_000 }));
        const e = executor();
        await e.start();
        const job = await create('stopped-before-send');
        await once(e.events, 'attempt:claimed');
        await new Promise((r) => setTimeout(r, 200));
        await e.stop(0);
        filler.destroy();
        const after = await store.getJob(OWNER, job.id);
        expect(after!.attempts).toHaveLength(1);
        expect(after!.attempts[0]).toMatchObject({ state: 'starting', leaseOwner: null });
        const reclaimed = await store.claimWork({ leaseOwner: 'exe_next', leaseMs: 30_000, limit: 5 });
        expect(reclaimed.map((c) => c.attempt.id)).toEqual([after!.attempts[0]!.id]);
      } finally {
        listener.kill('SIGKILL');
      }
    });

    it('two executors, 100 jobs: every job runs exactly once (provider calls = attempts)', async () => {
      primary.setDefault({ delayMs: 5, reply: 'ok' });
      await executor({ concurrency: 16 }).start();
      await executor({ concurrency: 16 }).start();
      const jobs = await Promise.all(Array.from({ length: 100 }, (_, i) => create(`bulk-${i}`)));
      for (const j of jobs) await waitForJob(store, j.id, (x) => x.state === 'succeeded', 30_000);
      const keys = primary.calls.map((c) => c.idempotencyKey);
      expect(keys).toHaveLength(100);
      expect(new Set(keys).size).toBe(100);
      const page = await store.listJobs({ ownerId: OWNER, limit: 200 });
      expect(page.jobs.every((j) => j.attempts.length === 1 && j.attempts[0]!.leaseOwner === null)).toBe(true);
    });
  });
}
