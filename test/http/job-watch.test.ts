/**
 * JobWatch, the one registry every waiting request of a process goes
 * through (issue 11, "waiting is free"), on SQLite and PostgreSQL with real
 * stores: a change committed here reaches every waiter of the job with the
 * job as committed and no read; a change made by another process (a second
 * store with its own connections) is read once per job, not once per
 * waiter; the fallback re-check is one batched statement however many jobs
 * are watched; a job's change wakes exactly its waiters.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobWithAttempts } from '../../src/core/types.ts';
import { JobWatch } from '../../src/http/job-watch.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { Store } from '../../src/store/store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const LEASE = { leaseOwner: 'exe_watch', leaseMs: 30_000 };

/** `store` with its reads counted (what the registry asks of the database). */
function counted(store: Store): { store: Store; reads: { getJob: number; getJobStates: number } } {
  const reads = { getJob: 0, getJobStates: 0 };
  const proxy = new Proxy(store, {
    get(target, key) {
      const v = Reflect.get(target, key, target);
      if (typeof v !== 'function') return v;
      if (key === 'getJob' || key === 'getJobStates') {
        return (...args: unknown[]) => {
          reads[key]++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return v.bind(target);
    },
  });
  return { store: proxy, reads };
}

/** Resolves with the first job `watch` hands over whose state is one of `states`. */
function until(watch: JobWatch, jobId: string, states: readonly string[], opts: { readNow?: boolean } = {}): { seen: Promise<JobWithAttempts>; off: () => void; calls: () => number } {
  let calls = 0;
  let off = (): void => {};
  const seen = new Promise<JobWithAttempts>((resolve) => {
    off = watch.watch(OWNER, jobId, {
      onJob: (job) => {
        calls++;
        if (job && states.includes(job.state)) resolve(job);
      },
    }, { ...opts, state: 'running' });
  });
  return { seen, off: () => off(), calls: () => calls };
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`JobWatch (${db.name})`, () => {
    let store: JobStore;
    let other: JobStore;
    let cleanup: () => Promise<void>;

    beforeEach(async () => {
      const made = await createTestStore(db);
      store = made.store;
      cleanup = made.cleanup;
      other = await openStore(made.url, { poolSize: 4 });
    });
    afterEach(async () => {
      await other.close();
      await cleanup();
    });

    const leasedJob = async (key: string) => {
      const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: { n: 1 }, providers: ['p'], firstAttempt: LEASE });
      return claimed!;
    };
    const win = (s: Store, c: { attempt: JobWithAttempts['attempts'][number] }, result: unknown) =>
      s.settleAttempt({ ownerId: OWNER, attemptId: c.attempt.id, jobId: c.attempt.jobId, fence: { leaseOwner: LEASE.leaseOwner, leaseToken: c.attempt.leaseToken! }, outcome: { state: 'succeeded', result } });

    it('a read that started before a settle and answers after it is never handed over after the settled job (no older version after a newer one)', async () => {
      // getJob reads at once and answers 300 ms later: the settle committed meanwhile reaches the watcher first.
      const slow = new Proxy(store as Store, {
        get(target, key) {
          const v = Reflect.get(target, key, target);
          if (typeof v !== 'function') return v;
          if (key === 'getJob') {
            return async (...args: unknown[]) => {
              const job = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
              await new Promise((r) => setTimeout(r, 300));
              return job;
            };
          }
          return v.bind(target);
        },
      });
      const watch = new JobWatch({ store: slow, recheckMs: 60_000 });
      try {
        const c = await leasedJob('newer-first');
        const seen: string[] = [];
        const off = watch.watch(OWNER, c.job.id, { onJob: (job) => seen.push(`${job?.state}@${job?.version}`) }, { readNow: true, state: 'running' });
        await new Promise((r) => setTimeout(r, 50));
        await win(store, c, 'R');
        await new Promise((r) => setTimeout(r, 500));
        off();
        expect(seen[0]).toBe('succeeded@1');
        expect(seen.every((v) => v === 'succeeded@1')).toBe(true);
      } finally {
        watch.close();
      }
    });

    it('a settle made here reaches 50 waiters of the job with the committed job, and nothing is read', async () => {
      const { store: s, reads } = counted(store);
      const watch = new JobWatch({ store: s, recheckMs: 60_000 });
      try {
        const c = await leasedJob('pushed');
        const waiters = Array.from({ length: 50 }, () => until(watch, c.job.id, ['succeeded'], { readNow: false }));
        expect(watch.size).toBe(1);
        await win(store, c, 'R');
        const jobs = await Promise.all(waiters.map((w) => w.seen));
        for (const j of jobs) expect(j).toMatchObject({ state: 'succeeded', result: 'R', completedBy: c.attempt.id });
        expect(reads).toEqual({ getJob: 0, getJobStates: 0 });
        for (const w of waiters) w.off();
        expect(watch.size).toBe(0);
      } finally {
        watch.close();
      }
    });

    it('a change made by another process is read once for all the waiters of the job', async () => {
      const { store: s, reads } = counted(store);
      // PostgreSQL delivers it by notification (the sweep is set far away); SQLite by the sweep.
      const watch = new JobWatch({ store: s, recheckMs: db.name === 'postgres' ? 60_000 : 100 });
      try {
        const c = await leasedJob('remote');
        const waiters = Array.from({ length: 50 }, () => until(watch, c.job.id, ['cancelled'], { readNow: false }));
        // The store LISTENs from its first change listener on (an executor's, in a server): let that connection come up.
        await new Promise((r) => setTimeout(r, 300));
        await other.cancelJob(OWNER, c.job.id);
        const jobs = await Promise.all(waiters.map((w) => w.seen));
        for (const j of jobs) expect(j.state).toBe('cancelled');
        expect(reads.getJob).toBe(1);
        for (const w of waiters) w.off();
      } finally {
        watch.close();
      }
    });

    it('the fallback re-check reads the states of 200 watched jobs in one statement, and a job only when its state moved', async () => {
      // Only the sweep can see these changes: the counted store hears nothing of `other`'s writes on SQLite,
      // and on PostgreSQL the test reads what the sweep does with notifications muted (no listener on this store).
      const quiet = counted(new Proxy(store, { get: (t, k) => (k === 'onJobChanged' ? () => () => {} : ((v) => (typeof v === 'function' ? v.bind(t) : v))(Reflect.get(t, k, t))) }));
      const watch = new JobWatch({ store: quiet.store, recheckMs: 50 });
      try {
        const claimed = [];
        for (let i = 0; i < 200; i++) claimed.push(await leasedJob(`sweep-${i}`));
        const waiters = claimed.map((c) => until(watch, c.job.id, ['cancelled'], { readNow: false }));
        await new Promise((r) => setTimeout(r, 300));
        const sweeps = quiet.reads.getJobStates;
        expect(sweeps).toBeGreaterThan(0);
        expect(quiet.reads.getJob).toBe(0); // nothing moved: no job read
        await other.cancelJob(OWNER, claimed[7]!.job.id);
        const job = await waiters[7]!.seen;
        expect(job.state).toBe('cancelled');
        expect(quiet.reads.getJob).toBe(1);
        for (const [i, w] of waiters.entries()) if (i !== 7) expect(w.calls()).toBe(0);
        for (const w of waiters) w.off();
      } finally {
        watch.close();
      }
    });

    it('a job\'s change wakes exactly its waiters: 20 jobs × 5 waiters, one job cancelled', async () => {
      const watch = new JobWatch({ store, recheckMs: 60_000 });
      try {
        const claimed = [];
        for (let i = 0; i < 20; i++) claimed.push(await leasedJob(`exact-${i}`));
        const waiters = claimed.map((c) => Array.from({ length: 5 }, () => until(watch, c.job.id, ['cancelled'], { readNow: false })));
        await store.cancelJob(OWNER, claimed[3]!.job.id);
        await Promise.all(waiters[3]!.map((w) => w.seen));
        await new Promise((r) => setTimeout(r, 100));
        waiters.forEach((ws, i) => ws.forEach((w) => expect(w.calls()).toBe(i === 3 ? 1 : 0)));
        for (const ws of waiters) for (const w of ws) w.off();
      } finally {
        watch.close();
      }
    });
  });
}
