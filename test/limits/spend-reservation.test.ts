/**
 * Spend reserved with the attempt (CONTRACT §16), at the store, on both
 * engines: the reservation commits with the attempt's start (a refused create
 * writes nothing), concurrent creates never reserve past the limit, and every
 * way an attempt ends leaves nothing reserved for it (the table below walks
 * the ends of the executor's attempt machine through the same store calls
 * the executor, the reconciler, the operator and the rescuer make).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { OwnerLimits, SpendPolicy } from '../../src/core/limits.ts';
import { isOnejobError } from '../../src/core/errors.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const W = 100; // every priced attempt's worst case, in micro-dollars
const unlimited: OwnerLimits = { spendDayMicros: null, spendMonthMicros: null, concurrency: null, requestsPerMinute: null };

/** alice: a day limit of `dayMicros`; providers p and q cost at most W, `free` nothing (a tool), `unpriced` has no pricing. */
function policy(dayMicros: number, monthMicros: number | null = null): SpendPolicy {
  return {
    limitsOf: (owner) => (owner === 'alice' ? { ...unlimited, spendDayMicros: dayMicros, spendMonthMicros: monthMicros } : unlimited),
    worstCase: (provider) => (provider === 'free' ? 'free' : provider === 'unpriced' ? 'unpriced' : W),
  };
}

const usage = (cost: number) => ({ usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, costMicros: cost });

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip)(`spend reserved with the attempt (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let clock: ManualClock;
    const open = async (p: SpendPolicy) => {
      clock = new ManualClock(new Date('2026-12-07T12:00:00Z'));
      ({ store, cleanup } = await createTestStore(db, { spend: p, databaseClock: clock, clock }));
    };
    afterEach(async () => cleanup?.());

    const use = async () => (await store.ownerUse('alice')).use;
    const create = (key: string, providers = ['p'], lease = false) =>
      store.createJob({
        ownerId: 'alice', idempotencyKey: key, route: 'r', input: { n: key }, providers,
        ...(lease ? { firstAttempt: { leaseOwner: 'exe', leaseMs: 30_000 } } : {}),
      });

    it('reserves the first attempt with its job, and refuses past the limit creating nothing (both create paths)', async () => {
      await open(policy(10 * W));
      for (let i = 0; i < 5; i++) expect((await create(`u${i}`)).job.attempts[0]).toMatchObject({ state: 'starting', leaseOwner: null });
      for (let i = 0; i < 5; i++) expect((await create(`l${i}`, ['p'], true)).claimed?.attempt.leaseOwner).toBe('exe');
      expect(await use()).toMatchObject({ day: { spentMicros: 0, reservedMicros: 10 * W }, month: { spentMicros: 0, reservedMicros: 10 * W } });
      for (const lease of [false, true]) {
        const refused = await create(`over-${lease}`, ['p'], lease).then(() => null, (e: unknown) => e);
        expect(isOnejobError(refused, 'budget_exceeded')).toBe(true);
        // Nothing created: the key is unused.
        expect(await store.driver.queries.jobGetByKey('alice', `over-${lease}`)).toBeNull();
      }
      // A replay is never refused nor counted.
      expect((await create('u0')).created).toBe(false);
      // Another owner is not limited.
      expect((await store.createJob({ ownerId: 'bob', idempotencyKey: 'b', route: 'r', input: {}, providers: ['p'] })).created).toBe(true);
      expect((await use()).day.reservedMicros).toBe(10 * W);
    });

    it('400 concurrent distinct creates against a limit of 100 worst cases: exactly 100 created, 300 refused with nothing written', async () => {
      await open(policy(100 * W));
      // The PostgreSQL driver sheds load past 200 waiting calls (`unavailable`, nothing written): such a create is sent
      // again, as a client would, so that each of the 400 ends created or refused.
      const createOnce = async (i: number): Promise<Awaited<ReturnType<typeof create>>> => {
        for (;;) {
          try {
            return await create(`c${i}`, ['p'], i % 2 === 0);
          } catch (e) {
            if ((e as { code?: unknown }).code !== 'unavailable') throw e;
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      };
      const results = await Promise.allSettled(Array.from({ length: 400 }, (_, i) => createOnce(i)));
      const created = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r) => r.status === 'rejected');
      for (const r of refused) expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'budget_exceeded' });
      expect(created).toHaveLength(100);
      expect(refused).toHaveLength(300);
      const all = await store.listJobs({ ownerId: 'alice', limit: 200 });
      expect(all.jobs).toHaveLength(100);
      expect(await use()).toMatchObject({ day: { reservedMicros: 100 * W, spentMicros: 0 } });
    }, 60_000);

    it('a later attempt that cannot be reserved is skipped budget_exceeded; the job fails with that code when nothing is left', async () => {
      await open(policy(W + W / 2));
      const { claimed } = await create('k', ['p', 'q'], true);
      const a = claimed!.attempt;
      // The first attempt ran and cost 0.8 W: the failover's worst case no longer fits.
      const out = await store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: { leaseOwner: 'exe', leaseToken: a.leaseToken! }, outcome: { state: 'failed', error: { code: 'provider_error', message: '500' }, ...usage(80) } });
      expect(out.failover).toBeNull();
      expect(out.job.state).toBe('failed');
      expect(out.job.error).toMatchObject({ code: 'budget_exceeded' });
      expect(out.job.skipped).toEqual([{ provider: 'q', reason: 'budget_exceeded' }]);
      expect(out.job.attempts).toHaveLength(1);
      expect(await use()).toMatchObject({ day: { spentMicros: 80, reservedMicros: 0 } });
    });

    it('a failover that fits is reserved; a hedge or manual start that does not fit is refused and writes nothing', async () => {
      await open(policy(2 * W));
      const { claimed } = await create('k', ['p', 'q'], true);
      const first = claimed!.attempt;
      await store.markRunning({ ownerId: 'alice', attemptId: first.id, leaseOwner: 'exe', leaseToken: first.leaseToken!, timeoutMs: 10_000 });
      const hedge = await store.startAttempt({ ownerId: 'alice', jobId: first.jobId, kind: 'hedge', hedgeAfterMs: 0, lease: { leaseOwner: 'exe', leaseMs: 30_000 } });
      await store.markRunning({ ownerId: 'alice', attemptId: hedge.id, leaseOwner: 'exe', leaseToken: hedge.leaseToken!, timeoutMs: 10_000 });
      expect((await use()).day.reservedMicros).toBe(2 * W);
      const third = await store.startAttempt({ ownerId: 'alice', jobId: first.jobId, kind: 'manual', provider: 'p', hedgeAfterMs: 0 }).then(() => null, (e: unknown) => e);
      expect(third).toMatchObject({ code: 'budget_exceeded' });
      expect((await store.getJob('alice', first.jobId))!.attempts).toHaveLength(2);
    });

    it('under a spend limit a provider without pricing is skipped unsupported:pricing; a tool reserves nothing', async () => {
      await open(policy(10 * W));
      const { job } = await create('k', ['unpriced', 'p']);
      // The first provider is skipped, so the job is queued; the claim records the skip and reserves on p.
      expect(job.state).toBe('queued');
      const [claimed] = await store.claimWork({ leaseOwner: 'exe', leaseMs: 30_000, limit: 5 });
      expect(claimed!.attempt.provider).toBe('p');
      expect((await store.getJob('alice', job.id))!.skipped).toEqual([{ provider: 'unpriced', reason: 'unsupported:pricing' }]);
      const tool = await create('t', ['free']);
      expect(tool.job.attempts[0]!.provider).toBe('free');
      expect((await use()).day.reservedMicros).toBe(W);
    });
  });
}
