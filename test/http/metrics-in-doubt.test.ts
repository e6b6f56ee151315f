/**
 * `onejob_attempts_in_doubt` on the API's /metrics is the database's count at
 * scrape time: it goes up when an attempt becomes unknown in any process and
 * down when doubt is resolved (here by a second store instance, as another
 * process would), without the API process seeing either transition.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { startTestServer, type TestServer } from './http-test-app.ts';

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`attempts_in_doubt on ${db.name}`, () => {
    let server: TestServer;
    let other: JobStore;
    beforeAll(async () => {
      server = await startTestServer(db);
      other = await openStore(server.url);
    });
    afterAll(async () => {
      await other.close();
      await server.close();
    });

    const gauge = async (): Promise<number> => {
      const res = await server.request('GET', '/metrics', { token: null });
      const m = /^onejob_attempts_in_doubt (\d+)$/m.exec(res.text);
      expect(m, res.text).not.toBeNull();
      return Number(m![1]);
    };

    it('follows unknowns and resolves made by other processes', async () => {
      expect(await gauge()).toBe(0);
      const { job } = await other.createJob({ ownerId: 'alice', idempotencyKey: 'doubt', route: 'summarize', input: 1, providers: ['p1', 'p2'] });
      const [c] = await other.claimWork({ leaseOwner: 'exe_x', leaseMs: 60_000, limit: 1 });
      expect(c!.job.id).toBe(job.id);
      await other.markUnknown({ ownerId: 'alice', attemptId: c!.attempt.id, leaseOwner: 'exe_x', leaseToken: c!.attempt.leaseToken!, reason: { code: 'deadline', message: 'x' } });
      expect(await gauge()).toBe(1);
      await other.settleAttempt({ ownerId: 'alice', attemptId: c!.attempt.id, outcome: { state: 'succeeded', result: 'late answer' }, actor: 'test' });
      expect(await gauge()).toBe(0);
    });
  });
}
