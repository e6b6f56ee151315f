/**
 * An ended attempt's `error` describes how it ended (issue 35), on SQLite and
 * PostgreSQL: a doubt resolved `succeeded` (by a lookup, a callback, its own
 * late answer, an operator) has `error: null`, not the `deadline_exceeded`
 * that put it in doubt; that stays on the `attempt.succeeded` event (`was`).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedBy } from '../../src/core/types.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { IN_DOUBT_ONLY } from '../../src/store/settle-guard.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const DEADLINE = { code: 'deadline_exceeded', message: 'no answer within timeoutMs' };

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`the error of an ended attempt, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
    });
    afterEach(() => cleanup());

    async function inDoubt(key: string) {
      const lease = { leaseOwner: 'exe_1', leaseMs: 30_000 };
      const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: {}, providers: ['p'], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      expect(await store.markUnknown({ ownerId: OWNER, attemptId: a.id, ...fence, reason: DEADLINE })).toBe(true);
      return { attempt: (await store.getAttempt(OWNER, a.id))!, fence };
    }

    for (const [by, how] of [['lookup', 'outside'], ['callback', 'outside'], ['late_answer', 'fenced'], ['operator', 'operator']] as const) {
      it(`a doubt resolved succeeded by ${by} has no error; the event keeps what the doubt was`, async () => {
        const { attempt, fence } = await inDoubt(`k-${by}`);
        expect(attempt.error).toMatchObject(DEADLINE);
        const outcome = { state: 'succeeded' as const, result: { content: 'done' } };
        const settled = await store.settleAttempt({
          ownerId: OWNER, attemptId: attempt.id, outcome,
          ...(how === 'outside' ? { resolvedBy: by as ResolvedBy, fromStates: IN_DOUBT_ONLY } : how === 'fenced' ? { fence, jobId: attempt.jobId } : { resolvedBy: 'operator' as const }),
        });
        expect(settled.attempt).toMatchObject({ state: 'succeeded', error: null, resolvedBy: by });
        expect((await store.getAttempt(OWNER, attempt.id))!.error).toBeNull();
        const events = await store.listEvents(OWNER, attempt.jobId);
        expect(events.find((e) => e.type === 'attempt.succeeded')?.data).toMatchObject({ resolved_by: by, was: DEADLINE });
      });
    }

    it('a doubt resolved failed keeps an error that says so', async () => {
      const { attempt } = await inDoubt('k-failed');
      const failed = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, outcome: { state: 'failed', error: { code: 'not_found_at_provider', message: 'gone' } }, resolvedBy: 'lookup', fromStates: IN_DOUBT_ONLY });
      expect(failed.attempt.error).toMatchObject({ code: 'not_found_at_provider' });
    });
  });
}
