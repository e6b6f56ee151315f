/**
 * The store conformance suite: one set of tests every driver must pass
 * (River's `riverdrivertest`). It brings no test framework of its own: the
 * caller passes its `describe`/`it`/`expect` (vitest's, jest's, or anything
 * with the same shape), so product code never imports a test runner.
 *
 * @example
 * import { afterEach, beforeEach, describe, expect, it } from 'vitest';
 * runStoreConformance({
 *   name: 'sqlite',
 *   test: { describe, it, expect, beforeEach, afterEach },
 *   createStore: (clock) => createTestStore(sqlite, { clock, databaseClock: clock }),
 * });
 */
import { ManualClock } from '../../core/clock.ts';
import { isOnejobError, type ErrorCode } from '../../core/errors.ts';
import type { EligibilityCheck } from '../../core/job-rules.ts';
import type { Attempt } from '../../core/types.ts';
import { JobStore as JobStoreClass, type JobStore } from '../job-store.ts';
import type { Driver, DriverQueries } from '../driver.ts';
import type { InsightQueries } from '../insight-queries.ts';

/** The assertions the suite makes (a subset of vitest's and jest's `expect`). */
export interface ConformanceAssertion {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toHaveLength(length: number): void;
  toBeNull(): void;
  toBeLessThan(n: number): void;
  toMatch(pattern: RegExp): void;
  readonly not: { toBe(expected: unknown): void };
}

/** The test framework the suite registers its tests with. */
export interface ConformanceTestFramework {
  readonly describe: {
    (name: string, fn: () => void): void;
    /** A block whose tests are all reported skipped. */
    skip(name: string, fn: () => void): void;
  };
  readonly it: (name: string, fn: () => Promise<void>, timeoutMs?: number) => void;
  readonly expect: (actual: unknown) => ConformanceAssertion;
  readonly beforeEach: (fn: () => Promise<void>) => void;
  readonly afterEach: (fn: () => Promise<void>) => void;
}

/** What the suite needs from a driver under test. */
export interface StoreConformanceOptions {
  readonly name: string;
  /** `describe`, `it`, `expect`, `beforeEach`, `afterEach` of the caller's test runner. */
  readonly test: ConformanceTestFramework;
  /** Why the suite is skipped (names the capability or setting), or null. */
  readonly skip?: string | null;
  /**
   * A migrated store on a fresh database whose database clock is `clock`
   * (the suite moves time by hand); `openAnother` opens a second store, with
   * its own connections (pool, worker), on the same database.
   */
  readonly createStore: (clock: ManualClock) => Promise<{ store: JobStore; cleanup(): Promise<void>; openAnother?(): Promise<JobStore> }>;
  /** How many times the concurrency tests repeat; default 20. */
  readonly repetitions?: number;
}

const OWNER = 'alice';
const CHAIN = ['primary', 'fallback', 'third'];
const EXECUTOR = 'exe_test';
const LEASE_MS = 30_000;

/** Awaits `p` and returns the OnejobError code it rejected with (fails if it resolved or threw something else). */
async function codeOf(p: Promise<unknown>): Promise<ErrorCode> {
  try {
    await p;
  } catch (e) {
    if (isOnejobError(e)) return e.code;
    throw e;
  }
  throw new Error('expected an OnejobError, but the call succeeded');
}

/** Registers the conformance tests for one driver. */
export function runStoreConformance(o: StoreConformanceOptions): void {
  const reps = o.repetitions ?? 20;
  const { it, expect, beforeEach, afterEach } = o.test;
  const describe = o.test.describe;
  const block = o.skip ? describe.skip.bind(describe) : describe;
  block(`store conformance: ${o.name}${o.skip ? ` (skipped: ${o.skip})` : ''}`, () => {
    let store: JobStore;
    let clock: ManualClock;
    let cleanup: () => Promise<void>;
    let openAnother: (() => Promise<JobStore>) | undefined;

    beforeEach(async () => {
      clock = new ManualClock(new Date('2026-03-01T12:00:00.000Z'));
      ({ store, cleanup, openAnother } = await o.createStore(clock));
    });
    afterEach(async () => {
      await cleanup();
    });

    const create = (key: string, input: unknown = { text: 'hello' }, owner = OWNER) =>
      store.createJob({ ownerId: owner, idempotencyKey: key, route: 'summarize', input, providers: CHAIN });

    /** Creates a job and runs its first attempt to `running` the way an executor does. */
    async function runningJob(key: string): Promise<{ jobId: string; attempt: Attempt }> {
      const { job } = await create(key);
      const [claimed] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 });
      expect(claimed?.job.id).toBe(job.id);
      const a = claimed!.attempt;
      expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: a.leaseToken!, timeoutMs: 1000 })).toBe(true);
      return { jobId: job.id, attempt: (await store.getAttempt(OWNER, a.id))! };
    }

    const fenceOf = (a: Attempt) => ({ leaseOwner: a.leaseOwner!, leaseToken: a.leaseToken! });

    describe('creation and idempotency keys', () => {
      it('creates a queued job, and a replay returns the same job', async () => {
        const first = await create('k1');
        expect(first.created).toBe(true);
        expect(first.job).toMatchObject({ state: 'queued', version: 0, completedBy: null, result: null, providers: CHAIN, attempts: [] });
        const again = await create('k1');
        expect(again.created).toBe(false);
        expect(again.job.id).toBe(first.job.id);
      });

      it('treats key order and whitespace as the same body', async () => {
        const a = await create('k-order', { a: 1, b: { c: 2, d: [1, 2] } });
        const b = await create('k-order', JSON.parse('{ "b": {"d":[1,2],  "c":2}, "a": 1 }'));
        expect(b.created).toBe(false);
        expect(b.job.id).toBe(a.job.id);
      });

      it('refuses the same key with another input, and leaves the job untouched', async () => {
        const a = await create('k2', { text: 'one' });
        const err = await create('k2', { text: 'two' }).catch((e: unknown) => e);
        expect(isOnejobError(err, 'idempotency_key_reused')).toBe(true);
        expect((err as { details: Record<string, unknown> }).details.job_id).toBe(a.job.id);
        const stored = await store.getJob(OWNER, a.job.id);
        expect(stored?.input).toEqual({ text: 'one' });
        expect(stored?.updatedAt).toEqual(a.job.updatedAt);
      });

      it('accepts any JSON as input, null and scalars included, and replays them', async () => {
        for (const [i, input] of [null, 0, '', false, [], {}].entries()) {
          const a = await create(`any-${i}`, input);
          expect(a.job.input).toEqual(input);
          expect((await store.getJob(OWNER, a.job.id))?.input).toEqual(input);
          const b = await create(`any-${i}`, input);
          expect(b).toMatchObject({ created: false, job: { id: a.job.id } });
        }
      });

      it('scopes keys to the owner: two owners, one key, two jobs', async () => {
        const a = await create('shared', { x: 1 }, 'alice');
        const b = await create('shared', { x: 1 }, 'bob');
        expect(b.created).toBe(true);
        expect(b.job.id).not.toBe(a.job.id);
        expect(await store.getJob('bob', a.job.id)).toBeNull();
        expect(await store.getJob('alice', b.job.id)).toBeNull();
      });

      it(`100 concurrent creates with one key make one row and one id (${reps} repetitions)`, async () => {
        for (let r = 0; r < reps; r++) {
          const results = await Promise.all(Array.from({ length: 100 }, () => create(`storm-${r}`)));
          expect(new Set(results.map((x) => x.job.id)).size).toBe(1);
          expect(results.filter((x) => x.created)).toHaveLength(1);
        }
        const page = await store.listJobs({ ownerId: OWNER, limit: 200 });
        expect(page.jobs).toHaveLength(reps);
      });

      it(`duplicate creates from two stores with their own connections race the UNIQUE constraint itself (${reps} repetitions)`, async () => {
        if (!openAnother) throw new Error('createStore must offer openAnother(): a second store on the same database');
        const other = await openAnother();
        try {
          const createOn = (s: JobStore, key: string) => s.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'summarize', input: { text: 'hello' }, providers: CHAIN });
          for (let r = 0; r < reps; r++) {
            // Each store merges its own duplicates in memory; only the database can decide between the two.
            const results = await Promise.all(Array.from({ length: 40 }, (_, i) => createOn(i % 2 === 0 ? store : other, `two-pools-${r}`)));
            expect(new Set(results.map((x) => x.job.id)).size).toBe(1);
            expect(results.filter((x) => x.created)).toHaveLength(1);
          }
          const page = await other.listJobs({ ownerId: OWNER, limit: 200 });
          expect(page.jobs).toHaveLength(reps);
        } finally {
          await other.close();
        }
      });

      it('concurrent creates with one key and two payloads: one job; the other payload only ever conflicts', async () => {
        for (let r = 0; r < Math.max(3, reps / 4); r++) {
          const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => create(`mixed-${r}`, { v: i % 2 })));
          const ok = results.filter((x): x is PromiseFulfilledResult<Awaited<ReturnType<typeof create>>> => x.status === 'fulfilled');
          const bad = results.filter((x): x is PromiseRejectedResult => x.status === 'rejected');
          expect(new Set(ok.map((x) => x.value.job.id)).size).toBe(1);
          const winner = ok[0]!.value.job.input as { v: number };
          expect(ok).toHaveLength(20);
          expect(ok.every((x) => (x.value.job.input as { v: number }).v === winner.v)).toBe(true);
          expect(bad.every((x) => isOnejobError(x.reason, 'idempotency_key_reused'))).toBe(true);
        }
      });
    });

    describe('callers without a key: keyless creation by fingerprint (CONTRACT §12)', () => {
      const WINDOW_MS = 60_000;
      const keyless = (input: unknown = { text: 'hello' }, owner = OWNER, on: JobStore = store) =>
        on.createJob({ ownerId: owner, keyless: { windowMs: WINDOW_MS }, route: 'summarize', input, providers: CHAIN });

      it('joins the undecided job of the same body; another body, owner or a keyed create is another job', async () => {
        const a = await keyless();
        expect(a.created).toBe(true);
        expect(a.job.idempotencyKey).toMatch(/^keyless:[0-9a-f]{16}:/);
        const b = await keyless(JSON.parse('{ "text" : "hello" }'));
        expect(b).toMatchObject({ created: false, job: { id: a.job.id, idempotencyKey: a.job.idempotencyKey } });
        expect((await keyless({ text: 'other' })).created).toBe(true);
        expect((await keyless({ text: 'hello' }, 'bob')).created).toBe(true);
        // A keyed create of the same body is its own intent: the fingerprint stands only for a missing key.
        const keyed = await create('keyed-same-body', { text: 'hello' });
        expect(keyed.created).toBe(true);
        expect(keyed.job.id).not.toBe(a.job.id);
        // The key a keyless job got is a key like any other: sending it is a keyed replay.
        expect(await store.createJob({ ownerId: OWNER, idempotencyKey: a.job.idempotencyKey, route: 'summarize', input: { text: 'hello' }, providers: CHAIN }))
          .toMatchObject({ created: false, job: { id: a.job.id } });
      });

      it('replays a finished job for windowMs after it finished (database clock), then starts a new job with a new key', async () => {
        const a = await keyless();
        clock.advance(5_000);
        await store.cancelJob(OWNER, a.job.id);
        clock.advance(WINDOW_MS - 1);
        const replay = await keyless();
        expect(replay).toMatchObject({ created: false, job: { id: a.job.id, state: 'cancelled' } });
        clock.advance(2);
        const fresh = await keyless();
        expect(fresh.created).toBe(true);
        expect(fresh.job.id).not.toBe(a.job.id);
        expect(fresh.job.idempotencyKey).not.toBe(a.job.idempotencyKey);
        // While the new one is undecided it is the one joined, not the old one.
        expect((await keyless()).job.id).toBe(fresh.job.id);
      });

      it('the database allows one undecided job per (owner, fingerprint): an insert beside one writes nothing', async () => {
        const a = await keyless();
        const q = store.driver.queries;
        const row = {
          id: 'job_conformance_twin', ownerId: OWNER, idempotencyKey: 'keyless:twin', fingerprint: a.job.fingerprint, route: 'summarize',
          input: { text: 'hello' }, metadata: null, providers: CHAIN, createdAt: clock.now(), keylessFingerprint: a.job.fingerprint,
        };
        expect(await q.jobInsertKeyless(row)).toBeNull();
        await store.cancelJob(OWNER, a.job.id);
        expect((await q.jobInsertKeyless(row))?.id).toBe('job_conformance_twin');
      });

      it(`concurrent keyless creates of one body from two stores make one job (${reps} repetitions)`, async () => {
        if (!openAnother) throw new Error('createStore must offer openAnother(): a second store on the same database');
        const other = await openAnother();
        try {
          for (let r = 0; r < reps; r++) {
            const results = await Promise.all(Array.from({ length: 40 }, (_, i) => keyless({ storm: r }, OWNER, i % 2 === 0 ? store : other)));
            expect(new Set(results.map((x) => x.job.id)).size).toBe(1);
            expect(results.filter((x) => x.created)).toHaveLength(1);
            expect(new Set(results.map((x) => x.job.idempotencyKey)).size).toBe(1);
          }
          const page = await other.listJobs({ ownerId: OWNER, limit: 200 });
          expect(page.jobs).toHaveLength(reps);
        } finally {
          await other.close();
        }
      });
    });

    describe('starting attempts (invariant 3)', () => {
      it('the executor starts the first attempt on the primary, leased at birth', async () => {
        const { job } = await create('first');
        const claimed = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 10 });
        expect(claimed).toHaveLength(1);
        expect(claimed[0]!.attempt).toMatchObject({ jobId: job.id, number: 1, provider: 'primary', kind: 'first', state: 'starting', leaseOwner: EXECUTOR, baseVersion: 0 });
        expect((await store.getJob(OWNER, job.id))?.state).toBe('running');
        expect(await store.claimWork({ leaseOwner: 'exe_other', leaseMs: LEASE_MS, limit: 10 })).toHaveLength(0);
      });

      it('refuses a new attempt while one is starting, then while one is running without a hedge', async () => {
        const { job } = await create('guard');
        const manual = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null });
        expect(manual).toMatchObject({ number: 1, provider: 'primary', state: 'starting', leaseOwner: null });
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null }))).toBe('attempt_in_doubt');
        const [claimed] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 });
        expect(claimed!.attempt.id).toBe(manual.id);
        await store.markRunning({ ownerId: OWNER, attemptId: manual.id, leaseOwner: EXECUTOR, leaseToken: claimed!.attempt.leaseToken!, timeoutMs: 1000 });
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null }))).toBe('attempt_in_flight');
      });

      it('allows a hedge only after hedgeAfterMs of silence', async () => {
        const { jobId } = await runningJob('hedge');
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 500 }))).toBe('attempt_in_flight');
        clock.advance(500);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 500, lease: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
        expect(hedge).toMatchObject({ number: 2, provider: 'fallback', kind: 'hedge', state: 'starting', leaseOwner: EXECUTOR });
      });

      it('a timeout makes the attempt unknown, never failed, and blocks the job', async () => {
        const { jobId, attempt } = await runningJob('timeout');
        expect(await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt), reason: { code: 'deadline_exceeded', message: 'no answer in 1000 ms' } })).toBe(true);
        const job = await store.getJob(OWNER, jobId);
        expect(job?.state).toBe('unknown');
        expect(job?.attempts[0]?.state).toBe('unknown');
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId, kind: 'manual', hedgeAfterMs: 0 }))).toBe('attempt_in_doubt');
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 0 }))).toBe('attempt_in_doubt');
      });

      it(`concurrent starts while an attempt is unknown are all refused (${reps} repetitions)`, async () => {
        for (let r = 0; r < reps; r++) {
          const { jobId, attempt } = await runningJob(`doubt-${r}`);
          await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt), reason: { code: 'deadline_exceeded', message: 't' } });
          const codes = await Promise.all(Array.from({ length: 8 }, () => codeOf(store.startAttempt({ ownerId: OWNER, jobId, kind: 'manual', hedgeAfterMs: 0 }))));
          expect(codes.every((c) => c === 'attempt_in_doubt')).toBe(true);
          expect((await store.getJob(OWNER, jobId))?.attempts).toHaveLength(1);
        }
      });

      it(`concurrent manual starts on a queued job: exactly one starts (${reps} repetitions)`, async () => {
        for (let r = 0; r < reps; r++) {
          const { job } = await create(`race-start-${r}`);
          const results = await Promise.allSettled(Array.from({ length: 10 }, () => store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null })));
          expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(1);
          for (const x of results) if (x.status === 'rejected') expect(isOnejobError(x.reason, 'attempt_in_doubt')).toBe(true);
          expect((await store.getJob(OWNER, job.id))?.attempts).toHaveLength(1);
        }
      });

      it('refuses a provider the gate does not certify, and records skips on failover', async () => {
        const { job } = await create('gate');
        const gate: EligibilityCheck = (p) => (p === 'fallback' ? 'not_certified' : null);
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', provider: 'fallback', hedgeAfterMs: null, eligible: gate }))).toBe('provider_not_certified');
        const [claimed] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 });
        const a = claimed!.attempt;
        const settled = await store.settleAttempt({ ownerId: OWNER, attemptId: a.id, fence: fenceOf(a), outcome: { state: 'failed', error: { code: 'http_503', message: 'overloaded' } }, eligible: gate });
        expect(settled.failover).toMatchObject({ provider: 'third', kind: 'failover', number: 2 });
        expect(settled.job.skipped).toEqual([{ provider: 'fallback', reason: 'not_certified' }]);
      });
    });

    describe('completion (invariant 2)', () => {
      async function primaryAndHedge(key: string) {
        const { jobId, attempt: primary } = await runningJob(key);
        clock.advance(100);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 100, lease: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
        await store.markRunning({ ownerId: OWNER, attemptId: hedge.id, ...fenceOf(hedge), timeoutMs: 1000 });
        return { jobId, primary, hedge };
      }

      it('the first to finish wins even when it started second; the primary is superseded and the race logged', async () => {
        const { jobId, primary, hedge } = await primaryAndHedge('reverse');
        const h = await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: { from: 'hedge' } } });
        expect(h.won).toBe(true);
        const p = await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'succeeded', result: { from: 'primary' } } });
        expect(p.won).toBe(false);
        expect(p.attempt.state).toBe('superseded');
        const job = await store.getJob(OWNER, jobId);
        expect(job).toMatchObject({ state: 'succeeded', completedBy: hedge.id, result: { from: 'hedge' }, version: 1 });
        const races = (await store.listEvents(OWNER, jobId)).filter((e) => e.type === 'race.lost');
        expect(races).toHaveLength(1);
        expect(races[0]!.data).toMatchObject({ loser: primary.id, winner: hedge.id });
      });

      it(`concurrent stream claims (CONTRACT §7): exactly one attempt owns the stream; the other can never win and ends superseded (${reps} repetitions)`, async () => {
        const other = openAnother ? await openAnother() : store;
        try {
          for (let r = 0; r < reps; r++) {
            const { jobId, primary, hedge } = await primaryAndHedge(`stream-claim-${r}`);
            const claim = (s: JobStore, a: Attempt) => s.claimStream({ ownerId: OWNER, jobId, attemptId: a.id, ...fenceOf(a) });
            const [p, h] = await Promise.all([claim(store, primary), claim(other, hedge)]);
            expect([p, h].filter(Boolean)).toHaveLength(1);
            const [owner, loser] = p ? [primary, hedge] : [hedge, primary];
            expect(await claim(store, owner)).toBe(true); // idempotent for its owner
            expect(await claim(store, loser)).toBe(false);
            // The loser's completion fails the compare-and-swap even though the job is undecided.
            const lost = await store.settleAttempt({ ownerId: OWNER, attemptId: loser.id, fence: fenceOf(loser), outcome: { state: 'succeeded', result: 'loser' } });
            expect(lost.won).toBe(false);
            expect(lost.attempt.state).toBe('superseded');
            const won = await store.settleAttempt({ ownerId: OWNER, attemptId: owner.id, fence: fenceOf(owner), outcome: { state: 'succeeded', result: 'owner' } });
            expect(won.won).toBe(true);
            expect(await store.getJob(OWNER, jobId)).toMatchObject({ state: 'succeeded', completedBy: owner.id, result: 'owner' });
            expect(await claim(store, owner)).toBe(false); // a decided job has no stream to claim
          }
        } finally {
          if (other !== store) await other.close();
        }
      });

      it('a stream loser may end superseded while the job is undecided; after the owner fails, the failover claims the stream', async () => {
        const { jobId, primary, hedge } = await primaryAndHedge('stream-failover');
        expect(await store.claimStream({ ownerId: OWNER, jobId, attemptId: primary.id, ...fenceOf(primary) })).toBe(true);
        const stopped = await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'superseded' } });
        expect(stopped.attempt.state).toBe('superseded');
        const failed = await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'failed', error: { code: 'provider_stream_error', message: 'x' } } });
        expect(failed.job.state).not.toBe('succeeded');
        const [next] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 }).then((c) => (c.length > 0 ? c.map((x) => x.attempt) : failed.failover ? [failed.failover] : []));
        expect(next === undefined).toBe(false);
        expect(await store.claimStream({ ownerId: OWNER, jobId, attemptId: next!.id, ...fenceOf(next!) })).toBe(true);
      });

      it('a primary that started before its hedge and answers first wins (starting the hedge did not move the version)', async () => {
        const { jobId, primary, hedge } = await primaryAndHedge('inorder');
        expect(hedge.baseVersion).toBe(primary.baseVersion);
        const p = await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'succeeded', result: 'P' } });
        expect(p.won).toBe(true);
        const h = await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: 'H' } });
        expect(h.attempt.state).toBe('superseded');
        expect((await store.getJob(OWNER, jobId))?.result).toBe('P');
      });

      it(`concurrent completions: exactly one winner, and the result is the winner's output (${reps} repetitions)`, async () => {
        for (let r = 0; r < reps; r++) {
          const { jobId, primary, hedge } = await primaryAndHedge(`cas-${r}`);
          const [a, b] = await Promise.all([
            store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'succeeded', result: { by: primary.id } } }),
            store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: { by: hedge.id } } }),
          ]);
          expect([a.won, b.won].filter(Boolean)).toHaveLength(1);
          const job = await store.getJob(OWNER, jobId);
          const winner = a.won ? primary.id : hedge.id;
          expect(job).toMatchObject({ completedBy: winner, result: { by: winner }, version: 1 });
          expect(job!.attempts.map((x) => x.state).sort()).toEqual(['succeeded', 'superseded']);
        }
      });

      it('stores a resolved result exactly as given', async () => {
        const { job } = await create('exact');
        const a = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null });
        const result = { z: 1, a: [1, 'two', null, { y: false }], m: 'ünïcødé', n: 1.5e-7 };
        await store.settleAttempt({ ownerId: OWNER, attemptId: a.id, outcome: { state: 'succeeded', result } });
        const stored = await store.getJob(OWNER, job.id);
        expect(JSON.stringify(stored?.result)).toBe(JSON.stringify(result));
      });

      it('a completion after the job was cancelled is superseded and changes nothing', async () => {
        const { jobId, attempt } = await runningJob('cancelled');
        const cancelled = await store.cancelJob(OWNER, jobId);
        expect(cancelled.state).toBe('cancelled');
        expect(await codeOf(store.cancelJob(OWNER, jobId))).toBe('job_finished');
        const late = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, fence: fenceOf(attempt), outcome: { state: 'succeeded', result: 'late' } });
        expect(late.won).toBe(false);
        expect(late.attempt.state).toBe('superseded');
        expect(await store.getJob(OWNER, jobId)).toMatchObject({ state: 'cancelled', result: null, completedBy: null, version: 1 });
      });

      it('a completion from a superseded or cancelled attempt is refused and changes nothing', async () => {
        const { jobId, primary, hedge } = await primaryAndHedge('finished');
        await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: 1 } });
        await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'succeeded', result: 2 } });
        const before = await store.getJob(OWNER, jobId);
        expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, outcome: { state: 'succeeded', result: 3 } }))).toBe('attempt_finished');
        expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, outcome: { state: 'cancelled' } }))).toBe('attempt_finished');
        expect(await store.getJob(OWNER, jobId)).toEqual(before);

        const { job } = await create('cancel-then-complete');
        const m = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null });
        await store.settleAttempt({ ownerId: OWNER, attemptId: m.id, outcome: { state: 'cancelled' } });
        expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: m.id, outcome: { state: 'succeeded', result: 'x' } }))).toBe('attempt_finished');
      });
    });

    describe('failover and doubt', () => {
      it('resolving an unknown attempt as failed moves the job to the next provider', async () => {
        const { attempt } = await runningJob('resolve-failed');
        await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt), reason: { code: 'deadline_exceeded', message: 't' } });
        const r = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, outcome: { state: 'failed', error: { code: 'resolved', message: 'provider says it never ran' } } });
        expect(r.attempt.state).toBe('failed');
        expect(r.failover).toMatchObject({ number: 2, provider: 'fallback', kind: 'failover', state: 'starting', leaseOwner: null });
        expect(r.job.state).toBe('running');
        const types = (await store.listEvents(OWNER, r.job.id)).map((e) => e.type);
        expect(types.indexOf('attempt.failed')).toBeLessThan(types.lastIndexOf('attempt.started'));
      });

      it('a late answer for an unknown attempt can still win', async () => {
        const { jobId, attempt } = await runningJob('late-win');
        await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt), reason: { code: 'deadline_exceeded', message: 't' } });
        const r = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, fence: fenceOf(attempt), outcome: { state: 'succeeded', result: 'late but first' } });
        expect(r.won).toBe(true);
        expect(await store.getJob(OWNER, jobId)).toMatchObject({ state: 'succeeded', result: 'late but first' });
      });

      it('fails the job when every provider failed definitely', async () => {
        const { job } = await create('exhaust');
        for (let i = 0; i < CHAIN.length; i++) {
          const [c] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1 });
          expect(c?.attempt.provider).toBe(CHAIN[i]);
          await store.settleAttempt({ ownerId: OWNER, attemptId: c!.attempt.id, fence: fenceOf(c!.attempt), outcome: { state: 'failed', error: { code: 'http_503', message: `${CHAIN[i]} overloaded` } } });
        }
        const done = await store.getJob(OWNER, job.id);
        expect(done).toMatchObject({ state: 'failed', version: 1, completedBy: null });
        expect(done?.error?.code).toBe('providers_exhausted');
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'manual', hedgeAfterMs: null }))).toBe('job_finished');
      });

      it('a failure retried where it happened: the next attempt is on the same provider, blocks others, and is claimed only once due', async () => {
        const { jobId, attempt } = await runningJob('retry-due');
        const retry = { provider: attempt.provider, retryAfterMs: 2_000, policy: { attempts: 2, maxWaitMs: 5_000 } };
        const r = await store.settleAttempt({
          ownerId: OWNER, attemptId: attempt.id, fence: fenceOf(attempt), retry,
          outcome: { state: 'failed', error: { code: 'provider_rate_limited', message: '429', details: { retry_after_ms: 2_000 } } },
        });
        expect(r.attempt.state).toBe('failed');
        expect(r.failover).toMatchObject({ number: 2, provider: attempt.provider, kind: 'failover', state: 'starting', leaseOwner: null });
        expect(r.failover!.startedAt.getTime()).toBe(clock.now().getTime() + 2_000);
        expect(r.job.state).toBe('running');
        // Invariant 3: while it waits (starting), no other attempt may start.
        expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId, kind: 'manual', provider: 'fallback', hedgeAfterMs: null }))).toBe('attempt_in_doubt');
        clock.advance(1_999);
        expect(await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 10 })).toHaveLength(0);
        expect(await store.rescueExpiredLeases()).toBe(0);
        clock.advance(1);
        const claimed = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 10 });
        expect(claimed.map((c) => c.attempt.id)).toEqual([r.failover!.id]);
        // Its policy used up (two attempts on the provider), the next definite failure fails over.
        const again = await store.settleAttempt({
          ownerId: OWNER, attemptId: claimed[0]!.attempt.id, fence: fenceOf(claimed[0]!.attempt), retry,
          outcome: { state: 'failed', error: { code: 'provider_rate_limited', message: '429' } },
        });
        expect(again.failover).toMatchObject({ number: 3, provider: 'fallback' });
        expect(again.failover!.startedAt.getTime()).toBe(clock.now().getTime());
      });
    });

    describe('leases and fencing (crash mid-attempt)', () => {
      it('an expired lease fences the executor out; the rescuer makes the attempt unknown, never failed', async () => {
        const { job } = await create('crash');
        const [c] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: 1000, limit: 1 });
        const a = c!.attempt;
        clock.advance(1001);
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), timeoutMs: 1000 })).toBe(false);
        expect(await store.extendLeases({ leaseOwner: EXECUTOR, leaseTokens: [a.leaseToken!], leaseMs: 1000 })).toEqual([]);
        expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: a.id, fence: { leaseOwner: 'exe_other', leaseToken: a.leaseToken! }, outcome: { state: 'succeeded', result: 'zombie' } }))).toBe('lease_lost');
        expect(await store.rescueExpiredLeases()).toBe(1);
        const after = await store.getJob(OWNER, job.id);
        expect(after).toMatchObject({ state: 'unknown', result: null });
        expect(after?.attempts[0]).toMatchObject({ state: 'unknown', leaseOwner: null });
        expect(after?.attempts[0]?.error?.code).toBe('lease_expired');
        expect(await store.claimWork({ leaseOwner: 'exe_2', leaseMs: 1000, limit: 5 })).toHaveLength(0);
        expect(await store.rescueExpiredLeases()).toBe(0);
      });

      it('a running attempt keeps its lease: releasing it is refused, and the schema refuses running without an owner', async () => {
        const { attempt } = await runningJob('no-orphan');
        expect(await store.releaseLease({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt) })).toBe(false);
        expect((await store.getAttempt(OWNER, attempt.id))).toMatchObject({ state: 'running', leaseOwner: EXECUTOR });
        // Below the store's guards: the database itself refuses the state.
        const raw = await store.driver.queries
          .attemptUpdate({ ownerId: OWNER, id: attempt.id, fromStates: ['running'], set: { releaseLease: true } })
          .then(() => null, (e: unknown) => e);
        expect(String((raw as Error | null)?.message ?? 'applied')).toMatch(/attempts_running_has_lease/);
        expect((await store.getAttempt(OWNER, attempt.id))?.leaseOwner).toBe(EXECUTOR);
        // Once unknown, the lease may go: nothing is running.
        await store.markUnknown({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt), reason: { code: 'deadline_exceeded', message: 't' } });
        expect(await store.releaseLease({ ownerId: OWNER, attemptId: attempt.id, ...fenceOf(attempt) })).toBe(true);
        expect((await store.getAttempt(OWNER, attempt.id))).toMatchObject({ state: 'unknown', leaseOwner: null });
      });

      it('an expired lease under a decided job is superseded by the rescuer, not left unknown', async () => {
        const { jobId, attempt: primary } = await runningJob('rescue-loser');
        clock.advance(100);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 100, lease: { leaseOwner: 'exe_other', leaseMs: LEASE_MS } });
        await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: 'H' } });
        expect((await store.getAttempt(OWNER, primary.id))?.state).toBe('running');
        clock.advance(LEASE_MS + 1);
        expect(await store.rescueExpiredLeases()).toBe(1);
        const job = await store.getJob(OWNER, jobId);
        expect(job).toMatchObject({ state: 'succeeded', completedBy: hedge.id, result: 'H' });
        expect(job!.attempts.map((a) => [a.state, a.error?.code ?? null, a.leaseOwner])).toEqual([['superseded', 'superseded', null], ['succeeded', null, null]]);
      });

      it('a loser stopped by its executor is recorded superseded, only once the job is decided', async () => {
        const { jobId, attempt: primary } = await runningJob('stopped-loser');
        expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'superseded' } }))).toBe('illegal_transition');
        clock.advance(100);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 100, lease: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
        await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: 'H' } });
        const r = await store.settleAttempt({ ownerId: OWNER, attemptId: primary.id, fence: fenceOf(primary), outcome: { state: 'superseded', error: { code: 'superseded', message: 'stopped' } } });
        expect(r.attempt).toMatchObject({ state: 'superseded', leaseOwner: null });
        expect(r.job).toMatchObject({ state: 'succeeded', completedBy: hedge.id, result: 'H', version: 1 });
      });

      it('a win supersedes the attempts in doubt that nobody listens to any more', async () => {
        const { jobId, attempt: primary } = await runningJob('doubt-then-win');
        clock.advance(100);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId, kind: 'hedge', hedgeAfterMs: 100, lease: { leaseOwner: EXECUTOR, leaseMs: LEASE_MS } });
        await store.markRunning({ ownerId: OWNER, attemptId: hedge.id, ...fenceOf(hedge), timeoutMs: 1000 });
        await store.markUnknown({ ownerId: OWNER, attemptId: primary.id, ...fenceOf(primary), reason: { code: 'deadline_exceeded', message: 't' } });
        await store.releaseLease({ ownerId: OWNER, attemptId: primary.id, ...fenceOf(primary) });
        const r = await store.settleAttempt({ ownerId: OWNER, attemptId: hedge.id, fence: fenceOf(hedge), outcome: { state: 'succeeded', result: 'H' } });
        expect(r.won).toBe(true);
        expect(r.job.attempts.map((a) => a.state)).toEqual(['superseded', 'succeeded']);
      });

      it('a renewed lease stays valid', async () => {
        const { attempt } = await runningJob('renew');
        clock.advance(LEASE_MS - 1);
        expect(await store.extendLeases({ leaseOwner: EXECUTOR, leaseTokens: [attempt.leaseToken!], leaseMs: LEASE_MS })).toEqual([attempt.leaseToken]);
        clock.advance(LEASE_MS - 1);
        expect(await store.rescueExpiredLeases()).toBe(0);
        const r = await store.settleAttempt({ ownerId: OWNER, attemptId: attempt.id, fence: fenceOf(attempt), outcome: { state: 'succeeded', result: 1 } });
        expect(r.won).toBe(true);
      });

      it('a claim committing while a cancel holds the job never leaves an attempt cancelled and leased (the job row is locked first, the claim included)', async () => {
        const { jobId, attempt: first } = await runningJob('claim-vs-cancel');
        // A definite failure: the failover attempt is `starting` and unclaimed.
        const failed = await store.settleAttempt({ ownerId: OWNER, attemptId: first.id, fence: fenceOf(first), outcome: { state: 'failed', error: { code: 'provider_error', message: 'x' } } });
        expect(failed.failover).toMatchObject({ state: 'starting', leaseOwner: null });
        // The cancel pauses after reading the attempts (the job locked): an executor claims meanwhile.
        let claim: Promise<unknown> | null = null;
        const between = async (): Promise<void> => {
          if (claim) return;
          claim = store.claimWork({ leaseOwner: 'exe_racer', leaseMs: LEASE_MS, limit: 5 });
          await Promise.race([claim, new Promise((r) => setTimeout(r, 300))]);
        };
        const canceller = new JobStoreClass(pausingInTransactions(store.driver, 'attemptListByJob', between), { clock, databaseClock: clock });
        await canceller.cancelJob(OWNER, jobId);
        const claimed = (await (claim as unknown as Promise<Awaited<ReturnType<JobStore['claimWork']>>>)) ?? [];
        expect(claimed.map((c) => c.attempt.id)).toEqual([]);
        const job = await store.getJob(OWNER, jobId);
        expect(job?.state).toBe('cancelled');
        expect(job!.attempts.map((a) => [a.state, a.leaseOwner])).toEqual([['failed', null], ['cancelled', null]]);
      });

      it(`concurrent executors never claim the same attempt (${reps} repetitions)`, async () => {
        for (let r = 0; r < reps; r++) {
          await Promise.all(Array.from({ length: 10 }, (_, i) => create(`claim-${r}-${i}`)));
          const claims = await Promise.all(Array.from({ length: 4 }, (_, i) => store.claimWork({ leaseOwner: `exe_${i}`, leaseMs: LEASE_MS, limit: 5 })));
          const ids = claims.flat().map((c) => c.attempt.id);
          expect(new Set(ids).size).toBe(ids.length);
          const jobs = claims.flat().map((c) => c.job.id);
          expect(new Set(jobs).size).toBe(jobs.length);
        }
      });
    });

    describe('the fast path: the first attempt written with the job, a winning settle in one statement', () => {
      const lease = { leaseOwner: EXECUTOR, leaseMs: LEASE_MS };
      const createLeased = (key: string, input: unknown = { text: 'hello' }, s: JobStore = store, eligible?: EligibilityCheck) =>
        s.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'summarize', input, providers: CHAIN, firstAttempt: { ...lease, eligible } });
      const win = (a: Attempt, result: unknown, s: JobStore = store) =>
        s.settleAttempt({ ownerId: OWNER, attemptId: a.id, jobId: a.jobId, fence: fenceOf(a), outcome: { state: 'succeeded', result, usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: 12 } });

      it('creates the job running with its first attempt leased to the caller, in one go; a replay claims nothing', async () => {
        const first = await createLeased('fast-1');
        expect(first.created).toBe(true);
        const claimed = first.claimed!;
        expect(claimed.job.id).toBe(first.job.id);
        expect(first.job).toMatchObject({ state: 'running', version: 0, completedBy: null });
        expect(claimed.attempt).toMatchObject({ number: 1, kind: 'first', provider: 'primary', state: 'starting', baseVersion: 0, leaseOwner: EXECUTOR });
        expect(claimed.attempt.leaseExpiresAt?.getTime()).toBe(clock.now().getTime() + LEASE_MS);
        expect(await store.getJob(OWNER, first.job.id)).toMatchObject({ state: 'running', attempts: [{ id: claimed.attempt.id, leaseToken: claimed.attempt.leaseToken }] });
        expect((await store.listEvents(OWNER, first.job.id)).map((e) => e.type)).toEqual(['attempt.started']);
        // Nothing is left for another executor to claim.
        expect(await store.claimWork({ leaseOwner: 'exe_other', leaseMs: LEASE_MS, limit: 5 })).toHaveLength(0);
        const again = await createLeased('fast-1');
        expect(again.created).toBe(false);
        expect(again.claimed).toBe(undefined);
        expect(again.job.attempts.map((a) => a.id)).toEqual([claimed.attempt.id]);
        expect(await codeOf(createLeased('fast-1', { text: 'other' }))).toBe('idempotency_key_reused');
      });

      it(`concurrent leased creates with one key, from two stores: one job, one attempt, one claim (${reps} repetitions)`, async () => {
        const other = openAnother ? await openAnother() : store;
        try {
          for (let r = 0; r < reps; r++) {
            const results = await Promise.all(Array.from({ length: 8 }, (_, i) => createLeased(`fast-race-${r}`, { text: 'hello' }, i % 2 === 0 ? store : other)));
            expect(new Set(results.map((x) => x.job.id)).size).toBe(1);
            expect(results.filter((x) => x.created)).toHaveLength(1);
            expect(results.filter((x) => x.claimed !== undefined)).toHaveLength(1);
            expect((await store.getJob(OWNER, results[0]!.job.id))?.attempts).toHaveLength(1);
          }
        } finally {
          if (other !== store) await other.close();
        }
      });

      it('50 concurrent leased creates with distinct keys, mixed with plain ones: each leased job has its own attempt, each plain one none', async () => {
        const results = await Promise.all(Array.from({ length: 50 }, (_, i) =>
          i % 5 === 0 ? create(`fast-mixed-${i}`) : createLeased(`fast-mixed-${i}`)));
        for (const [i, r] of results.entries()) {
          expect(r.created).toBe(true);
          const stored = (await store.getJob(OWNER, r.job.id))!;
          if (i % 5 === 0) {
            expect(r.claimed).toBe(undefined);
            expect(stored).toMatchObject({ state: 'queued', attempts: [] });
          } else {
            expect(r.claimed?.job.id).toBe(r.job.id);
            expect(stored.state).toBe('running');
            expect(stored.attempts.map((a) => [a.id, a.leaseToken, a.jobId])).toEqual([[r.claimed!.attempt.id, r.claimed!.attempt.leaseToken, r.job.id]]);
            expect((await store.listEvents(OWNER, r.job.id)).map((e) => [e.type, e.attemptId])).toEqual([['attempt.started', r.claimed!.attempt.id]]);
          }
        }
      });

      it('an uneligible first provider is not leased at birth: the job is queued and the claim records the skip', async () => {
        const noPrimary: EligibilityCheck = (provider) => (provider === 'primary' ? 'not_certified' : null);
        const created = await createLeased('fast-skip', { text: 'hello' }, store, noPrimary);
        expect(created.claimed).toBe(undefined);
        expect(created.job).toMatchObject({ state: 'queued', attempts: [] });
        const [c] = await store.claimWork({ leaseOwner: EXECUTOR, leaseMs: LEASE_MS, limit: 1, eligible: () => noPrimary });
        expect(c?.attempt.provider).toBe('fallback');
        expect((await store.getJob(OWNER, created.job.id))?.skipped.map((x) => x.provider)).toEqual(['primary']);
      });

      it('the only attempt wins in one statement: job, attempt, usage and events as the general settle writes them', async () => {
        const { claimed, job } = await createLeased('fast-win');
        const a = claimed!.attempt;
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), timeoutMs: 1000 })).toBe(true);
        clock.advance(5);
        const r = await win(a, { text: 'done' });
        expect(r.won).toBe(true);
        expect(r.failover).toBeNull();
        const stored = await store.getJob(OWNER, job.id);
        expect(stored).toMatchObject({ state: 'succeeded', completedBy: a.id, result: { text: 'done' }, version: 1, error: null });
        expect(stored?.attempts).toHaveLength(1);
        expect(stored?.attempts[0]).toMatchObject({ state: 'succeeded', leaseOwner: null, usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: 12 });
        expect(stored?.attempts[0]?.finishedAt?.getTime()).toBe(clock.now().getTime());
        // What the settle answered is what was committed (waiters take it without a read).
        expect(r.job).toEqual(stored);
        const events = await store.listEvents(OWNER, job.id);
        expect(events.map((e) => e.type)).toEqual(['attempt.started', 'attempt.running', 'attempt.succeeded', 'job.succeeded']);
        expect(events[2]!.data).toMatchObject({ actor: `executor:${EXECUTOR}` });
        // Settled once: the same answer again is refused, nothing changes.
        expect(await codeOf(win(a, { text: 'again' }))).toBe('attempt_finished');
        expect((await store.getJob(OWNER, job.id))?.result).toEqual({ text: 'done' });
      });

      it('the one statement applies only to the lease holder of the only attempt of an undecided job, once', async () => {
        const q = store.driver.queries;
        const { claimed, job } = await createLeased('fast-driver');
        const a = claimed!.attempt;
        const params = { ownerId: OWNER, jobId: job.id, attemptId: a.id, ...fenceOf(a), result: 'R', actor: 'test', now: clock.now() };
        expect(await q.attemptSettleWon({ ...params, leaseToken: 'lease_wrong' })).toBeNull();
        expect(await q.attemptSettleWon({ ...params, leaseOwner: 'exe_other' })).toBeNull();
        expect(await q.attemptSettleWon({ ...params, now: new Date(clock.now().getTime() + LEASE_MS + 1) })).toBeNull();
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'running', version: 0, attempts: [{ state: 'starting' }] });
        const won = await q.attemptSettleWon(params);
        expect(won?.job).toMatchObject({ state: 'succeeded', completedBy: a.id, result: 'R', version: 1 });
        expect(won?.attempt).toMatchObject({ state: 'succeeded', leaseOwner: null, usage: null });
        expect(await q.attemptSettleWon(params)).toBeNull();
        // Two attempts: never the one statement (the general settle decides the siblings).
        const two = await createLeased('fast-driver-2');
        await store.markRunning({ ownerId: OWNER, attemptId: two.claimed!.attempt.id, ...fenceOf(two.claimed!.attempt), timeoutMs: 1000 });
        clock.advance(100);
        const hedge = await store.startAttempt({ ownerId: OWNER, jobId: two.job.id, kind: 'hedge', hedgeAfterMs: 100, lease });
        expect(await q.attemptSettleWon({ ...params, jobId: two.job.id, attemptId: hedge.id, ...fenceOf(hedge), now: clock.now() })).toBeNull();
        expect(await q.attemptSettleWon({ ...params, jobId: two.job.id, attemptId: two.claimed!.attempt.id, ...fenceOf(two.claimed!.attempt), now: clock.now() })).toBeNull();
        expect((await store.getJob(OWNER, two.job.id))?.state).toBe('running');
      });

      it('40 concurrent settles of 40 jobs (group-committed where the driver does), some fenced out: each applies or not on its own', async () => {
        const claims = await Promise.all(Array.from({ length: 40 }, (_, i) => createLeased(`fast-many-${i}`).then((r) => r.claimed!)));
        const results = await Promise.all(claims.map((c, i) =>
          i % 4 === 3
            ? codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: c.attempt.id, jobId: c.job.id, fence: { leaseOwner: EXECUTOR, leaseToken: 'lease_stolen' }, outcome: { state: 'succeeded', result: i } }))
            : win(c.attempt, { n: i })));
        for (const [i, c] of claims.entries()) {
          const stored = (await store.getJob(OWNER, c.job.id))!;
          if (i % 4 === 3) {
            expect(results[i]).toBe('lease_lost');
            expect(stored).toMatchObject({ state: 'running', completedBy: null, attempts: [{ state: 'starting' }] });
          } else {
            expect(results[i]).toMatchObject({ won: true, job: { id: c.job.id, result: { n: i } } });
            expect(stored).toMatchObject({ state: 'succeeded', completedBy: c.attempt.id, result: { n: i }, attempts: [{ state: 'succeeded', costMicros: 12 }] });
            expect((await store.listEvents(OWNER, c.job.id)).map((e) => e.type)).toEqual(['attempt.started', 'attempt.succeeded', 'job.succeeded']);
          }
        }
      });

      it('the stream claim and the running mark are fenced in one statement: a stolen token, an expired lease or another job\'s attempt changes nothing', async () => {
        const { claimed, job } = await createLeased('fast-fence-stream');
        const a = claimed!.attempt;
        const other = (await createLeased('fast-fence-other')).claimed!.attempt;
        const claim = (x: Partial<{ jobId: string; attemptId: string; leaseToken: string }> = {}) =>
          store.claimStream({ ownerId: OWNER, jobId: job.id, attemptId: a.id, ...fenceOf(a), ...x });
        expect(await claim({ leaseToken: 'lease_stolen' })).toBe(false);
        expect(await claim({ attemptId: other.id, leaseToken: other.leaseToken! })).toBe(false);
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: 'lease_stolen', timeoutMs: 1000 })).toBe(false);
        expect((await store.getAttempt(OWNER, a.id))?.state).toBe('starting');
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), timeoutMs: 1000 })).toBe(true);
        expect((await store.getAttempt(OWNER, a.id))?.deadlineAt?.getTime()).toBe(clock.now().getTime() + 1000);
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), timeoutMs: 1000 })).toBe(false); // running already
        expect(await claim()).toBe(true);
        // The deadline to the first output is met: none is in force any more (the stream's idle bound is the executor's).
        expect((await store.getAttempt(OWNER, a.id))?.deadlineAt).toBeNull();
        expect(await claim()).toBe(true); // its own stream, again
        const events = (await store.listEvents(OWNER, job.id)).map((e) => e.type);
        expect(events.filter((t) => t === 'attempt.running')).toHaveLength(1);
        expect(events.filter((t) => t === 'attempt.stream_claimed')).toHaveLength(2);
        clock.advance(LEASE_MS + 1);
        const late = (await createLeased('fast-fence-late')).claimed!.attempt; // leased from now on
        clock.advance(LEASE_MS + 1);
        expect(await store.claimStream({ ownerId: OWNER, jobId: late.jobId, attemptId: late.id, ...fenceOf(late) })).toBe(false);
        expect(await store.markRunning({ ownerId: OWNER, attemptId: late.id, ...fenceOf(late), timeoutMs: 1000 })).toBe(false);
      });

      it('a stream whose first output came before its running mark is marked running with no deadline', async () => {
        const { claimed, job } = await createLeased('stream-first-output');
        const a = claimed!.attempt;
        expect(await store.claimStream({ ownerId: OWNER, jobId: job.id, attemptId: a.id, ...fenceOf(a) })).toBe(true);
        expect(await store.markRunning({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), timeoutMs: null })).toBe(true);
        expect(await store.getAttempt(OWNER, a.id)).toMatchObject({ state: 'running', deadlineAt: null });
        const running = (await store.listEvents(OWNER, job.id)).find((e) => e.type === 'attempt.running');
        expect(running?.data).toEqual({ deadline_at: null });
      });

      it('past its lease, a token that is not the lease\'s is fenced out (lease_lost, nothing written); the lease\'s own token still records its answer, from unknown too', async () => {
        const { claimed, job } = await createLeased('fast-fenced');
        const a = claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        const stolen = { ...a, leaseToken: 'lease_stolen' };
        expect(await codeOf(win(stolen, 'zombie'))).toBe('lease_lost');
        expect(await store.leaseStatus({ ownerId: OWNER, attemptId: a.id, ...fenceOf(stolen) })).toEqual({ status: 'lost' });
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'running', completedBy: null, attempts: [{ state: 'starting' }] });
        expect(await store.leaseStatus({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a) })).toEqual({ status: 'expired', state: 'starting' });
        expect(await store.rescueExpiredLeases()).toBe(1);
        expect(await codeOf(win(stolen, 'zombie'))).toBe('lease_lost');
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'unknown', result: null });
        // The database was away longer than the lease: the answer in hand is still the job's, once.
        expect(await store.leaseStatus({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a) })).toEqual({ status: 'expired', state: 'unknown' });
        const r = await win(a, 'paid');
        expect(r.won).toBe(true);
        expect(r.job).toMatchObject({ state: 'succeeded', completedBy: a.id, result: 'paid' });
        expect(r.attempt).toMatchObject({ state: 'succeeded', usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: 12 });
        expect(await codeOf(win(a, 'paid'))).toBe('attempt_finished');
        expect(await store.leaseStatus({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a) })).toEqual({ status: 'finished', state: 'succeeded' });
      });

      it('a never-sent first attempt is handed back by its lease\'s token: after the lease, from the rescuer\'s unknown too, once; never after another claim, a resolve or a cancel', async () => {
        const handBack = (a: Attempt, token = a.leaseToken!) => store.handBackUnsent({ ownerId: OWNER, attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: token });
        // Within the lease, and after it (not yet rescued): starting, unclaimed.
        const early = (await createLeased('handback-early')).claimed!.attempt;
        expect(await handBack(early)).toBe('handed_back');
        expect(await store.getAttempt(OWNER, early.id)).toMatchObject({ state: 'starting', leaseOwner: null, leaseExpiresAt: null });
        expect(await handBack(early)).toBe('handed_back');
        const late = (await createLeased('handback-late')).claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        expect(await handBack(late, 'lease_other')).toBe('refused');
        expect(await handBack(late)).toBe('handed_back');
        expect(await store.rescueExpiredLeases()).toBe(0);
        expect(await store.getAttempt(OWNER, late.id)).toMatchObject({ state: 'starting', leaseOwner: null });

        // Rescued to unknown from this very lease, nothing since: starting again, the job no longer in doubt.
        const { claimed, job } = await createLeased('handback-rescued');
        const a = claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        expect(await store.rescueExpiredLeases()).toBe(1);
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'unknown', attempts: [{ state: 'unknown', error: { code: 'lease_expired' } }] });
        expect(await handBack(a, 'lease_other')).toBe('refused');
        expect(await handBack(a)).toBe('handed_back');
        expect(await store.getJob(OWNER, job.id)).toMatchObject({
          state: 'running', attempts: [{ id: a.id, state: 'starting', leaseOwner: null, error: null, unknownAt: null, resolvedBy: null, finishedAt: null }],
        });
        expect((await store.listEvents(OWNER, job.id)).map((e) => e.type)).toEqual(['attempt.started', 'attempt.lease_expired', 'attempt.unknown', 'attempt.handed_back']);
        expect(await store.oldestUnknownAt()).toBeNull();
        // Claimed and run by any executor; the old token can no longer touch it.
        const runs = await store.claimWork({ leaseOwner: 'exe_other', leaseMs: LEASE_MS, limit: 5 });
        expect(runs.map((c) => c.attempt.id).sort()).toEqual([early.id, late.id, a.id].sort());
        expect(await handBack(a)).toBe('refused');
        expect(await store.getAttempt(OWNER, a.id)).toMatchObject({ state: 'starting', leaseOwner: 'exe_other' });
        for (const c of runs) expect((await win(c.attempt, 'ran once')).won).toBe(true);
        expect(await handBack(a)).toBe('refused');
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'succeeded', result: 'ran once', attempts: [{ state: 'succeeded' }] });

        // Resolved by a person after the rescue: the resolution stands.
        const resolved = (await createLeased('handback-resolved')).claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        expect(await store.rescueExpiredLeases()).toBe(1);
        await store.settleAttempt({ ownerId: OWNER, attemptId: resolved.id, resolvedBy: 'operator', outcome: { state: 'failed', error: { code: 'resolved', message: 'never ran' } } });
        expect(await handBack(resolved)).toBe('refused');
        expect(await store.getAttempt(OWNER, resolved.id)).toMatchObject({ state: 'failed', resolvedBy: 'operator' });

        // Cancelled after the rescue: the job stays cancelled, the attempt is not revived.
        const cancelled = (await createLeased('handback-cancelled')).claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        expect(await store.rescueExpiredLeases()).toBe(1);
        await store.cancelJob(OWNER, cancelled.jobId);
        expect(await handBack(cancelled)).toBe('refused');
        expect(await store.getJob(OWNER, cancelled.jobId)).toMatchObject({ state: 'cancelled' });
        expect((await store.getAttempt(OWNER, cancelled.id))?.state).not.toBe('starting');

        // A reconciler's lookup held on it (it settles unfenced): the lookup decides, the hand-back is refused while it is held.
        const looked = (await createLeased('handback-looked')).claimed!.attempt;
        clock.advance(LEASE_MS + 1);
        expect(await store.rescueExpiredLeases()).toBe(1);
        const held = await store.claimLookups({ holder: 'rec_1', providers: ['primary'], limit: 10, leaseMs: LEASE_MS, firstCheckMs: 0 });
        expect(held.some((x) => x.id === looked.id)).toBe(true);
        expect(await handBack(looked)).toBe('refused');
        expect((await store.getAttempt(OWNER, looked.id))?.state).toBe('unknown');

        // An attempt this executor sent and marked unknown itself (a doubt it made by sending) is never handed back.
        const sent = (await createLeased('handback-sent')).claimed!.attempt;
        expect(await store.markUnknown({ ownerId: OWNER, attemptId: sent.id, ...fenceOf(sent), reason: { code: 'deadline_exceeded', message: 't' } })).toBe(true);
        expect(await handBack(sent)).toBe('refused');
        expect((await store.getAttempt(OWNER, sent.id))?.state).toBe('unknown');
        // No such attempt (the create did not commit).
        expect(await store.handBackUnsent({ ownerId: OWNER, attemptId: 'att_00000000000000000000000000', leaseOwner: EXECUTOR, leaseToken: 'lease_x' })).toBe('absent');
      });

      it('a late answer to an unknown attempt (lease kept) still wins, through the general settle', async () => {
        const { claimed, job } = await createLeased('fast-late');
        const a = claimed!.attempt;
        expect(await store.markUnknown({ ownerId: OWNER, attemptId: a.id, ...fenceOf(a), reason: { code: 'deadline_exceeded', message: 't' } })).toBe(true);
        const r = await win(a, 'late');
        expect(r.won).toBe(true);
        expect(await store.getJob(OWNER, job.id)).toMatchObject({ state: 'succeeded', completedBy: a.id, result: 'late' });
      });

      it(`a hedge beside it: the two finish at once from two stores, exactly one wins and the other is superseded (${reps} repetitions)`, async () => {
        const other = openAnother ? await openAnother() : store;
        try {
          for (let r = 0; r < reps; r++) {
            const { claimed, job } = await createLeased(`fast-hedge-${r}`);
            const primary = claimed!.attempt;
            await store.markRunning({ ownerId: OWNER, attemptId: primary.id, ...fenceOf(primary), timeoutMs: 1000 });
            clock.advance(100);
            const hedge = await store.startAttempt({ ownerId: OWNER, jobId: job.id, kind: 'hedge', hedgeAfterMs: 100, lease });
            const [p, h] = await Promise.all([win(primary, 'P', store), win(hedge, 'H', other)]);
            expect([p.won, h.won].filter(Boolean)).toHaveLength(1);
            const winner = p.won ? primary : hedge;
            const stored = await store.getJob(OWNER, job.id);
            expect(stored).toMatchObject({ state: 'succeeded', completedBy: winner.id, result: p.won ? 'P' : 'H', version: 1 });
            expect(stored?.attempts.map((x) => x.state).sort()).toEqual(['succeeded', 'superseded']);
          }
        } finally {
          if (other !== store) await other.close();
        }
      });

      it(`a settle racing a cancel from another store: the job ends one way, and the attempt agrees (${reps} repetitions)`, async () => {
        const other = openAnother ? await openAnother() : store;
        try {
          for (let r = 0; r < reps; r++) {
            const { claimed, job } = await createLeased(`fast-cancel-${r}`);
            const a = claimed!.attempt;
            const [settled, cancelled] = await Promise.all([
              win(a, 'R', store),
              other.cancelJob(OWNER, job.id).then(() => true, (e: unknown) => (isOnejobError(e, 'job_finished') ? false : Promise.reject(e))),
            ]);
            const stored = (await store.getJob(OWNER, job.id))!;
            if (cancelled) {
              expect(settled.won).toBe(false);
              expect(stored).toMatchObject({ state: 'cancelled', completedBy: null, attempts: [{ state: 'superseded' }] });
            } else {
              expect(settled.won).toBe(true);
              expect(stored).toMatchObject({ state: 'succeeded', completedBy: a.id, result: 'R', attempts: [{ state: 'succeeded' }] });
            }
          }
        } finally {
          if (other !== store) await other.close();
        }
      });
    });

    describe('reads', () => {
      it('lists newest first with a cursor and a state filter, and rejects a forged cursor', async () => {
        for (let i = 0; i < 5; i++) {
          await create(`list-${i}`);
          clock.advance(10);
        }
        const p1 = await store.listJobs({ ownerId: OWNER, limit: 2 });
        expect(p1.jobs.map((j) => j.idempotencyKey)).toEqual(['list-4', 'list-3']);
        const p2 = await store.listJobs({ ownerId: OWNER, limit: 2, cursor: p1.nextCursor! });
        expect(p2.jobs.map((j) => j.idempotencyKey)).toEqual(['list-2', 'list-1']);
        const p3 = await store.listJobs({ ownerId: OWNER, limit: 2, cursor: p2.nextCursor! });
        expect(p3.jobs.map((j) => j.idempotencyKey)).toEqual(['list-0']);
        expect(p3.nextCursor).toBeNull();
        expect((await store.listJobs({ ownerId: OWNER, state: 'succeeded' })).jobs).toHaveLength(0);
        expect((await store.listJobs({ ownerId: 'bob' })).jobs).toHaveLength(0);
        expect(await codeOf(store.listJobs({ ownerId: OWNER, cursor: 'bm90IGEgY3Vyc29y' }))).toBe('invalid_request');
      });

      it('an id no row could have (a NUL byte, non-ASCII) is simply not found, never a database error', async () => {
        const { job } = await create('ids');
        for (const bad of ['\u0000', `${job.id}\u0000`, 'job_é', '']) {
          expect(await store.getJob(OWNER, bad)).toBeNull();
          expect(await store.getAttempt(OWNER, bad)).toBeNull();
          expect(await store.listEvents(OWNER, bad)).toEqual([]);
          expect(await codeOf(store.cancelJob(OWNER, bad))).toBe('job_not_found');
          expect(await codeOf(store.startAttempt({ ownerId: OWNER, jobId: bad, kind: 'manual', hedgeAfterMs: null }))).toBe('job_not_found');
          expect(await codeOf(store.settleAttempt({ ownerId: OWNER, attemptId: bad, outcome: { state: 'cancelled' } }))).toBe('attempt_not_found');
        }
        const forged = Buffer.from(JSON.stringify([Date.now(), 'job_\u0000'])).toString('base64url');
        expect(await codeOf(store.listJobs({ ownerId: OWNER, cursor: forged }))).toBe('invalid_request');
      });

      it('a job and its attempts are read as of one moment: a rescue committing in the middle of a read is seen whole or not at all', async () => {
        for (const read of ['getJob', 'listJobs', 'searchJobs', 'findJob'] as const) {
          const { jobId } = await runningJob(`one-moment-${read}`);
          clock.advance(LEASE_MS + 1);
          // After the reader's first statement, the rescue (attempt and job to `unknown`, one transaction) gets 200 ms to commit.
          let fired = false;
          const between = async (): Promise<void> => {
            if (fired) return;
            fired = true;
            const rescue = store.rescueExpiredLeases();
            await Promise.race([rescue, new Promise((r) => setTimeout(r, 200))]);
          };
          const reader = new JobStoreClass(pausingAfterFirstRead(store.driver, between), { clock, databaseClock: clock });
          const seen = read === 'getJob' ? await reader.getJob(OWNER, jobId)
            : read === 'findJob' ? await reader.findJob(jobId)
            : read === 'listJobs' ? (await reader.listJobs({ ownerId: OWNER, limit: 1 })).jobs[0]
            : (await reader.insights.searchJobs({ ownerId: OWNER, limit: 1 })).jobs[0];
          expect(fired).toBe(true);
          expect([[seen!.state, seen!.attempts.map((a) => a.state)]].map(([j, a]) => `${String(j)}:${String(a)}`)[0]!).toMatch(/^(running:running|unknown:unknown)$/);
          expect(await store.rescueExpiredLeases()).toBe(0);
          expect((await store.getJob(OWNER, jobId))?.state).toBe('unknown');
        }
      });

      it('migrating again is a no-op, and two migrators at once are safe', async () => {
        const results = await Promise.all([store.migrate(), store.migrate()]);
        for (const r of results) expect(r.every((m) => m.status === 'already_applied')).toBe(true);
        expect((await store.readiness()).ok).toBe(true);
      });
    });

    describe('stored streams (CONTRACT §13)', () => {
      it('batches read back in order, per attempt, after a seq, for their owner only; an append is announced; a batch is written once', async () => {
        const { job } = await create('stream-batches');
        const heard: string[] = [];
        const off = store.onStreamAppended((id) => heard.push(id));
        const row = (attemptNumber: number, seq: number, events: unknown[]) => ({ ownerId: OWNER, jobId: job.id, attemptNumber, seq, events: JSON.stringify(events) });
        await store.appendStreamBatch(row(1, 1, [{ d: { type: 'text', text: 'a' } }]));
        await store.appendStreamBatch(row(1, 3, [{ d: { type: 'text', text: 'b' } }, { d: { type: 'text', text: 'c' } }]));
        await store.appendStreamBatch(row(2, 1, [{ end: 'ok' }]));
        off();
        expect(heard).toEqual([job.id, job.id, job.id]);
        const all = await store.readStreamBatches(OWNER, job.id, null, 0);
        expect(all.map((b) => [b.attemptNumber, b.seq])).toEqual([[1, 1], [1, 3], [2, 1]]);
        expect(JSON.parse(all[1]!.events)).toEqual([{ d: { type: 'text', text: 'b' } }, { d: { type: 'text', text: 'c' } }]);
        expect((await store.readStreamBatches(OWNER, job.id, 1, 1)).map((b) => b.seq)).toEqual([3]);
        expect((await store.readStreamBatches(OWNER, job.id, 1, 2)).map((b) => b.seq)).toEqual([3]);
        expect(await store.readStreamBatches(OWNER, job.id, 1, 3)).toEqual([]);
        expect(await store.readStreamBatches('bob', job.id, null, 0)).toEqual([]);
        expect(await store.appendStreamBatch(row(1, 3, [{ end: 'ok' }])).then(() => 'written', () => 'refused')).toBe('refused');
      });
    });
  });
}

/**
 * `driver` with a pause after the first job read a reader makes (`jobGet`,
 * `jobList`, `jobListAll`, `jobGetAnyOwner`, `jobSearch`), in which `between`
 * runs: another transaction may commit there. Writes go through unchanged.
 */
function pausingAfterFirstRead(driver: Driver, between: () => Promise<void>): Driver {
  const pausing = <T extends object>(target: T, names: readonly string[]): T =>
    new Proxy(target, {
      get(t, name, receiver) {
        const v = Reflect.get(t, name, receiver) as unknown;
        if (typeof v !== 'function') return v;
        if (!names.includes(String(name))) return (v as (...a: unknown[]) => unknown).bind(t);
        return async (...args: unknown[]) => {
          const out = await (v as (...a: unknown[]) => Promise<unknown>).apply(t, args);
          await between();
          return out;
        };
      },
    });
  const jobReads = ['jobGet', 'jobList', 'jobListAll', 'jobGetAnyOwner'];
  return new Proxy(driver, {
    get(t, name, receiver) {
      if (name === 'queries') return pausing(t.queries, jobReads);
      if (name === 'insights') return pausing(t.insights, ['jobSearch']);
      if (name === 'readSnapshot') {
        return <R>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<R>) =>
          t.readSnapshot((q, insights) => fn(pausing(q, jobReads), pausing(insights, ['jobSearch'])));
      }
      const v = Reflect.get(t, name, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** `driver` whose transactions pause after their first call of `method`, in which `between` runs (another client acts there). */
function pausingInTransactions(driver: Driver, method: keyof DriverQueries, between: () => Promise<void>): Driver {
  return new Proxy(driver, {
    get(t, name, receiver) {
      if (name === 'transaction') {
        return <R>(fn: (q: DriverQueries) => Promise<R>) =>
          t.transaction((q) => {
            const paused = new Proxy(q, {
              get(qt, qn) {
                const v = Reflect.get(qt, qn, qt) as unknown;
                if (typeof v !== 'function') return v;
                if (qn !== method) return (v as (...a: unknown[]) => unknown).bind(qt);
                return async (...args: unknown[]) => {
                  const out = await (v as (...a: unknown[]) => Promise<unknown>).apply(qt, args);
                  await between();
                  return out;
                };
              },
            });
            return fn(paused);
          });
      }
      const v = Reflect.get(t, name, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}
