/**
 * A provider id learned after the lease ran out is not dropped (issue 35), on
 * SQLite and PostgreSQL: `recordProviderRequestId` applies whenever the
 * attempt is not finished, under the attempt's own token (after its lease
 * expired, after the rescuer moved it to `unknown`), and the ambiguous end's
 * `markUnknown` that finds the rescuer was first still records it. Another
 * token, or a finished attempt, records nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const LEASE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`provider ids after the lease, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
    });
    afterEach(() => cleanup());

    /** A running attempt whose lease (LEASE_MS) has run out. */
    async function expired(key: string) {
      const lease = { leaseOwner: 'exe_slow', leaseMs: LEASE_MS };
      const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: {}, providers: ['p'], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { ownerId: OWNER, attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      expect(await store.markRunning({ ...fence, timeoutMs: 60_000 })).toBe(true);
      await sleep(LEASE_MS + 100);
      return { a, fence };
    }

    it('recorded on a running attempt whose lease ran out, and on one the rescuer moved to unknown', async () => {
      const { a, fence } = await expired('late-id');
      expect(await store.recordProviderRequestId({ ...fence, providerRequestId: 'resp_after_lease' })).toBe(true);
      expect((await store.getAttempt(OWNER, a.id))!.providerRequestId).toBe('resp_after_lease');
      expect(await store.rescueExpiredLeases()).toBe(1);
      expect((await store.getAttempt(OWNER, a.id))!.state).toBe('unknown');
      expect(await store.recordProviderRequestId({ ...fence, providerRequestId: 'resp_after_rescue' })).toBe(true);
      expect((await store.getAttempt(OWNER, a.id))!).toMatchObject({ state: 'unknown', providerRequestId: 'resp_after_rescue' });
    });

    it('the ambiguous end after the rescue: markUnknown is refused, but the id it carries is recorded', async () => {
      const { a, fence } = await expired('late-unknown');
      expect(await store.rescueExpiredLeases()).toBe(1);
      const marked = await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' }, providerRequestId: 'req_from_headers' });
      expect(marked).toBe(false);
      expect((await store.getAttempt(OWNER, a.id))!).toMatchObject({ state: 'unknown', providerRequestId: 'req_from_headers', error: { code: 'lease_expired' } });
    });

    it('not under another token, and not on a finished attempt', async () => {
      const { a, fence } = await expired('other-token');
      expect(await store.recordProviderRequestId({ ...fence, leaseToken: 'lease_someone_else', providerRequestId: 'x' })).toBe(false);
      await store.rescueExpiredLeases();
      await store.settleAttempt({ ownerId: OWNER, attemptId: a.id, outcome: { state: 'failed', error: { code: 'resolved_failed', message: 'by hand' } }, resolvedBy: 'operator' });
      expect(await store.recordProviderRequestId({ ...fence, providerRequestId: 'resp_too_late' })).toBe(false);
      expect((await store.getAttempt(OWNER, a.id))!.providerRequestId).toBeNull();
    });
  });
}
