/**
 * Retention (CONTRACT §9) on both engines, against real databases: finished
 * jobs past the window go with their attempts and events, in bounded
 * batches; nothing queued, running or unknown ever goes; the key is free
 * again; one process sweeps at a time (the maintenance lease, checked with
 * two store instances on one database). Jobs are made "old" by moving their
 * timestamps back with plain SQL beside the store.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Attempt } from '../../src/core/types.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { RetentionSweeper } from '../../src/runtime/retention-sweeper.ts';
import { RETENTION_SQL } from '../../src/store/postgres/retention-queries.ts';
import { RETENTION_DELETE_JOBS } from '../../src/store/sqlite/retention-queries.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const CHAIN = ['primary', 'fallback'];
const EXE = 'exe_retention';
const DAY = 86_400_000;

/** Moves every timestamp of the job and its attempts and events `days` into the past. */
async function backdate(url: string, jobId: string, days: number): Promise<void> {
  const ms = Math.round(days * DAY);
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.pragma('busy_timeout = 5000');
      db.prepare('UPDATE jobs SET created_at = created_at - ?, updated_at = updated_at - ?, finished_at = finished_at - ? WHERE id = ?').run(ms, ms, ms, jobId);
      db.prepare('UPDATE attempts SET started_at = started_at - ?, finished_at = finished_at - ? WHERE job_id = ?').run(ms, ms, jobId);
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const shift = `$1 * interval '1 millisecond'`;
    await c.query(`UPDATE jobs SET created_at = created_at - ${shift}, updated_at = updated_at - ${shift}, finished_at = finished_at - ${shift} WHERE id = $2`, [ms, jobId]);
    await c.query(`UPDATE attempts SET started_at = started_at - ${shift}, finished_at = finished_at - ${shift} WHERE job_id = $2`, [ms, jobId]);
  } finally {
    await c.end();
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`retention on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
    });
    afterEach(async () => {
      await cleanup();
    });

    const create = (key: string) => store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: { key }, providers: CHAIN });

    /** A job whose first attempt is claimed and `running`. */
    async function running(key: string): Promise<{ jobId: string; attempt: Attempt }> {
      const { job } = await create(key);
      const [claimed] = await store.claimWork({ leaseOwner: EXE, leaseMs: 60_000, limit: 1 });
      expect(claimed!.job.id).toBe(job.id);
      const a = claimed!.attempt;
      expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXE, leaseToken: a.leaseToken!, timeoutMs: 60_000 })).toBe(true);
      return { jobId: job.id, attempt: (await store.getAttempt(OWNER, a.id))! };
    }

    async function succeeded(key: string): Promise<string> {
      const { jobId, attempt } = await running(key);
      const r = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, outcome: { state: 'succeeded', result: { ok: key } }, fence: { leaseOwner: EXE, leaseToken: attempt.leaseToken! } });
      expect(r.job.state).toBe('succeeded');
      return jobId;
    }

    async function unknown(key: string): Promise<string> {
      const { jobId, attempt } = await running(key);
      expect(await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, leaseOwner: EXE, leaseToken: attempt.leaseToken!, reason: { code: 'deadline', message: 'no answer' } })).toBe(true);
      return jobId;
    }

    it('deletes finished jobs past the window with their attempts and events, and nothing else', async () => {
      const oldDone = await succeeded('old-done');
      const { job: oldCancelled } = await create('old-cancelled');
      await store.cancelJob(OWNER, oldCancelled.id);
      const recentDone = await succeeded('recent-done');
      const oldUnknown = await unknown('old-unknown');
      const oldRunning = (await running('old-running')).jobId;
      // A terminal job with a loser still in flight: cancelled while its claimed attempt runs.
      const { jobId: cancelledInFlight } = await running('cancelled-in-flight');
      await store.cancelJob(OWNER, cancelledInFlight);
      const { job: oldQueued } = await create('old-queued');
      for (const id of [oldDone, oldCancelled.id, oldUnknown, oldRunning, oldQueued.id, cancelledInFlight]) await backdate(url, id, 40);
      await backdate(url, recentDone, 10);
      const eventsBefore = (await store.listEvents(OWNER, oldDone)).length;
      expect(eventsBefore).toBeGreaterThan(0);

      const result = await store.deleteFinishedJobs({ olderThanMs: 30 * DAY });
      expect(result).toMatchObject({ jobs: 2, attempts: 1, jobsByState: { succeeded: 1, cancelled: 1 } });
      expect(result.events).toBeGreaterThanOrEqual(eventsBefore + 1);

      expect(await store.getJob(OWNER, oldDone)).toBeNull();
      expect(await store.getJob(OWNER, oldCancelled.id)).toBeNull();
      expect(await store.listEvents(OWNER, oldDone)).toEqual([]);
      for (const kept of [recentDone, oldUnknown, oldRunning, oldQueued.id, cancelledInFlight]) expect(await store.getJob(OWNER, kept), kept).not.toBeNull();
      expect((await store.listEvents(OWNER, recentDone)).length).toBeGreaterThan(0);

      // With a window of zero every finished job goes, still never an active one.
      const all = await store.deleteFinishedJobs({ olderThanMs: 0 });
      expect(all.jobs).toBe(1);
      expect(await store.getJob(OWNER, recentDone)).toBeNull();
      for (const kept of [oldUnknown, oldRunning, oldQueued.id, cancelledInFlight]) expect(await store.getJob(OWNER, kept), kept).not.toBeNull();
    });

    it("a deleted job's key can be used again: the replay creates a new job", async () => {
      const first = await succeeded('reused');
      const replay = await create('reused');
      expect(replay).toMatchObject({ created: false, job: { id: first, state: 'succeeded' } });
      await backdate(url, first, 31);
      expect((await store.deleteFinishedJobs({ olderThanMs: 30 * DAY })).jobs).toBe(1);
      const again = await create('reused');
      expect(again.created).toBe(true);
      expect(again.job.id).not.toBe(first);
      expect(again.job.state).toBe('queued');
    });

    it('deletes in bounded batches, oldest first', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const { job } = await create(`b${i}`);
        await store.cancelJob(OWNER, job.id);
        await backdate(url, job.id, 40 + i);
        ids.push(job.id);
      }
      const one = await store.deleteFinishedJobs({ olderThanMs: 30 * DAY, batchSize: 2, maxBatches: 1 });
      expect(one).toMatchObject({ jobs: 2, batches: 1 });
      // The two oldest went first.
      expect(await store.getJob(OWNER, ids[4]!)).toBeNull();
      expect(await store.getJob(OWNER, ids[3]!)).toBeNull();
      expect(await store.getJob(OWNER, ids[0]!)).not.toBeNull();
      const rest = await store.deleteFinishedJobs({ olderThanMs: 30 * DAY, batchSize: 2 });
      expect(rest).toMatchObject({ jobs: 3, batches: 2 });
    });

    it('one sweeper per database: the lease excludes a second store instance until released or expired', async () => {
      const other = await openStore(url);
      try {
        expect(await store.tryMaintenanceLease({ name: 'retention', holder: 'a', ttlMs: 60_000 })).toBe(true);
        expect(await other.tryMaintenanceLease({ name: 'retention', holder: 'b', ttlMs: 60_000 })).toBe(false);
        expect(await store.tryMaintenanceLease({ name: 'retention', holder: 'a', ttlMs: 60_000 })).toBe(true); // renewal
        await other.releaseMaintenanceLease({ name: 'retention', holder: 'b' }); // not b's: no effect
        expect(await other.tryMaintenanceLease({ name: 'retention', holder: 'b', ttlMs: 60_000 })).toBe(false);
        await store.releaseMaintenanceLease({ name: 'retention', holder: 'a' });
        expect(await other.tryMaintenanceLease({ name: 'retention', holder: 'b', ttlMs: 50 })).toBe(true);
        // b dies without releasing: its lease lapses by the database's clock.
        await new Promise((r) => setTimeout(r, 120));
        expect(await store.tryMaintenanceLease({ name: 'retention', holder: 'a', ttlMs: 60_000 })).toBe(true);

        // Two sweepers at once: exactly one sweeps, the other finds the lease taken.
        await store.releaseMaintenanceLease({ name: 'retention', holder: 'a' });
        for (let i = 0; i < 20; i++) {
          const { job } = await create(`s${i}`);
          await store.cancelJob(OWNER, job.id);
          await backdate(url, job.id, 40);
        }
        const a = new RetentionSweeper({ store, finishedJobsDays: 30, batchSize: 5, pauseMs: 30 });
        const b = new RetentionSweeper({ store: other, finishedJobsDays: 30, batchSize: 5, pauseMs: 30 });
        const results = await Promise.all([a.sweepOnce(), b.sweepOnce()]);
        expect(results.filter((r) => r === null)).toHaveLength(1);
        expect(results.find((r) => r !== null)).toMatchObject({ jobs: 20 });
        // Released afterwards: the next sweep of either may run.
        expect(await b.sweepOnce()).toMatchObject({ jobs: 0 });
      } finally {
        await other.close();
      }
    });

    it('a stopped sweeper stops after its current batch and gives the lease up', async () => {
      for (let i = 0; i < 6; i++) {
        const { job } = await create(`stop${i}`);
        await store.cancelJob(OWNER, job.id);
        await backdate(url, job.id, 40);
      }
      const sweeper = new RetentionSweeper({ store, finishedJobsDays: 30, batchSize: 2, pauseMs: 200 });
      const sweep = sweeper.sweepOnce();
      await new Promise((r) => setTimeout(r, 50));
      await sweeper.stop();
      const r = await sweep;
      expect(r!.jobs).toBeLessThan(6);
      expect(await store.tryMaintenanceLease({ name: 'retention', holder: 'next', ttlMs: 1000 })).toBe(true);
    });

    it('the sweep finds old jobs through jobs_finished_idx, not a scan of every job', async () => {
      let plan: string;
      if (url.startsWith('sqlite:')) {
        const raw = new Database(url.slice('sqlite:'.length), { readonly: true });
        try {
          plan = raw.prepare(`EXPLAIN QUERY PLAN ${RETENTION_DELETE_JOBS}`).all({ cutoff: Date.now(), limit: 500 }).map((r) => String((r as { detail: string }).detail)).join('\n');
        } finally {
          raw.close();
        }
      } else {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        try {
          // The planner prefers a scan on a tiny table; forbidding it shows the index can serve the query.
          await c.query('BEGIN; SET LOCAL enable_seqscan = off');
          const text = RETENTION_SQL.deleteBatch.text.replace('$1', '86400000').replace('$2', '500');
          plan = (await c.query(`EXPLAIN ${text}`)).rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
          await c.query('ROLLBACK');
        } finally {
          await c.end();
        }
      }
      expect(plan).toContain('jobs_finished_idx');
    });

    it('attempts_in_doubt is read from the database: resolves from another store instance bring it down', async () => {
      expect(await store.countAttemptsInDoubt()).toBe(0);
      await unknown('d1');
      const j2 = await unknown('d2');
      expect(await store.countAttemptsInDoubt()).toBe(2);
      const other = await openStore(url);
      try {
        const [a] = (await other.getJob(OWNER, j2))!.attempts;
        await other.settleAttempt({ ownerId: OWNER, attemptId: a!.id, outcome: { state: 'cancelled' }, actor: 'test' });
        expect(await store.countAttemptsInDoubt()).toBe(1);
      } finally {
        await other.close();
      }
    });
  });
}
