/**
 * The database goes away while providers' answers are in flight (CONTRACT:
 * a paid result is never dropped because a write failed).
 *
 * A private PostgreSQL server (test/support/private-postgres.ts; the shared
 * one at 5432 is never stopped) is stopped with `pg_ctl stop -m fast` (every
 * connection terminated, 57P01, then refused) for about 5 s while ten
 * providers answer, and started again: every job must end with its own
 * provider's answer, each provider called once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { postgresSkipReason } from '../support/postgres.ts';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';

const OWNER = 'alice';
const JOBS = 10;

describe.skipIf(Boolean(postgresSkipReason()))('a PostgreSQL outage while answers are in flight (private server)', () => {
  let pg: PrivatePostgres;
  let store: JobStore;
  let fake: FakeProvider;

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    store = await openStore(pg.url, { poolSize: 10 });
    await store.migrate();
    fake = await startFakeProvider();
  }, 120_000);
  afterAll(async () => {
    await fake?.close();
    await store?.close();
    await pg?.destroy();
  });

  it('stopped for 5 s, then started: every job ends with its provider\'s answer, each provider called once', async () => {
    fake.setDefault({ gate: 'answers', reply: 'the paid answer' });
    const provider = createProvider('primary', { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 60_000 });
    const executor = new Executor({
      store, providers: new Map([['primary', provider]]), routes: { work: { hedgeAfterMs: null } },
      leaseMs: 30_000, pollMs: 200, runningMarkDelayMs: 0, writeRetryBaseMs: 50,
    });
    const retries: string[] = [];
    const abandoned: string[] = [];
    executor.events.on('attempt:write_retry', (a) => retries.push(a.id));
    executor.events.on('attempt:write_abandoned', (a) => abandoned.push(a.id));
    executor.events.on('error', () => undefined);
    await executor.start();
    try {
      const jobs = await Promise.all(Array.from({ length: JOBS }, (_, i) =>
        store.createJob({ ownerId: OWNER, idempotencyKey: `outage-${i}`, route: 'work', input: { messages: [{ role: 'user', content: `q${i}` }] }, providers: ['primary'] }).then((r) => r.job)));
      await fake.waitForCalls(JOBS);
      for (;;) {
        const page = await store.listJobs({ ownerId: OWNER, limit: 50 });
        if (page.jobs.every((j) => j.attempts[0]?.state === 'running')) break;
        await new Promise((r) => setTimeout(r, 50));
      }

      await pg.stop();
      // The answers arrive while the database is down: every settle fails and is tried again.
      fake.release('answers');
      await fake.waitForResult(JOBS);
      await new Promise((r) => setTimeout(r, 5_000));
      expect(retries.length).toBeGreaterThan(0);
      await pg.start();

      for (const j of jobs) {
        const deadline = Date.now() + 30_000;
        for (;;) {
          const job = await store.getJob(OWNER, j.id).catch(() => null);
          if (job?.state === 'succeeded') break;
          if (Date.now() > deadline) throw new Error(`job ${j.id} did not succeed: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.error?.code]) })}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      for (const j of jobs) {
        const job = (await store.getJob(OWNER, j.id))!;
        expect(job.attempts.map((a) => a.state)).toEqual(['succeeded']);
        expect(job.result).toMatchObject({ content: 'the paid answer', provider: 'primary' });
      }
      expect(abandoned).toEqual([]);
      const keys = fake.calls.map((c) => c.idempotencyKey);
      expect(keys).toHaveLength(JOBS);
      expect(new Set(keys).size).toBe(JOBS);
    } finally {
      await executor.stop(1_000);
      await provider.close();
    }
  }, 120_000);

  it('stopped for 60 s, longer than the lease: the answers in hand are held and written when it returns, each once; answers still on their way after it returns land too', async () => {
    const N = 8;
    fake.reset();
    const provider = createProvider('primary', { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 300_000 });
    const executor = new Executor({
      store, providers: new Map([['primary', provider]]), routes: { work: { hedgeAfterMs: null } },
      leaseMs: 5_000, pollMs: 200, rescueEveryMs: 1_000, runningMarkDelayMs: 0, writeRetryBaseMs: 50,
    });
    const abandoned: string[] = [];
    const lost: string[] = [];
    let heldMost = 0;
    executor.events.on('attempt:write_abandoned', (a) => abandoned.push(a.id));
    executor.events.on('attempt:lease_lost', (a) => lost.push(a.id));
    executor.events.on('attempt:answer_held', () => (heldMost = Math.max(heldMost, executor.answersHeld)));
    executor.events.on('error', () => undefined);
    await executor.start();
    try {
      const jobs = [];
      for (let i = 0; i < N; i++) {
        // Half answer while the database is down, half only after it is back (their leases ran out meanwhile).
        fake.script([{ gate: i % 2 === 0 ? 'during' : 'after', reply: `answer ${i}`, usage: { prompt_tokens: 10 + i, completion_tokens: 3 } }]);
        jobs.push((await store.createJob({ ownerId: OWNER, idempotencyKey: `long-outage-${i}`, route: 'work', input: { messages: [{ role: 'user', content: `long ${i}` }] }, providers: ['primary'] })).job);
        await fake.waitForCalls(i + 1);
      }
      for (;;) {
        const page = await store.listJobs({ ownerId: OWNER, limit: 50 });
        if (page.jobs.filter((j) => j.idempotencyKey.startsWith('long-outage-')).every((j) => j.attempts[0]?.state === 'running')) break;
        await new Promise((r) => setTimeout(r, 50));
      }

      await pg.stop();
      fake.release('during');
      await new Promise((r) => setTimeout(r, 60_000));
      expect(heldMost).toBe(N / 2);
      await pg.start();
      // Back: the rescuer finds leases that ran out long ago; the held answers are written by their tokens.
      await new Promise((r) => setTimeout(r, 3_000));
      fake.release('after');

      for (const j of jobs) {
        const deadline = Date.now() + 60_000;
        for (;;) {
          const job = await store.getJob(OWNER, j.id).catch(() => null);
          if (job?.state === 'succeeded') break;
          if (Date.now() > deadline) throw new Error(`job ${j.id} did not succeed: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.error?.code]) })}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      for (const [i, j] of jobs.entries()) {
        const job = (await store.getJob(OWNER, j.id))!;
        expect(job.attempts.map((a) => [a.state, a.usage?.promptTokens])).toEqual([['succeeded', 10 + i]]);
        expect(job.result).toMatchObject({ content: `answer ${i}` });
        const events = (await store.listEvents(OWNER, j.id)).map((e) => e.type);
        expect(events.filter((t) => t === 'attempt.succeeded')).toHaveLength(1);
        expect(events.filter((t) => t === 'job.succeeded')).toHaveLength(1);
      }
      expect(abandoned).toEqual([]);
      expect(lost).toEqual([]);
      expect(executor.answersHeld).toBe(0);
      const keys = fake.calls.map((c) => c.idempotencyKey);
      expect(keys).toHaveLength(N);
      expect(new Set(keys).size).toBe(N);
    } finally {
      await executor.stop(1_000);
      await provider.close();
    }
  }, 240_000);
});
