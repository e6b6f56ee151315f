/**
 * The reproduction of what the chaos run of 2026-12-01 12:05 (`--ha --ci`) found
 * (`stuck_job`): on a hedged streaming job, the hedge claimed the stream and
 * stopped the primary; the hedge's stream was then cut (the attempt went
 * `unknown` while the primary was still `running`, so the job stayed
 * `running`); the primary then ended `superseded`, and the job stayed
 * `running` for ever with nothing running. CONTRACT §2: a job blocked on an
 * attempt in doubt with nothing running is `unknown`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const EXECUTOR = 'exe_chaos';
const LEASE_MS = 30_000;

for (const db of TEST_DATABASES) {
  const block = db.skip ? describe.skip : describe;
  block(`a stream holder in doubt (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let clock: ManualClock;
    beforeEach(async () => {
      clock = new ManualClock(new Date('2026-03-01T12:00:00.000Z'));
      ({ store, cleanup } = await createTestStore(db, { clock, databaseClock: clock }));
    });
    afterEach(async () => {
      await cleanup();
    });

    it('the job is unknown once the stopped primary ends superseded while the hedge holding the stream is unknown', async () => {
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'k', route: 'hedged', input: { messages: [{ role: 'user', content: 'x' }], stream: true }, providers: ['p1', 'p2'] });
      const [claimed] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 });
      const primary = claimed!.attempt;
      expect(await store.markRunning({ ownerId: OWNER, attemptId: primary.id, leaseOwner: EXECUTOR, leaseToken: primary.leaseToken!, timeoutMs: 2500 })).toBe(true);
      clock.advance(1000);
      const hedge = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'hedge', hedgeAfterMs: 1000, lease: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
      const hedgeFence = { leaseOwner: EXECUTOR, leaseToken: hedge.leaseToken! };
      expect(await store.markRunning({ ownerId: OWNER, attemptId: hedge.id, ...hedgeFence, timeoutMs: 2500 })).toBe(true);
      expect(await store.claimStream({ ownerId: OWNER, jobId: job.id, attemptId: hedge.id, ...hedgeFence })).toBe(true);
      // The hedge's stream is cut: unknown; the primary is still running, so the job is still running.
      await store.markUnknown({ ownerId: OWNER, attemptId: hedge.id, ...hedgeFence, reason: { code: 'connection_lost', message: 'cut mid-stream' } });
      expect((await store.getJob(OWNER, job.id))?.state).toBe('running');
      // The stopped primary ends superseded: nothing runs any more, the hedge is in doubt.
      await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: { leaseOwner: EXECUTOR, leaseToken: primary.leaseToken! }, outcome: { state: 'superseded' } });
      expect((await store.getJob(OWNER, job.id))?.state).toBe('unknown');
    });
  });
}
