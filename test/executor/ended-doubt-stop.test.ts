/**
 * Work of attempts whose doubt ended while no executor followed them is
 * stopped upstream, once (CONTRACT §11, issue #21, docs/reconciliation.md
 * "Stopping work upstream"): an `unknown` openai-responses or task attempt
 * whose job is cancelled, that is superseded by another attempt's win, or
 * that an operator resolves failed; a provider without a cancel is skipped
 * without an error. SQLite and PostgreSQL, real fake providers over HTTP.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Executor, type ExecutorOptions } from '../../src/executor/executor.ts';
import { attemptsToStop } from '../../src/executor/ended-doubt-stop.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { waitForJob } from '../support/wait-for-job.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`ended doubt stopped upstream on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let upstream: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    let stops: string[];
    let errors: unknown[];
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      upstream = await startFakeProvider();
      fallback = await startFakeProvider();
      providers = new Map([
        ['tasks', createProvider('tasks', { type: 'task', baseUrl: `${upstream.url}/v1/tasks`, timeoutMs: 300, pollIntervalMs: 50, maxDurationMs: 60_000 })],
        ['plain', createProvider('plain', { type: 'openai', baseUrl: `${upstream.url}/v1`, model: 'gpt-fake', timeoutMs: 300 })],
        ['responses', createProvider('responses', { type: 'openai-responses', baseUrl: `${upstream.url}/v1`, model: 'gpt-resp', timeoutMs: 300, pollIntervalMs: 50, maxDurationMs: 60_000 })],
        ['fallback', createProvider('fallback', { type: 'openai', baseUrl: `${fallback.url}/v1`, model: 'gpt-fallback', timeoutMs: 2_000 })],
      ]);
      // Count every cancel sent (the real provider still sends it over HTTP).
      stops = [];
      for (const p of providers.values()) {
        const stop = p.stopUpstream?.bind(p);
        if (stop) p.stopUpstream = async (r) => (stops.push(r.providerRequestId ?? 'null'), stop(r));
      }
      errors = [];
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([upstream.close(), fallback.close()]);
      await cleanup();
    });

    /** An executor that stops following at the deadline and never asks (no reconciler): the attempt stays unknown. */
    async function executor(o: Partial<ExecutorOptions> = {}): Promise<Executor> {
      const e = new Executor({ store, providers, routes: { r: { hedgeAfterMs: null } }, pollMs: 50, lateAnswerGraceMs: 0, reconciler: false, ...o });
      e.events.on('error', (err) => errors.push(err));
      executors.push(e);
      await e.start();
      return e;
    }
    const create = (key: string, first: string) =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: INPUT, providers: [first, 'fallback'] }).then((r) => r.job);
    const unknownWithId = (jobId: string) =>
      waitForJob(store, jobId, (j) => j.attempts[0]?.state === 'unknown' && j.attempts[0].providerRequestId !== null && j.attempts[0].leaseOwner === null);
    async function settleDown(pred: () => boolean): Promise<void> {
      for (let i = 0; i < 150 && !pred(); i++) await sleep(20);
      await sleep(200); // a second cancel, if any, would arrive meanwhile
    }

    it('an unknown openai-responses attempt, job cancelled: one cancel upstream', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      await executor();
      const job = await create('resp-cancel', 'responses');
      const unknown = await unknownWithId(job.id);
      expect(upstream.responses[0]!.cancelRequested).toBe(false);
      await store.cancelJob(OWNER, job.id);
      await settleDown(() => upstream.responses[0]!.cancelRequested);
      expect(upstream.responses[0]).toMatchObject({ cancelRequested: true, status: 'cancelled' });
      expect(stops).toEqual([unknown.attempts[0]!.providerRequestId]);
      expect(errors).toEqual([]);
    });

    it('an unknown task attempt, job cancelled: one cancel upstream', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      await executor();
      const job = await create('task-cancel', 'tasks');
      const unknown = await unknownWithId(job.id);
      await store.cancelJob(OWNER, job.id);
      await settleDown(() => upstream.tasks[0]?.cancelRequested === true);
      expect(upstream.tasks[0]).toMatchObject({ cancelRequested: true, status: 'canceled', submits: 1 });
      expect(stops).toEqual([unknown.attempts[0]!.providerRequestId]);
    });

    it('an unknown attempt superseded by another attempt that wins: one cancel upstream', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      fallback.script([{ reply: 'from the fallback', delayMs: 900 }]);
      // A hedge on the fallback starts at once and answers after the first attempt has gone unknown (300 ms).
      await executor({ routes: { r: { hedgeAfterMs: 20 } } });
      const job = await create('resp-superseded', 'responses');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.resolvedBy])).toEqual([['responses', 'superseded', null], ['fallback', 'succeeded', null]]);
      await settleDown(() => upstream.responses[0]!.cancelRequested);
      expect(upstream.responses[0]).toMatchObject({ cancelRequested: true, status: 'cancelled' });
      expect(stops).toEqual([done.attempts[0]!.providerRequestId]);
    });

    it('an unknown task attempt resolved failed by an operator: one cancel upstream, the job moves on', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor();
      const job = await create('task-resolved', 'tasks');
      const unknown = await unknownWithId(job.id);
      await store.settleAttempt({ ownerId: OWNER, attemptId: unknown.attempts[0]!.id, outcome: { state: 'failed', error: { code: 'resolved', message: 'resolved failed by hand' } }, resolvedBy: 'operator', actor: 'operator:test' });
      await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      await settleDown(() => upstream.tasks[0]?.cancelRequested === true);
      expect(upstream.tasks[0]).toMatchObject({ cancelRequested: true, status: 'canceled' });
      expect(stops).toEqual([unknown.attempts[0]!.providerRequestId]);
    });

    it('a provider without a cancel: nothing is sent, no error', async () => {
      upstream.script([{ hang: true }]);
      await executor();
      const job = await create('plain-cancel', 'plain');
      await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown' && j.attempts[0].leaseOwner === null);
      const cancelled = await store.cancelJob(OWNER, job.id);
      expect(cancelled.state).toBe('cancelled');
      await sleep(200);
      expect(stops).toEqual([]);
      expect(errors).toEqual([]);
    });

    it('attemptsToStop names only attempts that were in doubt, carry an id, and ended in this change', async () => {
      upstream.script([{ task: { runMs: 30_000 } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor();
      const job = await create('pure', 'responses');
      const unknown = await unknownWithId(job.id);
      expect(attemptsToStop(unknown, new Date())).toEqual([]); // the job still runs
      const cancelled = await store.cancelJob(OWNER, job.id);
      expect(attemptsToStop(cancelled, new Date()).map((a) => a.id)).toEqual([unknown.attempts[0]!.id]);
      const noId = { ...cancelled, attempts: cancelled.attempts.map((a) => ({ ...a, providerRequestId: null })) };
      expect(attemptsToStop(noId, new Date())).toEqual([]);
      const held = { ...cancelled, attempts: cancelled.attempts.map((a) => ({ ...a, leaseOwner: 'exe_x', leaseExpiresAt: new Date(Date.now() + 60_000) })) };
      expect(attemptsToStop(held, new Date())).toEqual([]); // its executor stops it itself
    });
  });
}
