/**
 * The batch store on both engines (CONTRACT §17): a page of lines is
 * created once however many runners race for it; a line whose key another
 * job already holds becomes an error line, never a second run; and the pure
 * rules of the executor's batch share.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { batchRoom, hedgeAfterMsOf } from '../../src/executor/batch-share.ts';
import { BATCH_PAGE, lineKey } from '../../src/store/batch-store.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { countRows } from './batch-harness.ts';

describe('batch share', () => {
  it('room is the share of concurrency less the batch lines in flight, at least one line when the share is above 0', () => {
    expect(batchRoom(64, 0.5, 0)).toBe(32);
    expect(batchRoom(64, 0.5, 30)).toBe(2);
    expect(batchRoom(64, 0.5, 40)).toBe(0);
    expect(batchRoom(1, 0.5, 0)).toBe(1);
    expect(batchRoom(8, 0, 0)).toBe(0);
    expect(batchRoom(8, 1, 3)).toBe(5);
  });
  it('batch lines are never hedged; other jobs keep their route\'s hedge', () => {
    expect(hedgeAfterMsOf({ batchId: 'batch_1' }, 300)).toBeNull();
    expect(hedgeAfterMsOf({ batchId: null }, 300)).toBe(300);
  });
});

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the batch store (${db.name})`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
    });
    afterEach(async () => {
      await cleanup();
    });

    async function batchOf(lines: number, key: string) {
      const fileId = `file_${key}`;
      await store.batches.beginFile({ ownerId: 'alice', id: fileId, filename: 'f.jsonl' });
      const rows = Array.from({ length: lines }, (_, i) => ({
        ownerId: 'alice', fileId, lineNo: i + 1, customId: `req-${i}`, url: '/v1/chat/completions', route: 'r',
        line: JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'r', messages: [{ role: 'user', content: `l${i}` }] } }),
      }));
      for (let i = 0; i < rows.length; i += BATCH_PAGE) await store.batches.addFileLines(rows.slice(i, i + BATCH_PAGE));
      await store.batches.publishFile({ ownerId: 'alice', id: fileId, bytes: 1, lineCount: lines, endpoints: ['/v1/chat/completions'] });
      const now = new Date();
      return (await store.batches.createBatch({
        ownerId: 'alice', id: `batch_${key}`, idempotencyKey: key, fingerprint: 'f', inputFileId: fileId, endpoint: '/v1/chat/completions',
        completionWindow: '24h', metadata: null, lineCount: lines, createdAt: now, expiresAt: new Date(now.getTime() + 86_400_000),
      })).batch;
    }
    const jobOf = () => ({ route: 'r', input: { messages: [] }, metadata: null, providers: ['p'], fingerprint: 'x' });

    it('runners racing for one page: it is created once (one commit moves the cursor, the others roll back)', async () => {
      const batch = await batchOf(BATCH_PAGE + 20, 'race');
      const created = await Promise.all(Array.from({ length: 6 }, () => store.batches.createLinesPage(batch, jobOf, () => 'taken')));
      expect(created.filter((n) => n > 0)).toEqual([BATCH_PAGE]);
      expect(await countRows(url, 'jobs', `batch_id = '${batch.id}'`)).toBe(BATCH_PAGE);
      expect(await countRows(url, 'batch_lines', `batch_id = '${batch.id}'`)).toBe(BATCH_PAGE);
      const after = (await store.batches.getBatch('alice', batch.id))!;
      expect(after).toMatchObject({ linesCreated: BATCH_PAGE, status: 'in_progress' });
      // The next page, then nothing left.
      expect(await store.batches.createLinesPage(after, jobOf, () => 'taken')).toBe(20);
      expect(await store.batches.createLinesPage((await store.batches.getBatch('alice', batch.id))!, jobOf, () => 'taken')).toBe(0);
      expect(await countRows(url, 'jobs', `batch_id = '${batch.id}'`)).toBe(BATCH_PAGE + 20);
    });

    it("a line whose key another job holds is an error line; that job is untouched and nothing runs twice", async () => {
      const batch = await batchOf(3, 'taken');
      const foreign = await store.createJob({ ownerId: 'alice', idempotencyKey: lineKey(batch.id, 'req-1'), route: 'r', input: { mine: true }, providers: ['p'] });
      expect(await store.batches.createLinesPage(batch, jobOf, (l) => `taken:${l.customId}`)).toBe(3);
      expect(await countRows(url, 'jobs', `batch_id = '${batch.id}'`)).toBe(2);
      const lines = await store.batches.finishedLines(batch, 10);
      expect(lines.map((l) => [l.line.customId, l.line.outcome, l.line.output])).toEqual([]);
      expect(await countRows(url, 'batch_lines', `batch_id = '${batch.id}' AND outcome = 'error' AND job_id IS NULL`)).toBe(1);
      expect((await store.getJob('alice', foreign.job.id))!.input).toEqual({ mine: true });
    });
  });
}
