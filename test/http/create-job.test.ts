/**
 * POST /v1/jobs over real HTTP, on SQLite and PostgreSQL: every row of the
 * contract's table, the double click, auth, and "a rejection changes nothing".
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { ALICE, BOB, startTestServer, type TestServer } from './http-test-app.ts';

const body = { route: 'summarize', input: { text: 'hello', options: { a: 1, b: [1, 2] } }, metadata: { user: 'u1' } };

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`POST /v1/jobs (${db.name})`, () => {
    let server: TestServer;
    let seq = 0;
    let key: string;
    beforeAll(async () => {
      server = await startTestServer(db);
    });
    afterAll(async () => {
      await server?.close();
    });
    beforeEach(() => {
      key = `key-${db.name}-${Date.now()}-${++seq}`;
    });

    /** Expects a problem document with `status` and `code`, and nothing stored for `key`. */
    async function expectRejected(res: { status: number; headers: Headers; body: any }, status: number, code: string, jobsBefore: number): Promise<void> {
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status, code, type: `urn:onejob:error:${code}` });
      expect(typeof res.body.title).toBe('string');
      expect(typeof res.body.detail).toBe('string');
      expect((await server.allJobs('alice')).length).toBe(jobsBefore);
      expect((await server.allJobs('alice')).some((j) => j.idempotencyKey === key)).toBe(false);
    }

    it('creates a job: 201, Location, the job in snake_case', async () => {
      const res = await server.request('POST', '/v1/jobs', { key, body });
      expect(res.status).toBe(201);
      expect(res.headers.get('location')).toBe(`/v1/jobs/${res.body.id}`);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(res.body).toMatchObject({
        idempotency_key: key,
        route: 'summarize',
        input: body.input,
        metadata: body.metadata,
        state: 'queued',
        version: 0,
        completed_by: null,
        result: null,
        error: null,
        attempts: [],
        skipped: [],
      });
      for (const field of ['id', 'created_at', 'updated_at']) expect(typeof res.body[field]).toBe('string');
      const read = await server.request('GET', `/v1/jobs/${res.body.id}`);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(res.body);
    });

    it('the double click: 50 concurrent POSTs, one 201, 49 replays, one id, one row', async () => {
      const before = (await server.allJobs('alice')).length;
      const responses = await Promise.all(Array.from({ length: 50 }, () => server.request('POST', '/v1/jobs', { key, body })));
      const statuses = responses.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(49);
      for (const r of responses) {
        if (r.status === 200) expect(r.headers.get('idempotent-replayed')).toBe('true');
      }
      expect(new Set(responses.map((r) => r.body.id)).size).toBe(1);
      const jobs = await server.allJobs('alice');
      expect(jobs.length).toBe(before + 1);
      expect(jobs.filter((j) => j.idempotencyKey === key)).toHaveLength(1);
    });

    it('same key, changed input: 409 idempotency_key_reused, the stored job untouched', async () => {
      const created = await server.request('POST', '/v1/jobs', { key, body });
      const stored = await server.store.getJob('alice', created.body.id);
      const before = (await server.allJobs('alice')).length;
      const res = await server.request('POST', '/v1/jobs', { key, body: { ...body, input: { text: 'changed' } } });
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'idempotency_key_reused', status: 409 });
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(await server.store.getJob('alice', created.body.id)).toEqual(stored);
      expect((await server.allJobs('alice')).length).toBe(before);
      // Changed metadata or route is a different body too.
      expect((await server.request('POST', '/v1/jobs', { key, body: { ...body, metadata: { user: 'u2' } } })).status).toBe(409);
      expect((await server.request('POST', '/v1/jobs', { key, body: { ...body, route: 'hedged' } })).status).toBe(409);
    });

    it('same input with keys in another order and other whitespace: a 200 replay', async () => {
      const created = await server.request('POST', '/v1/jobs', { key, body });
      const reordered = '{ "metadata": {"user":"u1"},\n  "input": {"options": {"b": [1, 2], "a": 1}, "text": "hello"},  "route": "summarize" }';
      const res = await server.request('POST', '/v1/jobs', { key, raw: reordered });
      expect(res.status).toBe(200);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
      expect(res.body.id).toBe(created.body.id);
    });

    it('the same key for two owners makes two jobs', async () => {
      const a = await server.request('POST', '/v1/jobs', { key, body, token: ALICE });
      const b = await server.request('POST', '/v1/jobs', { key, body, token: BOB });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(a.body.id).not.toBe(b.body.id);
    });

    it("another owner's job is 404, for every job route", async () => {
      const created = await server.request('POST', '/v1/jobs', { key, body });
      const id = created.body.id;
      for (const [method, path] of [
        ['GET', `/v1/jobs/${id}`],
        ['GET', `/v1/jobs/${id}/attempts`],
        ['POST', `/v1/jobs/${id}/attempts`],
        ['POST', `/v1/jobs/${id}/cancel`],
      ] as const) {
        const res = await server.request(method, path, { token: BOB });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.code).toBe('job_not_found');
      }
      expect((await server.request('GET', '/v1/jobs', { token: BOB })).body.data.some((j: { id: string }) => j.id === id)).toBe(false);
      expect((await server.store.getJob('alice', id))?.state).toBe('queued');
    });

    it('Idempotency-Key missing or empty: 400 idempotency_key_missing', async () => {
      const before = (await server.allJobs('alice')).length;
      await expectRejected(await server.request('POST', '/v1/jobs', { body }), 400, 'idempotency_key_missing', before);
      await expectRejected(await server.request('POST', '/v1/jobs', { body, headers: { 'idempotency-key': '' } }), 400, 'idempotency_key_missing', before);
    });

    it('Idempotency-Key malformed (space, non-ASCII, 256 characters): 400 idempotency_key_invalid', async () => {
      const before = (await server.allJobs('alice')).length;
      for (const bad of ['has space', 'tab\there', 'x'.repeat(256)]) {
        await expectRejected(await server.request('POST', '/v1/jobs', { body, headers: { 'idempotency-key': bad } }), 400, 'idempotency_key_invalid', before);
      }
      // fetch refuses non-Latin-1 header values; send raw Latin-1 bytes through inject instead.
      const res = await server.app.inject({
        method: 'POST',
        url: '/v1/jobs',
        headers: { authorization: `Bearer ${ALICE}`, 'idempotency-key': 'caf\u00e9', 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('idempotency_key_invalid');
      // 255 visible characters is fine.
      key = '!~'.repeat(127) + 'a';
      expect((await server.request('POST', '/v1/jobs', { key, body })).status).toBe(201);
    });

    it('no token or an unknown token: 401 unauthorized, before anything else', async () => {
      const before = (await server.allJobs('alice')).length;
      for (const token of [null, 'tok_nobody', `${ALICE}x`, ALICE.slice(0, -1)]) {
        await expectRejected(await server.request('POST', '/v1/jobs', { key, body, token }), 401, 'unauthorized', before);
        // Even with no key and a malformed body.
        const bad = await server.request('POST', '/v1/jobs', { raw: '{not json', token });
        expect(bad.status).toBe(401);
        expect(bad.body.code).toBe('unauthorized');
        expect(bad.headers.get('www-authenticate')).toBe('Bearer');
      }
      for (const auth of ['Basic dG9rOg==', `Bearer`, `Bearer  `, `${ALICE}`, `Token ${ALICE}`]) {
        const res = await server.request('GET', '/v1/jobs', { token: null, headers: { authorization: auth } });
        expect(res.status, auth).toBe(401);
      }
      // Reads too, and unknown /v1/ paths.
      expect((await server.request('GET', '/v1/jobs', { token: null })).status).toBe(401);
      expect((await server.request('GET', '/v1/nowhere', { token: null })).status).toBe(401);
      expect((await server.request('GET', '/v1/nowhere')).status).toBe(404);
    });

    it('no token with a 2 MiB body is still 401 (auth before the body limit)', async () => {
      const big = JSON.stringify({ route: 'summarize', input: 'x'.repeat(2 * 1024 * 1024) });
      const res = await server.request('POST', '/v1/jobs', { key, raw: big, token: null });
      expect(res.status).toBe(401);
    });

    it('unknown route: 422 route_unknown', async () => {
      const before = (await server.allJobs('alice')).length;
      const res = await server.request('POST', '/v1/jobs', { key, body: { ...body, route: 'nope' } });
      await expectRejected(res, 422, 'route_unknown', before);
      // Inherited object members are not routes.
      await expectRejected(await server.request('POST', '/v1/jobs', { key, body: { ...body, route: 'toString' } }), 422, 'route_unknown', before);
    });

    it('a 2 MiB body: 413 payload_too_large; the key stays unused', async () => {
      const before = (await server.allJobs('alice')).length;
      const big = JSON.stringify({ route: 'summarize', input: 'x'.repeat(2 * 1024 * 1024) });
      await expectRejected(await server.request('POST', '/v1/jobs', { key, raw: big }), 413, 'payload_too_large', before);
      expect((await server.request('POST', '/v1/jobs', { key, body })).status).toBe(201);
    });

    it('malformed JSON, not JSON, empty: 400 invalid_request', async () => {
      const before = (await server.allJobs('alice')).length;
      for (const raw of ['{', '{"route": "summarize", "input": 1,}', "{'route': 1}", 'NaN', '{"route":"summarize","input":1} trailing', '\uFEFF{}', '   ']) {
        await expectRejected(await server.request('POST', '/v1/jobs', { key, raw }), 400, 'invalid_request', before);
      }
      await expectRejected(await server.request('POST', '/v1/jobs', { key, raw: JSON.stringify(body), contentType: 'text/plain' }), 400, 'invalid_request', before);
      await expectRejected(await server.request('POST', '/v1/jobs', { key, raw: '{"route":"summarize","input":{"__proto__":{"x":1}}}' }), 400, 'invalid_request', before);
      // No body at all.
      await expectRejected(await server.request('POST', '/v1/jobs', { key }), 422, 'invalid_request', before);
    });

    it('wrong shape: 422 invalid_request naming the field', async () => {
      const before = (await server.allJobs('alice')).length;
      const cases: [unknown, string][] = [
        [{ route: 1, input: 1 }, 'route'],
        [{ input: 1 }, 'route'],
        [{ route: 'summarize' }, 'input'],
        [{ route: '', input: 1 }, 'route'],
        [{ route: 'summarize', input: 1, metadata: 'x' }, 'metadata'],
        [{ route: 'summarize', input: 1, metadata: [1] }, 'metadata'],
        [{ route: 'summarize', input: 1, extra: true }, 'extra'],
        [[1, 2], ''],
        ['just a string', ''],
        [null, ''],
      ];
      for (const [b, field] of cases) {
        const res = await server.request('POST', '/v1/jobs', { key, raw: JSON.stringify(b) });
        await expectRejected(res, 422, 'invalid_request', before);
        if (field !== '') expect(res.body.field, JSON.stringify(b)).toBe(field);
        if (field !== '') expect(res.body.detail).toContain(field);
      }
    });

    it('input may be any JSON value, including null', async () => {
      for (const input of [null, 0, 'text', [1, 'a', null], { deep: { deeper: [{}] } }]) {
        const res = await server.request('POST', '/v1/jobs', { key: `${key}-${JSON.stringify(input).length}-${typeof input}`, body: { route: 'summarize', input } });
        expect(res.status, JSON.stringify(input)).toBe(201);
        expect(res.body.input).toEqual(input);
      }
    });
  });
}
