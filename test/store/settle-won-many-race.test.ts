/**
 * The batched winning settle (attemptSettleWonMany, PostgreSQL) against a lease renewal that commits while the
 * settle waits for the attempt's row lock. Seen in an HA chaos run: the job was decided by attempt 1 (completed_by)
 * while the attempt was left running, later superseded "by itself": the statement locked the attempt's NEW version
 * (its ctid after the renewal) but its UPDATE, reading the statement's snapshot, could not see that version, so
 * only the job changed. Ordered here with a second connection holding the attempt's row lock.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.ts';
import { attemptSettleWonMany } from '../../src/store/postgres/fast-path-queries.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createPostgresDatabase } from '../support/postgres.ts';

describe('postgres: a batched winning settle racing a lease renewal of the same attempt', () => {
  let db: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let store: JobStore;
  let settler: pg.Client;
  let renewer: pg.Client;
  beforeAll(async () => {
    db = await createPostgresDatabase('onejob_swm');
    store = await openStore(db.url);
    await store.migrate();
    settler = new pg.Client({ connectionString: db.url });
    renewer = new pg.Client({ connectionString: db.url });
    await Promise.all([settler.connect(), renewer.connect()]);
  });
  afterAll(async () => {
    await Promise.all([settler?.end(), renewer?.end()]);
    await store?.close();
    await db?.drop();
  });

  it('either both the job and the attempt are decided, or neither (the caller then settles the general way)', async () => {
    for (let i = 0; i < 5; i++) {
      const made = await store.createJob({ ownerId: 'alice', idempotencyKey: `swm-${i}`, route: 'summarize', input: { i }, providers: ['primary'], firstAttempt: { leaseOwner: 'exe_a', leaseMs: 60_000 } });
      const a = made.claimed!.attempt;
      // The renewal holds the attempt's row lock; the settle takes its snapshot, locks the job, then waits for the attempt.
      await renewer.query('BEGIN');
      await renewer.query(`UPDATE attempts SET lease_expires_at = lease_expires_at + interval '1 second' WHERE owner_id = $1 AND id = $2`, ['alice', a.id]);
      const settle = attemptSettleWonMany(settler, [{ ownerId: 'alice', jobId: a.jobId, attemptId: a.id, leaseOwner: a.leaseOwner!, leaseToken: a.leaseToken!, result: { ok: i }, actor: 'test', now: null }]);
      await new Promise((r) => setTimeout(r, 200));
      await renewer.query('COMMIT');
      const applied = await settle;
      const job = (await store.getJob('alice', a.jobId))!;
      const attempt = job.attempts.find((x) => x.id === a.id)!;
      // Never a job decided by an attempt that is not succeeded.
      if (job.completedBy !== null) expect(attempt.state).toBe('succeeded');
      expect(applied.has(a.id)).toBe(job.completedBy === a.id);
      expect(job.state === 'succeeded').toBe(attempt.state === 'succeeded');
    }
  });
});
