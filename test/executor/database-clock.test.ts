/**
 * Leases, deadlines and the rescuer use the database's clock, not the
 * hosts': executors whose (injected) clocks are 30 s off, one behind and one
 * ahead, share a database with a correct one. Nobody loses a healthy
 * attempt, and a dead one is rescued once its lease is over, by anyone.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/core/clock.ts';
import { Executor } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const SKEW_MS = 30_000;
const skewed = (offsetMs: number): Clock => ({ now: () => new Date(Date.now() + offsetMs) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`the database's clock on ${db.name}`, () => {
    let truth: JobStore;
    let behind: JobStore;
    let ahead: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let provider: Provider;
    const executors: Executor[] = [];

    beforeEach(async () => {
      const t = await createTestStore(db);
      truth = t.store;
      behind = await openStore(t.url, { clock: skewed(-SKEW_MS) });
      ahead = await openStore(t.url, { clock: skewed(SKEW_MS) });
      cleanup = async () => {
        await behind.close();
        await ahead.close();
        await t.cleanup();
      };
      fake = await startFakeProvider();
      provider = createProvider('primary', { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 60_000 });
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(200)));
      await provider.close();
      await fake.close();
      await cleanup();
    });

    const create = (key: string) =>
      truth.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'work', input: { messages: [{ role: 'user', content: key }] }, providers: ['primary'] }).then((r) => r.job);

    async function until<T>(what: string, f: () => Promise<T | null | false | undefined>): Promise<T> {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const v = await f();
        if (v) return v;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await sleep(50);
      }
    }

    it('an executor 30 s behind keeps its healthy attempt: no rescuer, fast or slow, takes it, and its answer wins', async () => {
      fake.setDefault({ gate: 'answer', reply: 'healthy' });
      const e = new Executor({ store: behind, providers: new Map([['primary', provider]]), routes: { work: { hedgeAfterMs: null } }, leaseMs: 3_000, pollMs: 100, runningMarkDelayMs: 0, rescueEveryMs: 60_000 });
      executors.push(e);
      await e.start();
      const job = await create('behind');
      await until('running', async () => (await truth.getJob(OWNER, job.id))?.attempts[0]?.state === 'running');
      // The lease is 3 s from the database's now, whatever the executor's clock says.
      const a = (await truth.getAttempt(OWNER, (await truth.getJob(OWNER, job.id))!.attempts[0]!.id))!;
      expect(Math.abs(a.leaseExpiresAt!.getTime() - (Date.now() + 3_000))).toBeLessThan(2_000);
      for (const rescuer of [truth, ahead, behind]) expect(await rescuer.rescueExpiredLeases()).toBe(0);
      fake.release('answer');
      const done = await until('succeeded', async () => {
        const j = await truth.getJob(OWNER, job.id);
        return j?.state === 'succeeded' ? j : null;
      });
      expect(done.result).toMatchObject({ content: 'healthy' });
      expect(fake.calls).toHaveLength(1);
    });

    it('a rescuer 30 s ahead does not take the healthy attempts of a correct executor', async () => {
      fake.setDefault({ gate: 'answer', reply: 'kept' });
      const e = new Executor({ store: truth, providers: new Map([['primary', provider]]), routes: { work: { hedgeAfterMs: null } }, leaseMs: 3_000, pollMs: 100, runningMarkDelayMs: 0, rescueEveryMs: 60_000 });
      executors.push(e);
      await e.start();
      const job = await create('ahead-rescuer');
      await until('running', async () => (await truth.getJob(OWNER, job.id))?.attempts[0]?.state === 'running');
      expect(await ahead.rescueExpiredLeases()).toBe(0);
      fake.release('answer');
      const done = await until('succeeded', async () => {
        const j = await truth.getJob(OWNER, job.id);
        return j?.state === 'succeeded' ? j : null;
      });
      expect(done.attempts.map((x) => x.state)).toEqual(['succeeded']);
    });

    it('a dead executor 30 s ahead is rescued when its lease is over, also by a rescuer 30 s behind', async () => {
      const job = await create('dead-ahead');
      // An executor that claims and dies: never renews, never settles.
      const [claimed] = await ahead.claimWork({ leaseOwner: 'exe_dead', leaseMs: 500, limit: 1 });
      expect(claimed?.job.id).toBe(job.id);
      expect(Math.abs(claimed!.attempt.leaseExpiresAt!.getTime() - (Date.now() + 500))).toBeLessThan(2_000);
      await sleep(800);
      expect(await behind.rescueExpiredLeases()).toBe(1);
      const after = (await truth.getJob(OWNER, job.id))!;
      expect(after).toMatchObject({ state: 'unknown' });
      expect(after.attempts.map((x) => [x.state, x.error?.code])).toEqual([['unknown', 'lease_expired']]);
    });
  });
}
