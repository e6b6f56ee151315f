/**
 * How the stream hub stores a stream (docs/streaming.md, "Writing: batches
 * per time slice"), on a real store of each engine: the first event at once,
 * the first output at once too (a reader elsewhere gets the first token
 * without waiting a slice, also when the provider's first chunk only names
 * its model), then one write per slice, the end at once. The slice here is
 * long (10 s), so any write before it is the eager one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamHub, streamEventsOfBatch } from '../../src/executor/stream-hub.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`stream batches (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
    });
    afterAll(async () => {
      await cleanup?.();
    });

    async function until(what: string, ok: () => boolean): Promise<void> {
      for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
      if (!ok()) throw new Error(`never: ${what}`);
    }

    it('a first event that is no output (the model) is written at once, and so is the first output after it; the rest waits for the slice or the end', async () => {
      const jobId = `job_batches_${db.name}_${Date.now()}`;
      let writes = 0;
      // Counted once stored: a read after the count sees the row.
      const log = { appendStreamBatch: async (row: Parameters<JobStore['appendStreamBatch']>[0]) => void (await store.appendStreamBatch(row), writes++) };
      const w = new StreamHub({ sliceMs: 10_000 }).open(jobId, 'att_b', { ownerId: 'alice', attemptNumber: 1, log });
      w.push({ type: 'model', model: 'gpt-fake-2026' });
      await until('the first event written', () => writes === 1);
      w.push({ type: 'text', text: 'first ' });
      await until('the first output written, long before the slice', () => writes === 2);
      w.push({ type: 'text', text: 'second ' });
      w.push({ type: 'text', text: 'third' });
      await new Promise((r) => setTimeout(r, 100));
      expect(writes).toBe(2); // within the slice: kept for one write
      w.end({ ok: true, result: null });
      await until('the end written', () => writes === 3);
      const rows = await store.readStreamBatches('alice', jobId, 1, 0);
      expect(rows.map((r) => streamEventsOfBatch(r).map((e) => (e.type === 'delta' ? e.delta.type : 'end')))).toEqual([['model'], ['text'], ['text', 'text', 'end']]);
    });

    it('a first event that is output is the eager write: the next output waits for the slice', async () => {
      const jobId = `job_batches2_${db.name}_${Date.now()}`;
      let writes = 0;
      // Counted once stored: a read after the count sees the row.
      const log = { appendStreamBatch: async (row: Parameters<JobStore['appendStreamBatch']>[0]) => void (await store.appendStreamBatch(row), writes++) };
      const w = new StreamHub({ sliceMs: 10_000 }).open(jobId, 'att_c', { ownerId: 'alice', attemptNumber: 1, log });
      w.push({ type: 'text', text: 'first ' });
      await until('the first event written', () => writes === 1);
      w.push({ type: 'text', text: 'second' });
      await new Promise((r) => setTimeout(r, 100));
      expect(writes).toBe(1);
      w.end({ ok: true, result: null });
      await until('the end written', () => writes === 2);
    });

    it('a stream published before its claim stores nothing until kept, then everything so far in one write, the same numbers as relayed', async () => {
      const jobId = `job_batches3_${db.name}_${Date.now()}`;
      let writes = 0;
      // Counted once stored: a read after the count sees the row.
      const log = { appendStreamBatch: async (row: Parameters<JobStore['appendStreamBatch']>[0]) => void (await store.appendStreamBatch(row), writes++) };
      const hub = new StreamHub({ sliceMs: 10_000 });
      const relayed: number[] = [];
      hub.watch(jobId, (e) => void relayed.push(e.seq));
      const w = hub.open(jobId, 'att_d', { ownerId: 'alice', attemptNumber: 2 });
      w.push({ type: 'model', model: 'gpt-fake-2026' });
      w.push({ type: 'text', text: 'first ' });
      await new Promise((r) => setTimeout(r, 50));
      expect(writes).toBe(0); // published, not stored
      expect(relayed).toEqual([1, 2]);
      w.keep(log);
      await until('what came before the claim written', () => writes === 1);
      w.keep(log); // a second keep changes nothing
      w.push({ type: 'text', text: 'second' });
      w.end({ ok: true, result: null });
      await until('the end written', () => writes === 2);
      const rows = await store.readStreamBatches('alice', jobId, 2, 0);
      expect(rows.map((r) => streamEventsOfBatch(r).map((e) => e.seq))).toEqual([[1, 2], [3, 4]]);
      expect(relayed).toEqual([1, 2, 3, 4]);
    });

    it('a stream ended before it was kept is never stored', async () => {
      const jobId = `job_batches4_${db.name}_${Date.now()}`;
      let writes = 0;
      // Counted once stored: a read after the count sees the row.
      const log = { appendStreamBatch: async (row: Parameters<JobStore['appendStreamBatch']>[0]) => void (await store.appendStreamBatch(row), writes++) };
      const w = new StreamHub({ sliceMs: 10_000 }).open(jobId, 'att_e', { ownerId: 'alice', attemptNumber: 1 });
      w.push({ type: 'text', text: 'lost claim' });
      w.end({ ok: false, error: { code: 'stream_not_claimed', message: 'not ours' } });
      w.keep(log);
      await new Promise((r) => setTimeout(r, 50));
      expect(writes).toBe(0);
      expect(await store.readStreamBatches('alice', jobId, 1, 0)).toEqual([]);
    });
  });
}
