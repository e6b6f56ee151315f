/**
 * Attempts over real HTTP, on SQLite and PostgreSQL: in-doubt blocking,
 * explicit resolution, the lost race (superseded), cancel, long-poll, listing.
 *
 * The executor does not exist yet: the tests move attempts the way it will,
 * through the store (claimWork, markRunning, markUnknown).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.ts';
import { createMetrics, type Metrics } from '../../src/http/metrics.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { BOB, startTestServer, type TestServer } from './http-test-app.ts';

const EXECUTOR = 'exe_test';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`attempts (${db.name})`, () => {
    let server: TestServer;
    let metrics: Metrics;
    beforeEach(async () => {
      metrics = createMetrics({ processMetrics: false });
      server = await startTestServer(db, { waitRecheckMs: 200, metrics });
    });
    afterEach(async () => {
      await server?.close();
    });

    async function createJob(route = 'summarize', key = `k-${Math.random()}`): Promise<string> {
      const res = await server.request('POST', '/v1/jobs', { key, body: { route, input: { q: 1 } } });
      expect(res.status).toBe(201);
      return res.body.id;
    }

    /** Claims the job's first attempt as an executor would and marks it running. */
    async function runFirstAttempt(jobId: string): Promise<{ id: string; leaseToken: string }> {
      const claimed = await server.store.claimWork({ leaseOwner: EXECUTOR, leaseMs: 60_000, limit: 10 });
      const mine = claimed.find((c) => c.job.id === jobId);
      expect(mine).toBeDefined();
      const attempt = mine!.attempt;
      expect(await server.store.markRunning({ ownerId: 'alice', attemptId: attempt.id, leaseOwner: EXECUTOR, leaseToken: attempt.leaseToken!, timeoutMs: 20_000 })).toBe(true);
      return { id: attempt.id, leaseToken: attempt.leaseToken! };
    }

    async function makeUnknown(jobId: string): Promise<string> {
      const a = await runFirstAttempt(jobId);
      const ok = await server.store.markUnknown({
        ownerId: 'alice', attemptId: a.id, leaseOwner: EXECUTOR, leaseToken: a.leaseToken,
        reason: { code: 'deadline_exceeded', message: 'no answer within 20000 ms' },
      });
      expect(ok).toBe(true);
      return a.id;
    }

    it('an attempt in doubt blocks a new one (409 attempt_in_doubt); resolving it failed moves the job on', async () => {
      const jobId = await createJob();
      const unknownId = await makeUnknown(jobId);
      const job = await server.request('GET', `/v1/jobs/${jobId}`);
      expect(job.body.state).toBe('unknown');
      expect(job.body.attempts).toMatchObject([{ id: unknownId, state: 'unknown', number: 1, provider: 'p1', job_id: jobId }]);

      // provider_unknown is checked first, then attempt_in_doubt.
      const unknownProvider = await server.request('POST', `/v1/jobs/${jobId}/attempts`, { body: { provider: 'nope' } });
      expect(unknownProvider.status).toBe(422);
      expect(unknownProvider.body.code).toBe('provider_unknown');
      for (const body of [undefined, { provider: 'p2' }]) {
        const blocked = await server.request('POST', `/v1/jobs/${jobId}/attempts`, { body });
        expect(blocked.status).toBe(409);
        expect(blocked.body).toMatchObject({ code: 'attempt_in_doubt', attempt_id: unknownId });
      }
      expect((await server.request('GET', `/v1/jobs/${jobId}/attempts`)).body.data).toHaveLength(1);

      // A long-poll on an unknown job answers at once.
      const t0 = Date.now();
      expect((await server.request('GET', `/v1/jobs/${jobId}?wait=30`)).body.state).toBe('unknown');
      expect(Date.now() - t0).toBeLessThan(5_000);

      // Bob cannot resolve Alice's attempt.
      const foreign = await server.request('POST', `/v1/attempts/${unknownId}/resolve`, { token: BOB, body: { state: 'failed' } });
      expect(foreign.status).toBe(404);
      expect(foreign.body.code).toBe('attempt_not_found');

      const resolved = await server.request('POST', `/v1/attempts/${unknownId}/resolve`, {
        body: { state: 'failed', error: { code: 'provider_said_no', message: 'checked the provider dashboard' } },
      });
      expect(resolved.status).toBe(200);
      expect(resolved.body).toMatchObject({ id: unknownId, state: 'failed', error: { code: 'provider_said_no', message: 'checked the provider dashboard' } });
      expect(typeof resolved.body.finished_at).toBe('string');
      // The job continues down its chain: a new attempt on the next provider.
      expect(resolved.body.job.id).toBe(jobId);
      expect(resolved.body.job.state).toBe('running');
      expect(resolved.body.job.attempts).toMatchObject([
        { id: unknownId, state: 'failed', provider: 'p1' },
        { number: 2, state: 'starting', provider: 'p2' },
      ]);

      // Resolving the same attempt again: 409 attempt_finished.
      const again = await server.request('POST', `/v1/attempts/${unknownId}/resolve`, { body: { state: 'cancelled' } });
      expect(again.status).toBe(409);
      expect(again.body.code).toBe('attempt_finished');

      // The new attempt failing too exhausts the chain: the job fails, no attempt can start.
      const second = resolved.body.job.attempts[1].id;
      const last = await server.request('POST', `/v1/attempts/${second}/resolve`, { body: { state: 'failed', error: 'HTTP 500 from the provider' } });
      expect(last.status).toBe(200);
      expect(last.body.error).toMatchObject({ code: 'resolved_failed', details: 'HTTP 500 from the provider' });
      expect(last.body.job.state).toBe('failed');
      const finished = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      expect(finished.status).toBe(409);
      expect(finished.body.code).toBe('job_finished');
    });

    it('a manual attempt on a queued job starts (201); a second one is in doubt; a running one blocks without a hedge', async () => {
      const jobId = await createJob();
      const first = await server.request('POST', `/v1/jobs/${jobId}/attempts`, { body: { provider: 'p2' } });
      expect(first.status).toBe(201);
      expect(first.body).toMatchObject({ job_id: jobId, number: 1, provider: 'p2', kind: 'manual', state: 'starting', finished_at: null, error: null });
      const second = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      expect(second.status).toBe(409);
      expect(second.body.code).toBe('attempt_in_doubt');

      const other = await createJob();
      await runFirstAttempt(other);
      const inFlight = await server.request('POST', `/v1/jobs/${other}/attempts`);
      expect(inFlight.status).toBe(409);
      expect(inFlight.body.code).toBe('attempt_in_flight');
    });

    it('resolving succeeded after another attempt won: the attempt is superseded, the job result unchanged', async () => {
      const jobId = await createJob('hedged');
      const primary = await runFirstAttempt(jobId);
      // The route allows a hedge beside the running primary.
      const hedge = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      expect(hedge.status).toBe(201);
      expect(hedge.body).toMatchObject({ provider: 'p2', number: 2, state: 'starting' });

      const win = await server.request('POST', `/v1/attempts/${hedge.body.id}/resolve`, { body: { state: 'succeeded', result: { answer: 'from the hedge', n: [1, 2.5] } } });
      expect(win.status).toBe(200);
      expect(win.body.state).toBe('succeeded');
      expect(win.body.job).toMatchObject({ state: 'succeeded', completed_by: hedge.body.id, result: { answer: 'from the hedge', n: [1, 2.5] } });
      const decided = await server.store.getJob('alice', jobId);

      const lost = await server.request('POST', `/v1/attempts/${primary.id}/resolve`, { body: { state: 'succeeded', result: { answer: 'late primary' } } });
      expect(lost.status).toBe(200);
      expect(lost.body.state).toBe('superseded');
      expect(lost.body.job).toMatchObject({ state: 'succeeded', completed_by: hedge.body.id, result: { answer: 'from the hedge', n: [1, 2.5] } });
      const after = await server.store.getJob('alice', jobId);
      expect(after?.result).toEqual(decided?.result);
      expect(after?.version).toBe(decided?.version);
      expect(after?.completedBy).toBe(hedge.body.id);
      expect(await metrics.racesLost.get()).toMatchObject({ values: [{ value: 1 }] });
    });

    it('a null result is stored exactly as given', async () => {
      const jobId = await createJob();
      const started = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      const res = await server.request('POST', `/v1/attempts/${started.body.id}/resolve`, { body: { state: 'succeeded', result: null } });
      expect(res.status).toBe(200);
      expect(res.body.job).toMatchObject({ state: 'succeeded', result: null, completed_by: started.body.id });
    });

    it('resolve body shape: 422 invalid_request', async () => {
      const jobId = await createJob();
      const started = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      for (const body of [{}, { state: 'done' }, { state: 'succeeded' }, { state: 'failed', result: 1 }, { state: 'cancelled', extra: 1 }, [], 'succeeded']) {
        const res = await server.request('POST', `/v1/attempts/${started.body.id}/resolve`, { body });
        expect(res.status, JSON.stringify(body)).toBe(422);
        expect(res.body.code).toBe('invalid_request');
      }
      expect((await server.store.getAttempt('alice', started.body.id))?.state).toBe('starting');
      const missing = await server.request('POST', '/v1/attempts/att_nope/resolve', { body: { state: 'cancelled' } });
      expect(missing.status).toBe(404);
    });

    it('cancel: 200 cancelled, then 409 job_finished; a later success is superseded', async () => {
      const jobId = await createJob();
      const running = await runFirstAttempt(jobId);
      const cancelled = await server.request('POST', `/v1/jobs/${jobId}/cancel`);
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toMatchObject({ id: jobId, state: 'cancelled', result: null });
      const again = await server.request('POST', `/v1/jobs/${jobId}/cancel`);
      expect(again.status).toBe(409);
      expect(again.body.code).toBe('job_finished');
      const late = await server.request('POST', `/v1/attempts/${running.id}/resolve`, { body: { state: 'succeeded', result: 'late' } });
      expect(late.status).toBe(200);
      expect(late.body.state).toBe('superseded');
      expect(late.body.job).toMatchObject({ state: 'cancelled', result: null });
    });

    it('GET ?wait returns as soon as the job settles (same process), or at the end of the wait', async () => {
      const jobId = await createJob();
      const t0 = Date.now();
      const timedOut = await server.request('GET', `/v1/jobs/${jobId}?wait=0.4`);
      expect(timedOut.status).toBe(200);
      expect(timedOut.body.state).toBe('queued');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(350);

      const waiting = server.request('GET', `/v1/jobs/${jobId}?wait=20`);
      await new Promise((r) => setTimeout(r, 150));
      const started = await server.request('POST', `/v1/jobs/${jobId}/attempts`);
      const t1 = Date.now();
      await server.request('POST', `/v1/attempts/${started.body.id}/resolve`, { body: { state: 'succeeded', result: 'done' } });
      const answered = await waiting;
      expect(answered.body).toMatchObject({ state: 'succeeded', result: 'done' });
      expect(Date.now() - t1).toBeLessThan(2_000);
    });

    it('GET ?wait notices a change made by another process (re-read fallback)', async () => {
      const jobId = await createJob();
      const other = await openStore(server.url);
      try {
        const waiting = server.request('GET', `/v1/jobs/${jobId}?wait=20`);
        await new Promise((r) => setTimeout(r, 150));
        const t1 = Date.now();
        await other.cancelJob('alice', jobId);
        const answered = await waiting;
        expect(answered.body.state).toBe('cancelled');
        expect(Date.now() - t1).toBeLessThan(3_000);
      } finally {
        await other.close();
      }
    });

    it('GET ?wait: invalid values are 400 invalid_request; a terminal job answers at once', async () => {
      const jobId = await createJob();
      for (const wait of ['-1', '61', 'abc', '']) {
        const res = await server.request('GET', `/v1/jobs/${jobId}?wait=${wait}`);
        if (wait === '') continue; // an empty value is no value
        expect(res.status, wait).toBe(400);
        expect(res.body.code).toBe('invalid_request');
      }
      await server.request('POST', `/v1/jobs/${jobId}/cancel`);
      const t0 = Date.now();
      expect((await server.request('GET', `/v1/jobs/${jobId}?wait=60`)).body.state).toBe('cancelled');
      expect(Date.now() - t0).toBeLessThan(2_000);
      expect((await server.request('GET', '/v1/jobs/job_missing?wait=5')).status).toBe(404);
    });

    it('GET /v1/jobs pages newest first with a cursor, filters by state, rejects bad parameters', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await createJob('summarize', `list-${i}`));
      await server.request('POST', `/v1/jobs/${ids[1]}/cancel`);
      await server.request('POST', '/v1/jobs', { token: BOB, key: 'bob-1', body: { route: 'summarize', input: 1 } });

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await server.request('GET', `/v1/jobs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(res.status).toBe(200);
        expect(res.body.data.length).toBeLessThanOrEqual(2);
        seen.push(...res.body.data.map((j: { id: string }) => j.id));
        cursor = res.body.next_cursor;
        pages++;
      } while (cursor !== null && pages < 10);
      expect(seen).toEqual([...ids].reverse());

      const cancelled = await server.request('GET', '/v1/jobs?state=cancelled');
      expect(cancelled.body.data.map((j: { id: string }) => j.id)).toEqual([ids[1]]);
      expect(cancelled.body.next_cursor).toBeNull();

      for (const query of ['limit=0', 'limit=201', 'limit=abc', 'state=done', 'cursor=garbage!!', 'other=1']) {
        const res = await server.request('GET', `/v1/jobs?${query}`);
        expect(res.status, query).toBe(400);
        expect(res.body.code).toBe('invalid_request');
      }
    });
  });
}
