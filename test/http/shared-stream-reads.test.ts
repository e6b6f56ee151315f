/**
 * Many readers of one stream on one process share its reads (docs/streaming.md,
 * "Where a reader gets them"): on PostgreSQL, a second store (another process's
 * connections) holds a dozen {@link JobStreamFollower}s of one job that another
 * store publishes; one NOTIFY wakes them all, and they send one
 * `readStreamBatches` per batch between them, not one each. Every follower
 * still hands on every event once, in order, to the end.
 *
 * PostgreSQL only: it is where announcements cross processes (on one SQLite
 * file another process re-reads on its own timer).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamHub, type StreamEvent } from '../../src/executor/stream-hub.ts';
import { JobStreamFollower } from '../../src/http/stream-follower.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const pg = TEST_DATABASES.find((d) => d.name === 'postgres')!;
const FOLLOWERS = 12;
const DELTAS = 30;

describe.skipIf(pg.skip !== null)('followers of one stream on one process share its reads (PostgreSQL)', () => {
  let writer: JobStore;
  let reader: JobStore;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    let url: string;
    ({ store: writer, url, cleanup } = await createTestStore(pg));
    reader = await openStore(url, { poolSize: 4 });
  });
  afterAll(async () => {
    await reader?.close();
    await cleanup?.();
  });

  it(`${FOLLOWERS} followers, one read per announcement between them; each gets every event once, in order`, async () => {
    let reads = 0;
    // The reader store, counting its stream reads (every other call passes through to the store itself).
    const counted = new Proxy(reader, {
      get(target, key) {
        const v = Reflect.get(target, key, target) as unknown;
        if (typeof v !== 'function') return v;
        if (key === 'readStreamBatches') return (...a: Parameters<JobStore['readStreamBatches']>) => (reads++, target.readStreamBatches(...a));
        return (v as (...x: unknown[]) => unknown).bind(target);
      },
    });
    const jobId = `job_shared_${Date.now()}`;
    const got: StreamEvent[][] = Array.from({ length: FOLLOWERS }, () => []);
    const ended = got.map(() => {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      return { promise, resolve, reject };
    });
    const followers = got.map((events, i) => new JobStreamFollower({
      store: counted, hub: new StreamHub(), ownerId: 'alice', jobId, attemptNumber: null, readNow: true, recheckMs: 60_000,
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'end') ended[i]!.resolve();
      },
      onError: (e) => ended[i]!.reject(e),
    }));
    for (const f of followers) f.start();
    await new Promise((r) => setTimeout(r, 200)); // the reader's LISTEN is in place

    let appends = 0;
    const log = { appendStreamBatch: async (row: Parameters<JobStore['appendStreamBatch']>[0]) => (appends++, writer.appendStreamBatch(row)) };
    const w = new StreamHub({ sliceMs: 50 }).open(jobId, 'att_shared', { ownerId: 'alice', attemptNumber: 1, log });
    for (let i = 0; i < DELTAS; i++) {
      w.push({ type: 'text', text: `t${i} ` });
      await new Promise((r) => setTimeout(r, 8));
    }
    w.end({ ok: true, result: null });
    await Promise.all(ended.map((e) => e.promise));
    for (const f of followers) f.close();

    for (const events of got) {
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: DELTAS + 1 }, (_, i) => i + 1));
      expect(events.at(-1)!.type).toBe('end');
    }
    // Unshared, every follower reads every batch itself: FOLLOWERS × appends. Shared: about one read per
    // announcement (plus the first read, and a re-read where an announcement came during a read).
    expect(appends).toBeGreaterThan(3);
    expect(reads).toBeLessThanOrEqual(2 * appends + 2);
    console.info(`shared stream reads: ${appends} batches, ${reads} reads for ${FOLLOWERS} followers (unshared: about ${FOLLOWERS * appends})`);
  });
});
