/**
 * CONTRACT §15, "only an attempt in doubt is settled from outside", on SQLite
 * and PostgreSQL: a lookup, a callback, `POST /v1/attempts/{id}/check` and a
 * settle policy move an attempt only from `unknown`. One that is `starting` or
 * `running` is left to its executor (`/check`: 409 `attempt_in_flight`), a
 * finished one is never moved (409 `attempt_finished`). The guard is the
 * settle's own (`fromStates`), so an answer read for an attempt that was in
 * doubt when it was asked about cannot move it once it runs again.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { defineConfig } from '../../src/config/config.ts';
import { Reconciler } from '../../src/executor/reconciler.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { callbackSignature } from '../../src/http/routes/callback-routes.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { LookupAnswer, Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const ALICE = 'tok_alice_0123456789';
const SECRET = 'whsec_0123456789abcdef';
const INPUT = { messages: [{ role: 'user', content: 'render a fox' }] };

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`settled from doubt only, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let app: FastifyInstance;
    let providers: Map<string, Provider>;
    let reconciler: Reconciler;

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [ALICE]: 'alice' },
        providers: {
          tasks: { type: 'task', baseUrl: `${fake.url}/v1/tasks`, model: 'task', callbackSecret: SECRET, maxDurationMs: 1 },
          plain: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm' },
        },
        routes: { r: { providers: ['tasks', 'plain'] } },
      });
      providers = new Map(Object.entries(config.providers).map(([name, p]) => [name, createProvider(name, p as never)]));
      reconciler = new Reconciler({ store, providers });
      app = buildApp({ store, config, reconciler });
      await app.ready();
    });
    afterEach(async () => {
      await app.close();
      await Promise.all([...providers.values()].map((p) => p.close()));
      await fake.close();
      await cleanup();
    });

    /** A task attempt its executor holds and runs (`running`, or `starting`), its task created at the fake and its id recorded. */
    async function live(key: string, state: 'starting' | 'running', task: { runMs?: number; status?: 'succeeded' | 'failed' } = {}) {
      const lease = { leaseOwner: 'exe_live', leaseMs: 30_000 };
      const { claimed } = await store.createJob({ ownerId: 'alice', idempotencyKey: key, route: 'r', input: INPUT, providers: ['tasks', 'plain'], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { ownerId: 'alice', attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      fake.script([{ task: { output: { frames: 24 }, ...task } }]);
      const created = await fetch(`${fake.url}/v1/tasks`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': a.id }, body: JSON.stringify({ input: INPUT }) });
      const body = (await created.json()) as { id: string };
      expect(await store.recordProviderRequestId({ ...fence, providerRequestId: body.id })).toBe(true);
      if (state === 'running') expect(await store.markRunning({ ...fence, timeoutMs: 30_000 })).toBe(true);
      return { attempt: (await store.getAttempt('alice', a.id))!, fence, taskId: body.id };
    }

    const post = (url: string, o: { token?: string | null; raw?: string; headers?: Record<string, string> } = {}) =>
      app.inject({
        method: 'POST', url,
        headers: {
          ...(o.token === null ? {} : { authorization: `Bearer ${o.token ?? ALICE}` }),
          ...(o.raw !== undefined ? { 'content-type': 'application/json' } : {}),
          ...o.headers,
        },
        ...(o.raw !== undefined ? { payload: o.raw } : {}),
      });

    it('check: a running or starting attempt is its executor\'s (409 attempt_in_flight), nothing asked, nothing moved', async () => {
      for (const state of ['running', 'starting'] as const) {
        const { attempt } = await live(`check-${state}`, state, { status: 'failed' });
        const lookupsBefore = fake.lookups;
        const res = await post(`/v1/attempts/${attempt.id}/check`);
        expect(res.statusCode).toBe(409);
        expect(res.json()).toMatchObject({ code: 'attempt_in_flight', state });
        const after = await store.getJob('alice', attempt.jobId);
        expect(after!.attempts.map((a) => [a.state, a.resolvedBy])).toEqual([[state, null]]);
        expect(after!.state).toBe('running');
        expect(fake.lookups).toBe(lookupsBefore);
      }
    });

    it('check: a finished attempt is 409 attempt_finished', async () => {
      const { attempt, fence } = await live('check-done', 'running');
      await store.settleAttempt({ ownerId: 'alice', attemptId: attempt.id, outcome: { state: 'succeeded', result: 'own answer' }, fence });
      const res = await post(`/v1/attempts/${attempt.id}/check`);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'attempt_finished' });
    });

    it('a signed callback about a running attempt changes nothing: the executor decides', async () => {
      const { attempt, taskId } = await live('cb-running', 'running', { runMs: 60_000 });
      const body = JSON.stringify({ id: taskId, status: 'failed', error: 'nope' });
      const res = await post(`/v1/attempts/${attempt.id}/callback`, { raw: body, token: null, headers: { 'onejob-signature': callbackSignature(body, SECRET) } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ id: attempt.id, state: 'running', resolved_by: null });
      const job = await store.getJob('alice', attempt.jobId);
      expect(job!.attempts).toHaveLength(1); // no failover beside the live request
    });

    it('an answer read while the attempt was in doubt does not move it once it runs again (the guard is the settle\'s own)', async () => {
      const { attempt } = await live('stale', 'running', { status: 'failed' });
      // What a resolver read earlier: the attempt in doubt. It is running now.
      const stale = { ...attempt, state: 'unknown' as const };
      const answers: LookupAnswer[] = [
        { kind: 'failed', error: { code: 'not_found_at_provider', message: 'not found after maxDurationMs' } },
        { kind: 'succeeded', completion: { content: 'someone else', provider: 'tasks', model: 'task', finish_reason: 'stop' } as never, raw: null },
      ];
      for (const answer of answers) {
        expect(await reconciler.applyAnswer(stale, answer, 'lookup')).toBeNull();
      }
      const job = await store.getJob('alice', attempt.jobId);
      expect(job!.state).toBe('running');
      expect(job!.attempts.map((a) => [a.state, a.resolvedBy])).toEqual([['running', null]]);
      // The store says why, with the contract's codes.
      await expect(store.settleAttempt({ ownerId: 'alice', attemptId: attempt.id, outcome: { state: 'failed', error: { code: 'x', message: 'x' } }, fromStates: ['unknown'] })).rejects.toMatchObject({ code: 'attempt_in_flight' });
      await store.settleAttempt({ ownerId: 'alice', attemptId: attempt.id, outcome: { state: 'cancelled' }, resolvedBy: 'operator' });
      await expect(store.settleAttempt({ ownerId: 'alice', attemptId: attempt.id, outcome: { state: 'failed', error: { code: 'x', message: 'x' } }, fromStates: ['unknown'] })).rejects.toMatchObject({ code: 'attempt_finished' });
    });

    it('the same outside settle of an attempt in doubt applies (resolved_by lookup)', async () => {
      const { attempt, fence } = await live('doubt', 'running', { status: 'failed' });
      expect(await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
      const res = await post(`/v1/attempts/${attempt.id}/check`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ state: 'failed', resolved_by: 'lookup', lookup: { outcome: 'failed' } });
    });
  });
}
