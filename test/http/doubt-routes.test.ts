/**
 * CONTRACT §11 over HTTP, on SQLite and PostgreSQL: `POST
 * /v1/attempts/{id}/check`, the signed task callback (the one /v1/ route that
 * authenticates by signature), `resolved_by` and `reason` on a resolve, and
 * the attempt body's `provider_request_id`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { defineConfig } from '../../src/config/config.ts';
import { Reconciler } from '../../src/executor/reconciler.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { callbackSignature } from '../../src/http/routes/callback-routes.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const ALICE = 'tok_alice_0123456789';
const BOB = 'tok_bob_0123456789';
const SECRET = 'whsec_0123456789abcdef';
const INPUT = { messages: [{ role: 'user', content: 'render a fox' }] };

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`doubt routes on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let app: FastifyInstance;
    let providers: Map<string, Provider>;

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [ALICE]: 'alice', [BOB]: 'bob' },
        providers: {
          tasks: { type: 'task', baseUrl: `${fake.url}/v1/tasks`, model: 'task', callbackSecret: SECRET },
          plain: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm' },
          settled: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm', maxDurationMs: 60_000, settleUnknownAfterMs: 600_000 },
        },
        routes: { r: { providers: ['tasks', 'plain'] } },
      });
      providers = new Map(Object.entries(config.providers).map(([name, p]) => [name, createProvider(name, p as never)]));
      app = buildApp({ store, config, reconciler: new Reconciler({ store, providers }) });
      await app.ready();
    });
    afterEach(async () => {
      await app.close();
      await Promise.all([...providers.values()].map((p) => p.close()));
      await fake.close();
      await cleanup();
    });

    /** A job whose first attempt was sent to `provider` and is now `unknown`; for tasks, the fake holds its task. */
    async function inDoubt(key: string, provider: 'tasks' | 'plain' | 'settled', task?: { runMs?: number; status?: 'succeeded' | 'failed' }, service: FakeProvider = fake) {
      const lease = { leaseOwner: 'exe_gone', leaseMs: 30_000 };
      const { claimed } = await store.createJob({ ownerId: 'alice', idempotencyKey: key, route: 'r', input: { messages: [{ role: 'user', content: `render a fox for ${key}` }] }, providers: [provider, 'plain'], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { ownerId: 'alice', attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      if (provider === 'tasks') {
        // What the executor sent (Idempotency-Key: the attempt id), its id recorded; then the executor went away.
        service.script([{ task: { output: { frames: 24 }, ...task } }]);
        const created = await fetch(`${service.url}/v1/tasks`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': a.id }, body: JSON.stringify({ input: INPUT }) });
        const body = (await created.json()) as { id: string };
        expect(await store.recordProviderRequestId({ ...fence, providerRequestId: body.id })).toBe(true);
      }
      expect(await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
      return (await store.getAttempt('alice', a.id))!;
    }

    const post = (url: string, o: { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {}) =>
      app.inject({
        method: 'POST', url,
        headers: {
          ...(o.token === null ? {} : { authorization: `Bearer ${o.token ?? ALICE}` }),
          ...(o.body !== undefined || o.raw !== undefined ? { 'content-type': 'application/json' } : {}),
          ...o.headers,
        },
        ...(o.raw !== undefined ? { payload: o.raw } : o.body !== undefined ? { payload: JSON.stringify(o.body) } : {}),
      });

    it('check: asks the provider now; a found output is resolved_by lookup; the attempt body shows provider_request_id', async () => {
      const a = await inDoubt('c1', 'tasks');
      const res = await post(`/v1/attempts/${a.id}/check`);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ id: a.id, state: 'succeeded', resolved_by: 'lookup', provider_request_id: 'task_fake_1', lookup: { outcome: 'succeeded' } });
      expect(body.job).toMatchObject({ state: 'succeeded', result: { content: { frames: 24 } } });
      expect(fake.tasks[0]!.submits).toBe(1);
      // No longer in doubt: 409.
      expect((await post(`/v1/attempts/${a.id}/check`)).json()).toMatchObject({ code: 'attempt_finished' });
    });

    it('check: still running changes nothing; 422 lookup_unsupported without a lookup; 404 for another owner', async () => {
      const a = await inDoubt('c2', 'tasks', { runMs: 60_000 });
      const res = await post(`/v1/attempts/${a.id}/check`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ state: 'unknown', resolved_by: null, lookup: { outcome: 'running' } });
      expect((await post(`/v1/attempts/${a.id}/check`, { token: BOB })).statusCode).toBe(404);
      const p = await inDoubt('c3', 'plain');
      const refused = await post(`/v1/attempts/${p.id}/check`);
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toMatchObject({ code: 'lookup_unsupported' });
    });

    const get = (url: string, token = ALICE) => app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });

    it('GET /v1/doubt: every attempt in doubt of an open job, oldest first, with its key, route, input line, provider id and whether it can be asked', async () => {
      const t = await inDoubt('q-task', 'tasks', { runMs: 60_000 });
      const p = await inDoubt('q-plain', 'plain');
      const s = await inDoubt('q-policy', 'settled');
      const gone = await inDoubt('q-cancelled', 'plain');
      await store.cancelJob('alice', gone.jobId); // its job is terminal: the attempt blocks nothing, and is not listed
      const res = await get('/v1/doubt');
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.next_cursor).toBeNull();
      expect(body.data.map((r: any) => r.id)).toEqual([t.id, p.id, s.id]);
      const [task, plain, policy] = body.data;
      expect(task).toMatchObject({
        job_id: t.jobId, provider: 'tasks', state: 'unknown', provider_request_id: 'task_fake_1', can_check: true, settles_at: null,
        error: { code: 'deadline_exceeded' }, last_checked_at: null,
        job: { id: t.jobId, idempotency_key: 'q-task', route: 'r', state: 'unknown', input_line: 'render a fox for q-task' },
      });
      // Before the first ask the next check is its due time: about a second after the doubt began.
      const due = Date.parse(task.next_check_at) - Date.parse(task.unknown_at);
      expect(due).toBe(1_000);
      expect(plain).toMatchObject({ provider: 'plain', can_check: false, next_check_at: null, settles_at: null, provider_request_id: null });
      expect(policy).toMatchObject({ provider: 'settled', can_check: false, next_check_at: null });
      // What would make each askable: the provider type and the setting (a policy only where none is set).
      expect(task.ask_hint).toBeNull();
      expect(plain.ask_hint).toContain('set "lookup": "stored-completions" on provider plain (type openai)');
      expect(plain.ask_hint).toContain('type "openai-responses"');
      expect(plain.ask_hint).toContain('"settleUnknownAfterMs"');
      expect(policy.ask_hint).toContain('set "lookup": "stored-completions" on provider settled (type openai)');
      expect(policy.ask_hint).not.toContain('settleUnknownAfterMs');
      expect(Date.parse(policy.settles_at) - Date.parse(policy.started_at)).toBe(600_000);
      // After a lookup that found nothing definite, the last and next check are the reconciler's.
      const reconciler = new Reconciler({ store, providers, firstCheckMs: 1, everyMs: 1_000 });
      await new Promise((r) => setTimeout(r, 20));
      expect(await reconciler.runOnce()).toBe(2); // the task asked, the policy's attempt not yet due to settle
      const after = (await get('/v1/doubt')).json().data[0];
      expect(after.id).toBe(t.id);
      expect(after.last_checked_at).not.toBeNull();
      expect(Date.parse(after.next_check_at)).toBeGreaterThan(Date.parse(after.last_checked_at));
      // Another owner sees none of it; a resolved attempt leaves the queue.
      expect((await get('/v1/doubt', BOB)).json()).toEqual({ data: [], next_cursor: null });
      await post(`/v1/attempts/${p.id}/resolve`, { body: { state: 'failed', reason: 'not in the console' } });
      const left = (await get('/v1/doubt')).json().data.map((r: any) => r.id);
      expect(left).not.toContain(p.id);
      expect(left).toContain(t.id);
    });

    it('GET /v1/doubt pages with a cursor, oldest first, without repeats; a foreign cursor is 400', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await inDoubt(`page-${i}`, 'plain')).id);
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let n = 0; n < 10; n++) {
        const res = await get(`/v1/doubt?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.statusCode).toBe(200);
        const page = res.json();
        seen.push(...page.data.map((r: any) => r.id));
        expect(page.data.length).toBeLessThanOrEqual(2);
        cursor = page.next_cursor;
        if (cursor === null) break;
      }
      expect(seen).toEqual(ids);
      const bad = await get(`/v1/doubt?cursor=${Buffer.from('[1,"x"]').toString('base64url')}`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json()).toMatchObject({ code: 'invalid_request' });
      expect((await get('/v1/doubt?limit=0')).statusCode).toBe(400);
    });

    it('/metrics: the age of the oldest doubt, and doubt resolved by resolved_by', async () => {
      const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(await scrape()).toMatch(/^onejob_oldest_doubt_age_seconds 0$/m);
      const a = await inDoubt('m1', 'plain');
      await new Promise((r) => setTimeout(r, 50));
      const age = Number(/^onejob_oldest_doubt_age_seconds (\S+)$/m.exec(await scrape())?.[1]);
      expect(age).toBeGreaterThan(0);
      await post(`/v1/attempts/${a.id}/resolve`, { body: { state: 'cancelled' } });
      const after = await scrape();
      expect(after).toMatch(/^onejob_doubt_resolved_total\{resolved_by="operator"\} 1$/m);
      expect(after).toMatch(/^onejob_doubt_resolution_seconds_count\{resolved_by="operator"\} 1$/m);
      expect(after).toMatch(/^onejob_oldest_doubt_age_seconds 0$/m);
    });

    it('resolve: resolved_by operator, the reason kept on the attempt event', async () => {
      const a = await inDoubt('r1', 'plain');
      const res = await post(`/v1/attempts/${a.id}/resolve`, { body: { state: 'failed', reason: 'not in the provider console' } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ state: 'failed', resolved_by: 'operator' });
      const events = await store.listEvents('alice', a.jobId);
      expect(events.find((e) => e.type === 'attempt.failed')?.data).toMatchObject({ reason: 'not in the provider console', resolved_by: 'operator', actor: 'api' });
    });

    it('callback: the fake task service calls back when the task ends, signed; the doubt ends resolved_by callback', async () => {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address() as { port: number };
      const service = await startFakeProvider({ taskCallback: { url: `http://127.0.0.1:${address.port}/v1/attempts/{attempt}/callback`, secret: SECRET } });
      try {
        const a = await inDoubt('cb-fake', 'tasks', { runMs: 1_000 }, service);
        // Until the service has its answer (the attempt is settled just before the callback's response leaves).
        for (let i = 0; i < 500 && (service.callbacks[0]?.answered ?? null) === null; i++) await new Promise((r) => setTimeout(r, 20));
        const after = await store.getAttempt('alice', a.id);
        expect({ state: after!.state, resolvedBy: after!.resolvedBy, callbacks: service.callbacks }).toEqual({
          state: 'succeeded', resolvedBy: 'callback', callbacks: [{ taskId: 'task_fake_1', status: 'succeeded', answered: 200 }],
        });
      } finally {
        await service.close();
      }
    });

    it('callback: 401 without a signature, with a token instead, with a bad one, or on another spelling of the path', async () => {
      const a = await inDoubt('cb1', 'tasks', { runMs: 60_000 });
      const body = JSON.stringify({ id: 'task_fake_1', status: 'succeeded', output: 'forged' });
      const url = `/v1/attempts/${a.id}/callback`;
      const unsigned = await post(url, { raw: body, token: null });
      expect(unsigned.statusCode).toBe(401);
      expect(unsigned.json()).toMatchObject({ code: 'unauthorized' });
      expect((await post(url, { raw: body })).statusCode).toBe(401); // a token does not replace the signature
      expect((await post(url, { raw: body, token: null, headers: { 'onejob-signature': callbackSignature(body, 'another secret of 16+') } })).statusCode).toBe(401);
      expect((await post(url, { raw: body, token: null, headers: { 'onejob-signature': callbackSignature(`${body} `, SECRET) } })).statusCode).toBe(401); // other bytes
      expect((await post(`/%761/attempts/${a.id}/callback`, { raw: body, token: null })).statusCode).toBe(401);
      expect((await post(`/v1/attempts/att_nope/callback`, { raw: body, token: null, headers: { 'onejob-signature': callbackSignature(body, SECRET) } })).statusCode).toBe(401);
      expect((await store.getAttempt('alice', a.id))!.state).toBe('unknown');
    });

    it('callback: a good signature applies the task as a lookup would (running: nothing; succeeded: resolved_by callback)', async () => {
      const a = await inDoubt('cb2', 'tasks', { runMs: 60_000 });
      const url = `/v1/attempts/${a.id}/callback`;
      const running = JSON.stringify({ id: 'task_fake_1', status: 'processing' });
      const r1 = await post(url, { raw: running, token: null, headers: { 'onejob-signature': callbackSignature(running, SECRET) } });
      expect(r1.statusCode).toBe(200);
      expect(r1.json()).toMatchObject({ state: 'unknown', resolved_by: null });
      const other = JSON.stringify({ id: 'task_other', status: 'succeeded', output: 'x' });
      const mismatched = await post(url, { raw: other, token: null, headers: { 'onejob-signature': callbackSignature(other, SECRET, a.id) } });
      expect(mismatched.json()).toMatchObject({ code: 'invalid_request' });
      // A body-only (v3) signature about another task than the recorded one is not even accepted (CONTRACT §15).
      expect((await post(url, { raw: other, token: null, headers: { 'onejob-signature': callbackSignature(other, SECRET) } })).statusCode).toBe(401);
      const done = JSON.stringify({ id: 'task_fake_1', status: 'succeeded', output: { url: 'https://cdn.example/fox.png' } });
      const r2 = await post(url, { raw: done, token: null, headers: { 'onejob-signature': callbackSignature(done, SECRET) } });
      expect(r2.statusCode).toBe(200);
      expect(r2.json()).toMatchObject({ state: 'succeeded', resolved_by: 'callback' });
      const job = await store.getJob('alice', a.jobId);
      expect(job).toMatchObject({ state: 'succeeded', result: { content: { url: 'https://cdn.example/fox.png' } } });
      // Once decided, a callback moves nothing.
      const late = JSON.stringify({ id: 'task_fake_1', status: 'failed' });
      const r3 = await post(url, { raw: late, token: null, headers: { 'onejob-signature': callbackSignature(late, SECRET) } });
      expect(r3.json()).toMatchObject({ state: 'succeeded' });
    });
  });
}
