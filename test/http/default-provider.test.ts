/**
 * CONTRACT §3, `POST /v1/jobs/{id}/attempts` without a provider: the default
 * is the first provider of the chain that has no attempt yet. When that one
 * is not certified the answer is `409 provider_not_certified` (it is refused,
 * never skipped to a later one); `chain_exhausted` only when every provider
 * of the chain has an attempt. The checks keep the contract's order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EligibilityCheck } from '../../src/core/job-rules.ts';
import { buildApp } from '../../src/http/build-app.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { ALICE, testConfig } from './http-test-app.ts';

/** p2 is certified, p1 is not (manual attempts are gated like failovers). */
const gate: EligibilityCheck = (provider) => (provider === 'p2' ? null : 'not_certified');

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`default provider of a manual attempt on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let base: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      const app = buildApp({ store, config: testConfig(), eligible: () => gate });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
      close = async () => {
        await app.close();
        await cleanup();
      };
    });
    afterAll(() => close());

    const post = async (path: string, body: unknown = {}) => {
      const res = await fetch(base + path, { method: 'POST', headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    let n = 0;
    const job = async () => (await store.createJob({ ownerId: 'alice', idempotencyKey: `d${++n}`, route: 'summarize', input: n, providers: ['p1', 'p2'] })).job;

    it('the first provider without an attempt is uncertified: 409 provider_not_certified naming it, nothing created', async () => {
      const j = await job();
      const res = await post(`/v1/jobs/${j.id}/attempts`);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'provider_not_certified', provider: 'p1' });
      expect((await store.getJob('alice', j.id))!.attempts).toEqual([]);
      // Naming the certified one works.
      expect((await post(`/v1/jobs/${j.id}/attempts`, { provider: 'p2' })).status).toBe(201);
      await store.cancelJob('alice', j.id); // its unclaimed attempt must not be a later test's claim
    });

    it('the checks keep the contract order: provider_unknown, attempt_in_doubt, job_finished before provider_not_certified', async () => {
      const j = await job();
      expect((await post(`/v1/jobs/${j.id}/attempts`, { provider: 'p2' })).status).toBe(201);
      // p2's attempt is starting: doubt comes before the default's certification.
      expect((await post(`/v1/jobs/${j.id}/attempts`)).body.code).toBe('attempt_in_doubt');
      expect((await post(`/v1/jobs/${j.id}/attempts`, { provider: 'nope' })).status).toBe(422);
      await store.cancelJob('alice', j.id);
      expect((await post(`/v1/jobs/${j.id}/attempts`, { provider: 'nope' })).body.code).toBe('provider_unknown');
      expect((await post(`/v1/jobs/${j.id}/attempts`)).body.code).toBe('job_finished');
    });

    it('every provider of the chain has an attempt: chain_exhausted, and not before', async () => {
      // The hedged route lets a manual attempt start while others run, so the chain can fill up while the job is open.
      const { job: j } = await store.createJob({ ownerId: 'alice', idempotencyKey: 'hedged', route: 'hedged', input: 0, providers: ['p1', 'p2'] });
      const run = async () => {
        const [c] = await store.claimWork({ leaseOwner: 'exe_t', leaseMs: 60_000, limit: 1 });
        expect(await store.markRunning({ ownerId: 'alice', attemptId: c!.attempt.id, leaseOwner: 'exe_t', leaseToken: c!.attempt.leaseToken!, timeoutMs: 60_000 })).toBe(true);
        return c!.attempt;
      };
      expect((await run()).provider).toBe('p1');
      const second = await post(`/v1/jobs/${j.id}/attempts`);
      expect(second.status, JSON.stringify(second.body)).toBe(201);
      expect(second.body.provider).toBe('p2');
      await run();
      const third = await post(`/v1/jobs/${j.id}/attempts`);
      expect(third.status).toBe(409);
      expect(third.body.code).toBe('chain_exhausted');
    });
  });
}
