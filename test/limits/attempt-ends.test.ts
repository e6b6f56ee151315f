/**
 * Every way an attempt ends leaves nothing reserved for it (CONTRACT §16),
 * on both engines: a table over the ends of the executor's attempt machine
 * (docs/executor.md, "The attempt machine"), each driven through the store
 * calls the executor, the reconciler, the operator, a cancel, the rescuer and
 * retention make. After each: reserved is 0 and spent is exactly the sum of
 * the owner's attempts' `cost_usd` (the reservation became the real cost, in
 * the commit that recorded the end).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { OwnerLimits, SpendPolicy } from '../../src/core/limits.ts';
import type { Attempt } from '../../src/core/types.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const W = 1_000;
const unlimited: OwnerLimits = { spendDayMicros: null, spendMonthMicros: null, concurrency: null, requestsPerMinute: null };
const policy: SpendPolicy = {
  limitsOf: (owner) => (owner === 'alice' ? { ...unlimited, spendDayMicros: 100 * W, spendMonthMicros: 1_000 * W } : unlimited),
  worstCase: () => W,
};
const usage = (cost: number) => ({ usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: cost });
const failed = { code: 'provider_error', message: 'HTTP 400' };

interface Ctx {
  store: JobStore;
  clock: ManualClock;
  /** A job of one provider (or the chain given) with its first attempt leased to `exe`. */
  leased(providers?: string[]): Promise<Attempt>;
  fence(a: Attempt): { leaseOwner: string; leaseToken: string };
}

/** The end, and whether the job is then decided (so that nothing of it may be left reserved). */
const ENDS: Record<string, (c: Ctx) => Promise<void>> = {
  'success (the fast path)': async (c) => {
    const a = await c.leased();
    const out = await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, jobId: a.jobId, fence: c.fence(a), outcome: { state: 'succeeded', result: 'ok', ...usage(420) } });
    expect(out.won).toBe(true);
  },
  'success (the general path, a sibling decided)': async (c) => {
    const a = await c.leased(['p', 'q']);
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    const h = await c.store.startAttempt({ ownerId: 'alice', jobId: a.jobId, kind: 'hedge', hedgeAfterMs: 0, lease: { leaseOwner: 'exe', leaseMs: 30_000 } });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: h.id, fence: c.fence(h), outcome: { state: 'succeeded', result: 'h', ...usage(300) } });
    // The loser answered after the job was decided: superseded, its cost kept.
    const lost = await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'succeeded', result: 'a', ...usage(500) } });
    expect(lost.attempt.state).toBe('superseded');
  },
  'superseded, stopped before it answered': async (c) => {
    const a = await c.leased(['p', 'q']);
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    const h = await c.store.startAttempt({ ownerId: 'alice', jobId: a.jobId, kind: 'hedge', hedgeAfterMs: 0, lease: { leaseOwner: 'exe', leaseMs: 30_000 } });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'succeeded', result: 'a', ...usage(200) } });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: h.id, fence: c.fence(h), outcome: { state: 'superseded' } });
  },
  'definite failure before sending (fails over, then the failover fails too)': async (c) => {
    const a = await c.leased(['p', 'q']);
    const out = await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'failed', error: { code: 'provider_unreachable', message: 'refused' } } });
    const next = out.failover!;
    const [claimed] = await c.store.claimWork({ leaseOwner: 'exe', leaseMs: 30_000, limit: 1 });
    expect(claimed!.attempt.id).toBe(next.id);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: next.id, fence: c.fence(claimed!.attempt), outcome: { state: 'failed', error: failed } });
  },
  'definite failure after sending (the provider reported usage)': async (c) => {
    const a = await c.leased();
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'failed', error: { code: 'contract_violation', message: 'bad' }, ...usage(640) } });
  },
  'unknown, then a lookup finds the answer': async (c) => {
    const a = await unknown(c);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'lookup', outcome: { state: 'succeeded', result: 'x', ...usage(333) } });
  },
  'unknown, then a callback says failed': async (c) => {
    const a = await unknown(c);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'callback', outcome: { state: 'failed', error: failed } });
  },
  'unknown, then the settle policy': async (c) => {
    const a = await unknown(c);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'policy', outcome: { state: 'failed', error: { code: 'settled_by_policy', message: 'p' } } });
  },
  'unknown, then an operator resolves it succeeded': async (c) => {
    const a = await unknown(c);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'operator', actor: 'api', outcome: { state: 'succeeded', result: 'given' } });
  },
  'unknown, then its late answer': async (c) => {
    const a = await unknown(c);
    const out = await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'succeeded', result: 'late', ...usage(123) } });
    expect(out.attempt.resolvedBy).toBe('late_answer');
  },
  'unknown, resolved failed, then a late usage report': async (c) => {
    const a = await unknown(c);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'operator', outcome: { state: 'failed', error: failed } });
    expect(await c.store.recordLateUsage({ ownerId: 'alice', attemptId: a.id, ...usage(77), usage: usage(77).usage })).toBe(true);
  },
  'cancel before the claim (unclaimed attempt)': async (c) => {
    const { job } = await c.store.createJob({ ownerId: 'alice', idempotencyKey: `u-${Math.random()}`, route: 'r', input: {}, providers: ['p'] });
    expect(job.attempts[0]!.leaseOwner).toBeNull();
    await c.store.cancelJob('alice', job.id);
  },
  'cancel while running (the executor settles cancelled)': async (c) => {
    const a = await c.leased();
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    await c.store.cancelJob('alice', a.jobId);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(a), outcome: { state: 'cancelled' } });
  },
  'lease expiry (an executor killed: the rescuer), then resolved': async (c) => {
    const a = await c.leased();
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    c.clock.advance(31_000);
    expect(await c.store.rescueExpiredLeases()).toBeGreaterThan(0);
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, resolvedBy: 'operator', outcome: { state: 'cancelled' } });
  },
  'lease expiry under a decided job (rescued straight to superseded)': async (c) => {
    const a = await c.leased(['p', 'q']);
    await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
    const h = await c.store.startAttempt({ ownerId: 'alice', jobId: a.jobId, kind: 'hedge', hedgeAfterMs: 0, lease: { leaseOwner: 'exe2', leaseMs: 60_000 } });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: h.id, fence: { leaseOwner: 'exe2', leaseToken: h.leaseToken! }, outcome: { state: 'succeeded', result: 'h', ...usage(10) } });
    c.clock.advance(31_000);
    expect(await c.store.rescueExpiredLeases()).toBeGreaterThan(0);
  },
  'a never-sent attempt handed back, then claimed and run': async (c) => {
    const a = await c.leased();
    expect(await c.store.handBackUnsent({ ownerId: 'alice', attemptId: a.id, ...c.fence(a) })).toBe('handed_back');
    const [claimed] = await c.store.claimWork({ leaseOwner: 'exe', leaseMs: 30_000, limit: 1 });
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: c.fence(claimed!.attempt), outcome: { state: 'succeeded', result: 'ok', ...usage(50) } });
  },
  'retention deletes the finished job (spend stays spent)': async (c) => {
    const a = await c.leased();
    await c.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, jobId: a.jobId, fence: c.fence(a), outcome: { state: 'succeeded', result: 'ok', ...usage(900) } });
    c.clock.advance(1_000);
    const spentBefore = (await c.store.ownerUse('alice')).use.day.spentMicros;
    expect((await c.store.deleteFinishedJobs({ olderThanMs: 0 })).jobs).toBe(1);
    expect((await c.store.ownerUse('alice')).use.day.spentMicros).toBe(spentBefore);
  },
};

/** A leased attempt the executor marked unknown (its deadline passed). */
async function unknown(c: Ctx): Promise<Attempt> {
  const a = await c.leased();
  await c.store.markRunning({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), timeoutMs: 1000 });
  expect(await c.store.markUnknown({ ownerId: 'alice', attemptId: a.id, ...c.fence(a), reason: { code: 'deadline_exceeded', message: 'late' } })).toBe(true);
  // The reservation is held while the attempt is in doubt.
  expect((await c.store.ownerUse('alice')).use.day.reservedMicros).toBe(W);
  return a;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip)(`every end of an attempt leaves nothing reserved (${db.name})`, () => {
    let store: JobStore;
    let cleanup: (() => Promise<void>) | undefined;
    afterEach(async () => cleanup?.());

    it.each(Object.keys(ENDS))('%s', async (name) => {
      const clock = new ManualClock(new Date('2026-12-07T12:00:00Z'));
      ({ store, cleanup } = await createTestStore(db, { spend: policy, databaseClock: clock, clock }));
      let n = 0;
      const ctx: Ctx = {
        store, clock,
        leased: async (providers = ['p']) => (await store.createJob({ ownerId: 'alice', idempotencyKey: `k${n++}`, route: 'r', input: {}, providers, firstAttempt: { leaseOwner: 'exe', leaseMs: 30_000 } })).claimed!.attempt,
        fence: (a) => ({ leaseOwner: a.leaseOwner!, leaseToken: a.leaseToken! }),
      };
      await ENDS[name]!(ctx);
      const { use } = await store.ownerUse('alice');
      const jobs = (await store.listAllJobs({ ownerId: 'alice', limit: 200 })).jobs;
      for (const j of jobs) for (const a of j.attempts) expect(['succeeded', 'failed', 'cancelled', 'superseded']).toContain(a.state);
      const costs = jobs.flatMap((j) => j.attempts).reduce((s, a) => s + (a.costMicros ?? 0), 0);
      expect(use.day.reservedMicros).toBe(0);
      expect(use.month.reservedMicros).toBe(0);
      if (name.startsWith('retention')) expect(use.day.spentMicros).toBe(900);
      else expect(use.day.spentMicros).toBe(costs);
      expect(use.month.spentMicros).toBe(use.day.spentMicros);
    });
  });
}
