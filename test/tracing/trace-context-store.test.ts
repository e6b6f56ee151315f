/**
 * The job row keeps the trace context it was created under (migration 0007),
 * in both dialects, through the single insert and the batched one; a replay
 * never overwrites it; a job created untraced has none.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const ctx = (n: number) => JSON.stringify({ traceparent: `00-${n.toString(16).padStart(32, '0')}-${'1'.repeat(16)}-01` });

describe.each(TEST_DATABASES)('jobs.trace_context on $name', (db) => {
  let store: JobStore;
  let cleanup: () => Promise<void>;
  beforeEach(async (t) => {
    if (db.skip) t.skip();
    ({ store, cleanup } = await createTestStore(db));
  });
  afterEach(async () => cleanup?.());

  it('is stored on create, read back, kept on replay; null without one', async () => {
    const base = { ownerId: 'alice', route: 'r', input: { a: 1 }, providers: ['p'] };
    const first = await store.createJob({ ...base, idempotencyKey: 'k', traceContext: ctx(1) });
    expect(first.created).toBe(true);
    expect(first.job.traceContext).toBe(ctx(1));
    const replay = await store.createJob({ ...base, idempotencyKey: 'k', traceContext: ctx(2) });
    expect(replay.created).toBe(false);
    expect(replay.job.traceContext).toBe(ctx(1));
    expect((await store.getJob('alice', first.job.id))!.traceContext).toBe(ctx(1));
    const untraced = await store.createJob({ ...base, idempotencyKey: 'plain' });
    expect(untraced.job.traceContext).toBeNull();
  });

  it('survives concurrent (batched) inserts, each row its own context', async () => {
    const base = { ownerId: 'alice', route: 'r', input: { a: 1 }, providers: ['p'] };
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => store.createJob({ ...base, idempotencyKey: `k${i}`, traceContext: ctx(i + 10) })));
    for (const [i, r] of results.entries()) {
      expect(r.created).toBe(true);
      expect((await store.getJob('alice', r.job.id))!.traceContext).toBe(ctx(i + 10));
    }
  });
});
