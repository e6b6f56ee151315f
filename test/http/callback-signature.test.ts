/**
 * CONTRACT §15, the v4 callback signature, on SQLite and PostgreSQL:
 * `Onejob-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>">`,
 * `t` within 300 s of onejob's clock either way, each signature once (kept in
 * the database: another process refuses a reuse too); the v3 form (body
 * only) only when the body's id is the attempt's recorded
 * `provider_request_id`; an attempt with none recorded accepts only v4.
 * Anything else is 401 and changes nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import { Reconciler } from '../../src/executor/reconciler.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { callbackSignature } from '../../src/http/routes/callback-routes.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const SECRET = 'whsec_0123456789abcdef';
const INPUT = { prompt: 'render a fox' };
const now = () => Math.floor(Date.now() / 1000);

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`callback signatures (v4, v3) on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let config: OnejobConfig;
    let providers: Map<string, Provider>;
    const apps: FastifyInstance[] = [];

    async function app(): Promise<FastifyInstance> {
      const a = buildApp({ store, config, reconciler: new Reconciler({ store, providers }) });
      await a.ready();
      apps.push(a);
      return a;
    }

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      config = defineConfig({
        apiKeys: { tok_alice_0123456789: 'alice' },
        // Nothing listens there: a callback is the only news of these tasks.
        providers: { tasks: { type: 'task', baseUrl: 'http://127.0.0.1:9/v1/tasks', model: 'task', callbackSecret: SECRET } },
        routes: { r: { providers: ['tasks'] } },
      });
      providers = new Map(Object.entries(config.providers).map(([name, p]) => [name, createProvider(name, p as never)]));
    });
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((a) => a.close()));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await cleanup();
    });

    /** An attempt in doubt; `taskId` recorded when given (null: its create's answer, with the id, was lost). */
    async function inDoubt(key: string, taskId: string | null) {
      const lease = { leaseOwner: 'exe_gone', leaseMs: 30_000 };
      const { claimed } = await store.createJob({ ownerId: 'alice', idempotencyKey: key, route: 'r', input: INPUT, providers: ['tasks'], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { ownerId: 'alice', attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      if (taskId !== null) expect(await store.recordProviderRequestId({ ...fence, providerRequestId: taskId })).toBe(true);
      expect(await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
      return (await store.getAttempt('alice', a.id))!;
    }

    const call = (server: FastifyInstance, attemptId: string, body: string, signature: string) =>
      server.inject({ method: 'POST', url: `/v1/attempts/${attemptId}/callback`, headers: { 'content-type': 'application/json', 'onejob-signature': signature }, payload: body });

    /** The attempt and its job's events, to show that a refusal changed nothing. */
    const snapshot = async (attemptId: string, jobId: string) => ({ attempt: await store.getAttempt('alice', attemptId), events: (await store.listEvents('alice', jobId)).length });

    it('v4: accepted for the attempt it names; the task settles the doubt (resolved_by callback)', async () => {
      const server = await app();
      const a = await inDoubt('v4-ok', null);
      const body = JSON.stringify({ id: 'task_42', status: 'succeeded', output: { url: 'https://cdn.example/fox.png' } });
      const res = await call(server, a.id, body, callbackSignature(body, SECRET, a.id));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ state: 'succeeded', resolved_by: 'callback', provider_request_id: 'task_42' });
      expect(await store.getJob('alice', a.jobId)).toMatchObject({ state: 'succeeded', result: { content: { url: 'https://cdn.example/fox.png' } } });
    });

    it('v4: a signature made for one attempt is 401 on another (no task id recorded there), and changes nothing', async () => {
      const server = await app();
      const a = await inDoubt('victim', null);
      const b = await inDoubt('signed-for', 'task_b');
      const body = JSON.stringify({ id: 'task_b', status: 'succeeded', output: 'b\'s render' });
      const before = await snapshot(a.id, a.jobId);
      const replayed = await call(server, a.id, body, callbackSignature(body, SECRET, b.id));
      expect(replayed.statusCode).toBe(401);
      expect(replayed.json()).toMatchObject({ code: 'unauthorized' });
      expect(await snapshot(a.id, a.jobId)).toEqual(before);
    });

    it('v4: each signature once, in every process (a reuse is 401 and changes nothing)', async () => {
      const [one, other] = [await app(), await app()];
      const a = await inDoubt('once', 'task_once');
      const running = JSON.stringify({ id: 'task_once', status: 'processing' });
      const t0 = now();
      const signature = callbackSignature(running, SECRET, a.id, t0);
      expect((await call(one, a.id, running, signature)).statusCode).toBe(200);
      const before = await snapshot(a.id, a.jobId);
      const again = await call(one, a.id, running, signature);
      expect(again.statusCode).toBe(401);
      expect(again.json().detail).toMatch(/used before/);
      expect((await call(other, a.id, running, signature)).statusCode).toBe(401);
      // The same delivery signed anew (another t) is a new signature.
      // (t0 - 1, not now() - 1: on a slow run now() - 1 can be t0 itself, the same signature.)
      expect((await call(other, a.id, running, callbackSignature(running, SECRET, a.id, t0 - 1))).statusCode).toBe(200);
      expect(await snapshot(a.id, a.jobId)).toEqual(before);
    });

    it('v4: t more than 300 s from onejob\'s clock either way is 401 and changes nothing; within it, accepted', async () => {
      const server = await app();
      const a = await inDoubt('window', null);
      const body = JSON.stringify({ id: 'task_w', status: 'failed', error: 'out of credits' });
      const before = await snapshot(a.id, a.jobId);
      for (const t of [now() - 302, now() + 305, 0]) {
        const res = await call(server, a.id, body, callbackSignature(body, SECRET, a.id, t));
        expect(res.statusCode).toBe(401);
        expect(await snapshot(a.id, a.jobId)).toEqual(before);
      }
      const ok = await call(server, a.id, body, callbackSignature(body, SECRET, a.id, now() - 290));
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toMatchObject({ state: 'failed', resolved_by: 'callback', error: { code: 'provider_task_failed' } });
    });

    it('v3 (body only): accepted only when the body\'s id is the recorded provider_request_id; with none recorded, only v4', async () => {
      const server = await app();
      const none = await inDoubt('v3-none', null);
      const body = JSON.stringify({ id: 'task_any', status: 'succeeded', output: 'anything ever signed' });
      const before = await snapshot(none.id, none.jobId);
      const refused = await call(server, none.id, body, callbackSignature(body, SECRET));
      expect(refused.statusCode).toBe(401);
      expect(await snapshot(none.id, none.jobId)).toEqual(before);

      const recorded = await inDoubt('v3-recorded', 'task_mine');
      const other = JSON.stringify({ id: 'task_theirs', status: 'succeeded', output: 'not mine' });
      expect((await call(server, recorded.id, other, callbackSignature(other, SECRET))).statusCode).toBe(401);
      const mine = JSON.stringify({ id: 'task_mine', status: 'succeeded', output: 'mine' });
      const ok = await call(server, recorded.id, mine, callbackSignature(mine, SECRET));
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toMatchObject({ state: 'succeeded', resolved_by: 'callback' });
    });

    it('malformed signatures are refused before the body is read', async () => {
      const server = await app();
      const a = await inDoubt('malformed', null);
      const body = JSON.stringify({ id: 'task_m', status: 'succeeded', output: 'x' });
      const good = callbackSignature(body, SECRET, a.id);
      for (const signature of ['', `v1=${good.split('v1=')[1]}`, good.replace('t=', 't=-'), `${good},v1=${'0'.repeat(64)}`, 'sha256=abc']) {
        expect((await call(server, a.id, body, signature)).statusCode).toBe(401);
      }
      expect((await store.getAttempt('alice', a.id))!.state).toBe('unknown');
    });

    it('used signatures are deleted once their window has passed', async () => {
      const past = new Date(Date.now() - 1_000);
      const later = new Date(Date.now() + 600_000);
      expect(await store.useCallbackSignature({ signature: 'a'.repeat(64), attemptId: 'att_1', expiresAt: past })).toBe(true);
      expect(await store.useCallbackSignature({ signature: 'b'.repeat(64), attemptId: 'att_1', expiresAt: later })).toBe(true);
      expect(await store.useCallbackSignature({ signature: 'b'.repeat(64), attemptId: 'att_1', expiresAt: later })).toBe(false);
      // The expired one went with the second insert: its key is free again.
      expect(await store.useCallbackSignature({ signature: 'a'.repeat(64), attemptId: 'att_1', expiresAt: later })).toBe(true);
    });
  });
}
