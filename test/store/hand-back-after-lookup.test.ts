/**
 * The hand-back of a never-sent first attempt (`Store.handBackUnsent`) does
 * not give up once a lookup has looked (issue 35), on SQLite and PostgreSQL:
 * a lookup that asked about the rescued attempt and found nothing definite
 * (deferred) says nothing against "never sent"; the attempt is handed back
 * and runs instead of staying `unknown` for a person. Still refused: while a
 * lookup is held on it (it settles unfenced), and once a provider id was
 * recorded (the provider answered this attempt: it was sent).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const LEASE_MS = 300;
const EXECUTOR = 'exe_creator';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`hand-back after a lookup, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
    });
    afterEach(() => cleanup());

    /** A first attempt leased at birth whose create went unanswered, its lease run out and rescued to `unknown`. */
    async function rescued(key: string) {
      const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: {}, providers: ['p'], firstAttempt: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
      const a = claimed!.attempt;
      await sleep(LEASE_MS + 100);
      expect(await store.rescueExpiredLeases()).toBeGreaterThanOrEqual(1);
      expect((await store.getAttempt(OWNER, a.id))!).toMatchObject({ state: 'unknown', error: { code: 'lease_expired' } });
      return a;
    }
    const handBack = (a: { id: string; leaseToken: string | null }) => store.handBackUnsent({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: a.leaseToken! });
    /** A reconciler asks about it and finds nothing definite (not found yet): its lookup is recorded and released. */
    async function looked(a: { id: string }) {
      const held = await store.claimLookups({ holder: 'rec_1', providers: ['p'], limit: 10, leaseMs: 10_000, firstCheckMs: 0 });
      expect(held.map((x) => x.id)).toContain(a.id);
      return async () => {
        expect(await store.deferLookup({ ownerId: OWNER, attemptId: a.id, holder: 'rec_1', backoffBaseMs: 1_000, backoffMaxMs: 60_000 })).toBe(true);
        expect((await store.getAttempt(OWNER, a.id))!.lookupLastAt).not.toBeNull();
      };
    }

    it('a lookup that looked and found nothing: the never-sent attempt is handed back, claimable, the job running', async () => {
      const a = await rescued('looked');
      const release = await looked(a);
      expect(await handBack(a)).toBe('refused'); // while the lookup is held, it decides
      await release();
      expect(await handBack(a)).toBe('handed_back');
      expect(await store.getJob(OWNER, a.jobId)).toMatchObject({ state: 'running', attempts: [{ id: a.id, state: 'starting', leaseOwner: null, error: null, unknownAt: null }] });
      const runs = await store.claimWork({ leaseOwner: 'exe_other', leaseMs: 30_000, limit: 5 });
      expect(runs.map((c) => c.attempt.id)).toEqual([a.id]);
    });

    it('a provider id recorded (the provider answered this attempt): never handed back', async () => {
      const a = await rescued('has-id');
      expect(await store.recordProviderRequestId({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: a.leaseToken!, providerRequestId: 'resp_1' })).toBe(true);
      expect(await handBack(a)).toBe('refused');
      expect((await store.getAttempt(OWNER, a.id))!.state).toBe('unknown');
    });
  });
}
