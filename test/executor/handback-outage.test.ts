/**
 * A fast-path create whose commit answer was lost at the start of a
 * database outage longer than the lease (issue #20 §2): the executor's
 * connection is cut right after the create commits, for longer than a short
 * lease; meanwhile another process's rescuer (a second store, connected
 * directly) calls the leased, never-sent attempt `unknown`. When the
 * connection returns, the executor hands the attempt back by its lease's
 * token (`Store.handBackUnsent`, from that `unknown` too) and runs it: the
 * job ends `succeeded`, one provider call, no attempt left `unknown`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../src/executor/executor.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';

const OWNER = 'alice';
const LEASE_MS = 1_000;

describe.skipIf(Boolean(postgresSkipReason()))('a create whose commit answer was lost, then the database away longer than the lease', () => {
  let db: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let proxy: FaultProxy;
  let direct: JobStore;
  let viaProxy: JobStore;
  let fake: FakeProvider;

  beforeAll(async () => {
    db = await createPostgresDatabase('onejob_handback');
    direct = await openStore(db.url, { poolSize: 4 });
    await direct.migrate();
    const u = new URL(db.url);
    proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    viaProxy = await openStore(proxy.via(db.url), { poolSize: 4 });
    fake = await startFakeProvider();
  }, 60_000);
  afterAll(async () => {
    await fake?.close();
    await viaProxy?.close();
    await direct?.close();
    await proxy?.close();
    await db?.drop();
  });

  it('the never-sent attempt, rescued to unknown meanwhile, is handed back by its token and run once: the job succeeds, nothing left in doubt', async () => {
    fake.script([{ reply: 'ran once' }]);
    const provider = createProvider('primary', { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 30_000 });
    const executor = new Executor({
      store: viaProxy, providers: new Map([['primary', provider]]), routes: { work: { hedgeAfterMs: null } },
      leaseMs: LEASE_MS, pollMs: 200, rescueEveryMs: 60_000, runningMarkDelayMs: 0, writeRetryBaseMs: 50,
    });
    executor.events.on('error', () => undefined);
    await executor.start();
    try {
      const lease = executor.leaseForNewWork('work');
      expect(lease).not.toBeNull();
      const created = await viaProxy.createJob({
        ownerId: OWNER, idempotencyKey: 'lost-create', route: 'work', input: { messages: [{ role: 'user', content: 'hello' }] },
        providers: ['primary'], firstAttempt: lease!,
      });
      const attemptId = created.claimed!.attempt.id;
      // The commit happened, its answer is lost: the executor's connection is cut now and stays down past the lease.
      proxy.refuse();
      proxy.cutAll();
      lease!.afterCreate({ error: Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }) }, OWNER);

      await new Promise((r) => setTimeout(r, LEASE_MS * 3));
      // Another process's rescuer finds the lease long expired: the attempt is called unknown.
      expect(await direct.rescueExpiredLeases()).toBe(1);
      expect(await direct.getJob(OWNER, created.job.id)).toMatchObject({ state: 'unknown', attempts: [{ id: attemptId, state: 'unknown', error: { code: 'lease_expired' } }] });
      await new Promise((r) => setTimeout(r, LEASE_MS * 2));
      expect(fake.calls).toHaveLength(0);

      proxy.heal();
      const deadline = Date.now() + 30_000;
      for (;;) {
        const job = await direct.getJob(OWNER, created.job.id);
        if (job?.state === 'succeeded') break;
        if (Date.now() > deadline) throw new Error(`the job did not succeed: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.error?.code]) })}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const job = (await direct.getJob(OWNER, created.job.id))!;
      expect(job.attempts.map((a) => [a.id, a.state])).toEqual([[attemptId, 'succeeded']]);
      expect(job.result).toMatchObject({ content: 'ran once' });
      const events = (await direct.listEvents(OWNER, job.id)).map((e) => e.type);
      expect(events.indexOf('attempt.unknown')).toBeLessThan(events.indexOf('attempt.handed_back'));
      expect(events.filter((t) => t === 'attempt.succeeded')).toHaveLength(1);
      expect(fake.calls).toHaveLength(1);
      expect(await direct.oldestUnknownAt()).toBeNull();
      // The client's retry with the same key gets the job, decided: no attempt in doubt.
      const replay = await direct.createJob({ ownerId: OWNER, idempotencyKey: 'lost-create', route: 'work', input: { messages: [{ role: 'user', content: 'hello' }] }, providers: ['primary'] });
      expect(replay).toMatchObject({ created: false, job: { state: 'succeeded' } });
    } finally {
      await executor.stop(1_000);
      await provider.close();
    }
  }, 60_000);
});
