/**
 * The PostgreSQL driver against a real server: a scratch database per file,
 * created from `postgres://…/test` and dropped afterwards. Skipped when the
 * server is not reachable.
 */
import { loadMigrations } from '../src/store/migration-files.ts';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isOnejobError } from '../src/core/errors.ts';
import { newId } from '../src/core/ids.ts';
import type { AttemptInsertRow, Driver, JobInsertRow } from '../src/store/driver.ts';
import { createPostgresDriver } from '../src/store/postgres/postgres-driver.ts';

const ADMIN_URL = process.env['ONEJOB_TEST_PG_ADMIN_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function createScratchDatabase(): Promise<string> {
  const name = `onejob_pgdrv_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  return name;
}

async function dropScratchDatabase(name: string): Promise<void> {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

function urlFor(db: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${db}`;
  return u.toString();
}

const reachable = await admin(async () => true).catch(() => false);

const T0 = new Date('2026-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);

function jobRow(over: Partial<JobInsertRow> = {}): JobInsertRow {
  return {
    id: newId('job'),
    ownerId: 'alice',
    idempotencyKey: newId('job'),
    fingerprint: 'sha256:abc',
    route: 'summarize',
    input: { b: 1, a: [1, 2, { z: null }], s: '007' },
    metadata: { tag: 'x' },
    providers: ['primary', 'fallback'],
    createdAt: T0,
    ...over,
  };
}

function attemptRow(jobId: string, over: Partial<AttemptInsertRow> = {}): AttemptInsertRow {
  return {
    id: newId('att'),
    ownerId: 'alice',
    jobId,
    number: 1,
    provider: 'primary',
    kind: 'first',
    state: 'starting',
    baseVersion: 0,
    startedAt: T0,
    deadlineAt: null,
    leaseOwner: null,
    leaseToken: null,
    leaseExpiresAt: null,
    ...over,
  };
}

describe.skipIf(!reachable)('PostgresDriver', () => {
  let dbName = '';
  let driver: Driver;

  beforeAll(async () => {
    dbName = await createScratchDatabase();
    driver = await createPostgresDriver({ connectionString: urlFor(dbName), max: 40 });
  });
  afterAll(async () => {
    await driver?.close();
    if (dbName) await dropScratchDatabase(dbName);
  });

  describe('migrations', () => {
    it('reports every migration pending on an empty database, applies them, then nothing is pending', async () => {
      const all = loadMigrations('postgres');
      expect(all.length).toBeGreaterThanOrEqual(2);
      expect(await driver.pendingMigrations()).toEqual(all.map((m) => m.version));
      expect(await driver.migrate()).toEqual(all.map((m) => ({ version: m.version, name: m.name, status: 'applied' })));
      expect(await driver.pendingMigrations()).toEqual([]);
      expect(await driver.migrate()).toEqual(all.map((m) => ({ version: m.version, name: m.name, status: 'already_applied' })));
    });

    it('is safe when several processes migrate the same fresh database at once', async () => {
      const name = await createScratchDatabase();
      const drivers = await Promise.all(Array.from({ length: 4 }, () => createPostgresDriver({ connectionString: urlFor(name), max: 2 })));
      try {
        const results = await Promise.all(drivers.map((d) => d.migrate()));
        const statuses = results.map((r) => r[0]?.status).sort();
        expect(statuses).toEqual(['already_applied', 'already_applied', 'already_applied', 'applied']);
        expect(await drivers[0]!.pendingMigrations()).toEqual([]);
      } finally {
        await Promise.all(drivers.map((d) => d.close()));
        await dropScratchDatabase(name);
      }
    });
  });

  describe('capabilities and connectivity', () => {
    it('declares LISTEN/NOTIFY, its only capability flag', () => {
      expect(driver.capabilities).toEqual({ supportsListenNotify: true });
    });

    it('pings, and maps an unreachable server to database_unavailable with a one-line message and no password', async () => {
      await driver.ping();
      const dead = await createPostgresDriver({ connectionString: 'postgres://postgres:secret@127.0.0.1:1/nowhere', connectTimeoutMs: 2_000 });
      try {
        const e = await dead.ping().then(() => null, (err: unknown) => err);
        expect(isOnejobError(e, 'database_unavailable')).toBe(true);
        expect((e as Error).message).toMatch(/^PostgreSQL at 127\.0\.0\.1:1\/nowhere is unreachable: /);
        expect((e as Error).message).not.toContain('secret');
        expect((e as Error).message).not.toContain('\n');
        const q = await dead.queries.jobGet('alice', 'job_x').then(() => null, (err: unknown) => err);
        expect(isOnejobError(q, 'database_unavailable')).toBe(true);
        const t = await dead.transaction(async () => 1).then(() => null, (err: unknown) => err);
        expect(isOnejobError(t, 'database_unavailable')).toBe(true);
        const m = await dead.migrate().then(() => null, (err: unknown) => err);
        expect(isOnejobError(m, 'database_unavailable')).toBe(true);
      } finally {
        await dead.close();
      }
    });
  });

  describe('jobs', () => {
    it('inserts a job with its defaults and reads it back exactly (json kept as written, bigint as number)', async () => {
      const row = jobRow();
      const job = await driver.queries.jobInsert(row);
      expect(job).toEqual({
        id: row.id,
        ownerId: 'alice',
        idempotencyKey: row.idempotencyKey,
        fingerprint: 'sha256:abc',
        route: 'summarize',
        input: row.input,
        metadata: { tag: 'x' },
        providers: ['primary', 'fallback'],
        state: 'queued',
        version: 0,
        completedBy: null,
        result: null,
        error: null,
        skipped: [],
        createdAt: T0,
        updatedAt: T0,
        traceContext: null,
        batchId: null,
      });
      expect(Object.keys((job!.input as Record<string, unknown>))).toEqual(['b', 'a', 's']);
      expect(typeof job!.version).toBe('number');
      expect(await driver.queries.jobGet('alice', row.id)).toEqual(job);
      expect(await driver.queries.jobGetByKey('alice', row.idempotencyKey)).toEqual(job);
      expect(await driver.queries.jobGet('bob', row.id)).toBeNull();
      expect(await driver.queries.jobGetByKey('bob', row.idempotencyKey)).toBeNull();
    });

    it('returns null for an existing (owner, key), and lets another owner use the same key', async () => {
      const row = jobRow();
      expect(await driver.queries.jobInsert(row)).not.toBeNull();
      expect(await driver.queries.jobInsert({ ...row, id: newId('job'), fingerprint: 'sha256:other' })).toBeNull();
      const bobs = await driver.queries.jobInsert({ ...row, id: newId('job'), ownerId: 'bob' });
      expect(bobs?.ownerId).toBe('bob');
    });

    it('creates exactly one row when 32 inserts of one key race', async () => {
      const key = newId('job');
      const results = await Promise.all(Array.from({ length: 32 }, () => driver.queries.jobInsert(jobRow({ idempotencyKey: key }))));
      expect(results.filter((r) => r !== null)).toHaveLength(1);
    });

    it('lists newest first with state filter and keyset pagination', async () => {
      const owner = `lister_${newId('job')}`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const row = jobRow({ ownerId: owner, createdAt: at(i * 1000) });
        ids.push(row.id);
        await driver.queries.jobInsert(row);
      }
      // Two jobs at the same instant: the id breaks the tie.
      const tieA = jobRow({ ownerId: owner, createdAt: at(2000) });
      await driver.queries.jobInsert(tieA);
      const all = await driver.queries.jobList({ ownerId: owner, limit: 100 });
      expect(all.map((j) => j.createdAt.getTime() - T0.getTime())).toEqual([4000, 3000, 2000, 2000, 1000, 0]);
      const page1 = await driver.queries.jobList({ ownerId: owner, limit: 3 });
      const last = page1[2]!;
      const page2 = await driver.queries.jobList({ ownerId: owner, limit: 3, after: { createdAt: last.createdAt, id: last.id } });
      expect([...page1, ...page2].map((j) => j.id)).toEqual(all.map((j) => j.id));
      await driver.queries.jobUpdateProgress({ ownerId: owner, id: ids[1]!, state: 'running', attemptCount: 1, skipped: [], updatedAt: at(9000) });
      expect((await driver.queries.jobList({ ownerId: owner, limit: 10, state: 'running' })).map((j) => j.id)).toEqual([ids[1]]);
      const queuedBefore3s = await driver.queries.jobList({ ownerId: owner, limit: 10, state: 'queued', after: { createdAt: at(3000), id: '' } });
      const tiedAt2s = [tieA.id, ids[2]!].sort().reverse();
      expect(queuedBefore3s.map((j) => j.id)).toEqual([...tiedAt2s, ids[0]]);
    });

    it('updates progress of a live job only, and finishes through a compare-and-swap exactly once', async () => {
      const row = jobRow();
      await driver.queries.jobInsert(row);
      const skipped = [{ provider: 'p', reason: 'not_certified' }];
      expect(await driver.queries.jobUpdateProgress({ ownerId: 'alice', id: row.id, state: 'running', attemptCount: 2, skipped, updatedAt: at(1) })).toBe(true);
      expect((await driver.queries.jobGet('alice', row.id))?.skipped).toEqual(skipped);

      const finish = (completedBy: string, result: unknown, expectedVersion = 0) =>
        driver.queries.jobFinish({ ownerId: 'alice', id: row.id, expectedVersion, state: 'succeeded', completedBy, result, error: null, skipped, now: at(2) });
      expect(await finish('att_x', { ok: 1 }, 7)).toBe(false);
      const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => finish(`att_${i}`, { winner: i })));
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      const winner = outcomes.indexOf(true);
      const job = await driver.queries.jobGet('alice', row.id);
      expect(job).toMatchObject({ state: 'succeeded', version: 1, completedBy: `att_${winner}`, result: { winner }, updatedAt: at(2) });
      expect(await finish('att_late', 1, 1)).toBe(false);
      expect(await driver.queries.jobUpdateProgress({ ownerId: 'alice', id: row.id, state: 'running', attemptCount: 3, skipped: [], updatedAt: at(3) })).toBe(false);
    });

    it('stores a failure error and a falsy result exactly', async () => {
      const row = jobRow();
      await driver.queries.jobInsert(row);
      const error = { code: 'chain_exhausted', message: 'no provider left', details: { n: 0 } };
      expect(await driver.queries.jobFinish({ ownerId: 'alice', id: row.id, expectedVersion: 0, state: 'failed', completedBy: null, result: null, error, skipped: [], now: at(5) })).toBe(true);
      expect(await driver.queries.jobGet('alice', row.id)).toMatchObject({ state: 'failed', error, result: null, completedBy: null });

      const row2 = jobRow();
      await driver.queries.jobInsert(row2);
      expect(await driver.queries.jobFinish({ ownerId: 'alice', id: row2.id, expectedVersion: 0, state: 'succeeded', completedBy: 'att_1', result: 0, error: null, skipped: [], now: at(5) })).toBe(true);
      expect((await driver.queries.jobGet('alice', row2.id))?.result).toBe(0);
    });
  });

  describe('transactions', () => {
    it('commits on resolve and rolls back on throw', async () => {
      const a = jobRow();
      const b = jobRow();
      await driver.transaction(async (q) => {
        await q.jobInsert(a);
      });
      await expect(
        driver.transaction(async (q) => {
          await q.jobInsert(b);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await driver.queries.jobGet('alice', a.id)).not.toBeNull();
      expect(await driver.queries.jobGet('alice', b.id)).toBeNull();
    });

    it('lets constraint errors through untouched', async () => {
      const row = jobRow();
      await driver.queries.jobInsert(row);
      const att = attemptRow(row.id);
      await driver.queries.attemptInsert(att);
      const e = await driver.queries.attemptInsert({ ...att, id: newId('att') }).then(() => null, (err: unknown) => err);
      expect((e as { code?: string }).code).toBe('23505');
      const fk = await driver.queries.attemptInsert(attemptRow('job_missing')).then(() => null, (err: unknown) => err);
      expect((fk as { code?: string }).code).toBe('23503');
    });

    it('serializes on jobGet(…, true): the second locker waits for the first to commit', async () => {
      const row = jobRow();
      await driver.queries.jobInsert(row);
      const order: string[] = [];
      let releaseFirst!: () => void;
      const firstHolds = new Promise<void>((r) => (releaseFirst = r));
      let firstLocked!: () => void;
      const locked = new Promise<void>((r) => (firstLocked = r));
      const first = driver.transaction(async (q) => {
        await q.jobGet('alice', row.id, true);
        order.push('first locked');
        firstLocked();
        await firstHolds;
        await q.jobUpdateProgress({ ownerId: 'alice', id: row.id, state: 'running', attemptCount: 1, skipped: [], updatedAt: at(1) });
        order.push('first done');
      });
      await locked;
      const second = driver.transaction(async (q) => {
        const job = await q.jobGet('alice', row.id, true);
        order.push(`second saw ${job?.state}`);
      });
      await new Promise((r) => setTimeout(r, 100));
      releaseFirst();
      await Promise.all([first, second]);
      expect(order).toEqual(['first locked', 'first done', 'second saw running']);
    });

    it('turns a connection killed mid-transaction into database_unavailable, without crashing, and recovers', async () => {
      const backgroundErrors: Error[] = [];
      const d = await createPostgresDriver({
        connectionString: urlFor(dbName),
        max: 2,
        applicationName: 'onejob_kill_test',
        onBackgroundError: (e) => backgroundErrors.push(e),
      });
      try {
        const row = jobRow();
        await d.queries.jobInsert(row);
        const e = await d
          .transaction(async (q) => {
            await q.jobGet('alice', row.id, true);
            await admin((c) => c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'onejob_kill_test'`));
            await new Promise((r) => setTimeout(r, 50));
            return q.jobGet('alice', row.id);
          })
          .then(() => null, (err: unknown) => err);
        expect(isOnejobError(e, 'database_unavailable')).toBe(true);
        await new Promise((r) => setTimeout(r, 50));
        await d.ping();
        expect((await d.queries.jobGet('alice', row.id))?.id).toBe(row.id);
      } finally {
        await d.close();
      }
    });

    it('re-runs a transaction chosen as a deadlock victim, so both sides commit', async () => {
      const x = jobRow();
      const y = jobRow();
      await driver.queries.jobInsert(x);
      await driver.queries.jobInsert(y);
      let runs = 0;
      let bothLocked!: () => void;
      let lockedCount = 0;
      const barrier = new Promise<void>((r) => (bothLocked = r));
      const lockBoth = (first: string, second: string) =>
        driver.transaction(async (q) => {
          runs++;
          await q.jobGet('alice', first, true);
          if (++lockedCount === 2) bothLocked();
          await barrier;
          await q.jobGet('alice', second, true);
          return 'ok';
        });
      expect(await Promise.all([lockBoth(x.id, y.id), lockBoth(y.id, x.id)])).toEqual(['ok', 'ok']);
      expect(runs).toBe(3);
    });

    it('hands concurrent executors different queued jobs (SKIP LOCKED)', async () => {
      const owner = `queue_${newId('job')}`;
      const rows = Array.from({ length: 6 }, (_, i) => jobRow({ ownerId: owner, createdAt: new Date(Date.UTC(2000, 0, 1, 0, 0, i)) }));
      for (const r of rows) await driver.queries.jobInsert(r);
      let releaseFirst!: () => void;
      const hold = new Promise<void>((r) => (releaseFirst = r));
      let tookFirst!: (ids: string[]) => void;
      const firstIds = new Promise<string[]>((r) => (tookFirst = r));
      const first = driver.transaction(async (q) => {
        const jobs = await q.jobListQueuedForUpdate(3);
        tookFirst(jobs.map((j) => j.id));
        await hold;
      });
      const a = await firstIds;
      const b = await driver.transaction(async (q) => (await q.jobListQueuedForUpdate(3)).map((j) => j.id));
      releaseFirst();
      await first;
      expect(a).toEqual(rows.slice(0, 3).map((r) => r.id));
      expect(b).toEqual(rows.slice(3, 6).map((r) => r.id));
    });
  });

  describe('attempts', () => {
    it('inserts, lists by job and jobs, and gets', async () => {
      const j1 = jobRow();
      const j2 = jobRow();
      await driver.queries.jobInsert(j1);
      await driver.queries.jobInsert(j2);
      const a2 = attemptRow(j1.id, { number: 2, provider: 'fallback', kind: 'failover', baseVersion: 0, startedAt: at(10) });
      const a1 = attemptRow(j1.id, { deadlineAt: at(20_000), leaseOwner: 'exe_1', leaseToken: 'lease_1', leaseExpiresAt: at(30_000) });
      const b1 = attemptRow(j2.id);
      await driver.queries.attemptInsert(a2);
      await driver.queries.attemptInsert(a1);
      await driver.queries.attemptInsert(b1);
      const list = await driver.queries.attemptListByJob('alice', j1.id);
      expect(list.map((a) => a.number)).toEqual([1, 2]);
      expect(list[0]).toEqual({ ...a1, finishedAt: null, error: null, usage: null, costMicros: null, providerRequestId: null, resolvedBy: null, unknownAt: null, lookupNextAt: null, lookupLastAt: null });
      const many = await driver.queries.attemptListByJobs('alice', [j2.id, j1.id]);
      // Ordered by job id, then number.
      expect(many.map((a) => a.id)).toEqual(j1.id < j2.id ? [a1.id, a2.id, b1.id] : [b1.id, a1.id, a2.id]);
      expect(await driver.queries.attemptListByJobs('alice', [])).toEqual([]);
      expect(await driver.queries.attemptGet('alice', a1.id)).toEqual(list[0]);
      expect(await driver.queries.attemptGet('bob', a1.id)).toBeNull();
    });

    it('applies a guarded, fenced update only while the state and lease match', async () => {
      const j = jobRow();
      await driver.queries.jobInsert(j);
      const a = attemptRow(j.id, { leaseOwner: 'exe_1', leaseToken: 'lease_a', leaseExpiresAt: at(10_000) });
      await driver.queries.attemptInsert(a);
      const fence = { leaseOwner: 'exe_1', leaseToken: 'lease_a', now: at(1_000) };
      const up = driver.queries.attemptUpdate;
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['starting'], fence: { ...fence, leaseToken: 'lease_b' }, set: { state: 'running' } })).toBe(false);
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['starting'], fence: { ...fence, now: at(10_000) }, set: { state: 'running' } })).toBe(false);
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['running'], fence, set: { state: 'running' } })).toBe(false);
      expect(await up({ ownerId: 'bob', id: a.id, fromStates: ['starting'], fence, set: { state: 'running' } })).toBe(false);
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['starting'], fence, set: { state: 'running', startedAt: at(500), deadlineAt: at(20_000), leaseExpiresAt: at(15_000) } })).toBe(true);
      expect(await driver.queries.attemptGet('alice', a.id)).toMatchObject({ state: 'running', startedAt: at(500), deadlineAt: at(20_000), leaseExpiresAt: at(15_000) });

      const error = { code: 'deadline', message: 'no answer in time' };
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['starting', 'running'], fence, set: { state: 'unknown', error } })).toBe(true);
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['unknown'], fence, set: { releaseLease: true } })).toBe(true);
      expect(await driver.queries.attemptGet('alice', a.id)).toMatchObject({ state: 'unknown', error, leaseOwner: null, leaseToken: 'lease_a', leaseExpiresAt: null });
      // Unfenced (an explicit resolve), clearing the error; deadline null clears too.
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['unknown'], set: { state: 'succeeded', finishedAt: at(30_000), error: null, deadlineAt: null } })).toBe(true);
      expect(await driver.queries.attemptGet('alice', a.id)).toMatchObject({ state: 'succeeded', finishedAt: at(30_000), error: null, deadlineAt: null });
      // Nothing to set: only the guard is checked.
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['succeeded'], set: {} })).toBe(true);
      expect(await up({ ownerId: 'alice', id: a.id, fromStates: ['running'], set: {} })).toBe(false);
      await expect(up({ ownerId: 'alice', id: a.id, fromStates: ['succeeded'], set: { releaseLease: true, leaseExpiresAt: at(1) } })).rejects.toThrow(TypeError);
    });

    it('claims unclaimed starting attempts oldest first, each with its own token, without overlap between claimers', async () => {
      // Settle anything earlier tests left claimable, so this test sees only its own rows.
      await driver.queries.attemptClaim({ leaseOwner: 'exe_sweep', leaseExpiresAt: at(1), limit: 1_000, now: new Date(8.64e15) });
      // 40 jobs with one unclaimed attempt each (a claim locks an attempt's job first: one claimer per job at a time).
      for (let i = 0; i < 40; i++) {
        const j = jobRow();
        await driver.queries.jobInsert(j);
        await driver.queries.attemptInsert(attemptRow(j.id, { number: 1, startedAt: at(i) }));
      }
      // Concurrent claimers, in rounds until nothing is left (a claimer finding its candidates' jobs locked takes fewer).
      const claims: Awaited<ReturnType<typeof driver.queries.attemptClaim>>[] = Array.from({ length: 8 }, () => []);
      for (let round = 0; round < 40 && claims.flat().length < 40; round++) {
        const got = await Promise.all(
          Array.from({ length: 8 }, (_, i) => driver.queries.attemptClaim({ leaseOwner: `exe_${i}`, leaseExpiresAt: at(60_000), limit: 5, now: at(60_000) })),
        );
        for (const [i, batch] of got.entries()) {
          const times = batch.map((a) => a.startedAt.getTime());
          expect(times).toEqual([...times].sort((x, y) => x - y));
          claims[i]!.push(...batch);
        }
      }
      const all = claims.flat();
      expect(all).toHaveLength(40);
      expect(new Set(all.map((a) => a.id)).size).toBe(40);
      expect(new Set(all.map((a) => a.leaseToken)).size).toBe(40);
      for (const [i, batch] of claims.entries()) {
        expect(batch.every((a) => a.leaseOwner === `exe_${i}` && a.leaseToken?.startsWith('lease_') && a.leaseExpiresAt?.getTime() === at(60_000).getTime())).toBe(true);
      }
      expect(await driver.queries.attemptClaim({ leaseOwner: 'exe_9', leaseExpiresAt: at(60_000), limit: 5, now: at(60_000) })).toEqual([]);
    });

    it('extends only valid leases of the asking executor, and lists expired leases of live attempts', async () => {
      const j = jobRow();
      await driver.queries.jobInsert(j);
      const mk = (n: number, owner: string, token: string, expires: number) =>
        attemptRow(j.id, { number: n, leaseOwner: owner, leaseToken: token, leaseExpiresAt: at(expires) });
      const tag = newId('lease');
      await driver.queries.attemptInsert(mk(1, 'exe_a', `${tag}_1`, 5_000));
      await driver.queries.attemptInsert(mk(2, 'exe_a', `${tag}_2`, 500));
      await driver.queries.attemptInsert(mk(3, 'exe_b', `${tag}_3`, 5_000));
      // A settled attempt whose lease expired is not the rescuer's business.
      await driver.queries.attemptInsert(mk(4, 'exe_a', `${tag}_4`, 500));
      await driver.queries.attemptUpdate({ ownerId: 'alice', id: (await driver.queries.attemptListByJob('alice', j.id))[3]!.id, fromStates: ['starting'], set: { state: 'unknown' } });
      const held = await driver.queries.attemptExtendLeases({ leaseOwner: 'exe_a', leaseTokens: [`${tag}_1`, `${tag}_2`, `${tag}_3`], leaseExpiresAt: at(9_000), now: at(1_000) });
      expect(held).toEqual([`${tag}_1`]);
      expect(await driver.queries.attemptExtendLeases({ leaseOwner: 'exe_a', leaseTokens: [], leaseExpiresAt: at(9_000), now: at(1_000) })).toEqual([]);
      const expired = (await driver.queries.attemptListLeaseExpired(at(6_000), 100)).filter((a) => a.jobId === j.id);
      expect(expired.map((a) => a.number)).toEqual([2, 3]);
    });
  });

  describe('events', () => {
    it('appends rows in order and lists them per job and globally', async () => {
      const j = jobRow();
      await driver.queries.jobInsert(j);
      const before = await driver.queries.eventListAll(0, 100_000);
      const lastId = before.at(-1)?.id ?? 0;
      await driver.queries.eventInsert([
        { ownerId: 'alice', jobId: j.id, attemptId: null, type: 'job.created', data: { route: 'summarize', n: 'a"b\\c,{}' }, at: at(1) },
        { ownerId: 'alice', jobId: j.id, attemptId: 'att_1', type: 'attempt.started', data: {}, at: at(2) },
        { ownerId: 'alice', jobId: j.id, attemptId: 'att_1', type: 'race.lost', data: { nested: [1, { x: null }] }, at: at(3) },
      ]);
      await driver.queries.eventInsert([]);
      const list = await driver.queries.eventList('alice', j.id);
      expect(list.map((e) => e.type)).toEqual(['job.created', 'attempt.started', 'race.lost']);
      expect(list[0]).toMatchObject({ ownerId: 'alice', jobId: j.id, attemptId: null, data: { route: 'summarize', n: 'a"b\\c,{}' }, at: at(1) });
      expect(list[2]?.data).toEqual({ nested: [1, { x: null }] });
      expect(typeof list[0]?.id).toBe('number');
      expect(await driver.queries.eventList('bob', j.id)).toEqual([]);
      const tail = await driver.queries.eventListAll(lastId, 2);
      expect(tail.map((e) => e.id)).toEqual(list.slice(0, 2).map((e) => e.id));
    });
  });

  describe('wake-ups', () => {
    it('delivers NOTIFY from another driver to every subscriber until it unsubscribes', async () => {
      const other = await createPostgresDriver({ connectionString: urlFor(dbName), max: 1 });
      try {
        let a = 0;
        let b = 0;
        const offA = await driver.onWork(() => a++);
        const offB = await driver.onWork(() => b++);
        const waitFor = async (cond: () => boolean) => {
          for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
          expect(cond()).toBe(true);
        };
        await other.notifyWork();
        await waitFor(() => a === 1 && b === 1);
        await offA();
        await other.notifyWork();
        await waitFor(() => b === 2);
        expect(a).toBe(1);
        await offB();
        await offB();
        const listeners = await admin((c) =>
          c.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [dbName]),
        );
        expect(listeners.rows[0].n).toBe(0);
      } finally {
        await other.close();
      }
    });

    it('reconnects the LISTEN connection after it is killed, and wakes subscribers on reconnect', async () => {
      let woke = 0;
      const off = await driver.onWork(() => woke++);
      try {
        await admin((c) =>
          c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [dbName]),
        );
        for (let i = 0; i < 300 && woke === 0; i++) await new Promise((r) => setTimeout(r, 10));
        expect(woke).toBe(1);
        await driver.notifyWork();
        for (let i = 0; i < 300 && woke === 1; i++) await new Promise((r) => setTimeout(r, 10));
        expect(woke).toBe(2);
      } finally {
        await off();
      }
    });
  });
});
