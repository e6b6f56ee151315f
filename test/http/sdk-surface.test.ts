/**
 * What the official SDKs see around the gateway endpoints (CONTRACT §3, §12,
 * §13), over real sockets on both engines: `GET /v1/models`, 404s an SDK can
 * read, unknown /v1/ paths authenticated first, a percent-encoded path
 * authenticated like the plain one, and `stream` as delivery, not intent.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { FastifyInstance } from 'fastify';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_sdk_surface_0123';
const OWNER = 'alice';
const messages = [{ role: 'user' as const, content: 'Say something.' }];

/** A request with the path sent exactly as written (no URL normalisation, as `curl --path-as-is`). */
function rawRequest(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the SDKs' view of the gateway (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let app: FastifyInstance;
    let origin: string;
    let key: string;
    let seq = 0;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-x', timeoutMs: 10_000 } },
        routes: { chat: { providers: ['primary'] }, summarize: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      const executor = runtime.createExecutor({ pollMs: 100 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      origin = `http://127.0.0.1:${address.port}`;
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });
    beforeEach(() => {
      fake.reset();
      key = `sdk-${db.name}-${Date.now()}-${++seq}`;
    });

    const openai = () => new OpenAI({ apiKey: TOKEN, baseURL: `${origin}/v1`, maxRetries: 0, timeout: 15_000 });
    const jobsOfKey = async (k: string) => (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.filter((j) => j.idempotencyKey === k);

    it('models.list() names the routes; models.retrieve() one of them, and an unknown one is a 404 the SDK shows', async () => {
      const list = await openai().models.list();
      expect(list.data.map((m) => m.id)).toEqual(['chat', 'summarize']);
      expect(list.data[0]).toMatchObject({ object: 'model', owned_by: 'onejob' });
      expect(typeof list.data[0]!.created).toBe('number');
      expect(await openai().models.retrieve('summarize')).toMatchObject({ id: 'summarize', object: 'model' });
      const err = await openai().models.retrieve('nope').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).message).toMatch(/no route named "nope"/);
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('not_found');
    });

    it('an unknown /v1/ path: 404 not_found with an OpenAI error member; without a token 401 first', async () => {
      const r = await fetch(`${origin}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
      expect(r.status).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const body = (await r.json()) as { code: string; error: { message: string; code: string; type: string } };
      expect(body.code).toBe('not_found');
      expect(body.error).toMatchObject({ code: 'not_found', type: 'not_found' });
      expect(body.error.message).toMatch(/no route POST \/v1\/embeddings/);
      const err = await openai().embeddings.create({ model: 'chat', input: 'x' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as Error).message).toMatch(/no route POST \/v1\/embeddings/);
      const anonymous = await fetch(`${origin}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(anonymous.status).toBe(401);
      expect(((await anonymous.json()) as { code: string }).code).toBe('unauthorized');
      // Outside /v1/ a 404 stays a plain problem document.
      const outside = await fetch(`${origin}/nothing-here`);
      expect(outside.status).toBe(404);
      expect(((await outside.json()) as { error?: unknown }).error).toBeUndefined();
    });

    it("an unknown path under /v1/messages answers Anthropic's error body, which the Anthropic SDK shows", async () => {
      const client = new Anthropic({ apiKey: TOKEN, baseURL: origin, maxRetries: 0 });
      const err = await client.messages.countTokens({ model: 'chat', messages }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      expect((err as Error).message).toMatch(/no route POST \/v1\/messages\/count_tokens/);
      const r = await fetch(`${origin}/v1/messages/count_tokens`, { method: 'POST', headers: { 'x-api-key': TOKEN, 'content-type': 'application/json' }, body: '{}' });
      expect(r.status).toBe(404);
      expect(await r.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' }, code: 'not_found' });
    });

    it('a percent-encoded /v1/ path is authenticated like the plain one: 401, nothing created, no provider called', async () => {
      const body = JSON.stringify({ model: 'chat', messages });
      for (const path of ['/%761/jobs', '/v%31/jobs', '/%76%31/chat/completions', '/%761/chat/completions', '/v1/%63hat/completions']) {
        const method = path.endsWith('jobs') ? 'GET' : 'POST';
        const r = await rawRequest(origin, method, path, { 'idempotency-key': key }, method === 'POST' ? body : undefined);
        expect({ path, status: r.status }).toEqual({ path, status: 401 });
        expect(JSON.parse(r.body)).toMatchObject({ code: 'unauthorized' });
      }
      expect(fake.calls).toHaveLength(0);
      expect(await jobsOfKey(key)).toHaveLength(0);
      // With the token, the encoded spelling reaches the same route.
      const ok = await rawRequest(origin, 'GET', '/%761/jobs', { authorization: `Bearer ${TOKEN}` });
      expect(ok.status).toBe(200);
    });

    it('stream is delivery: a streamed duplicate of a plain request replays the same job (no 409, one provider call), and the reverse', async () => {
      fake.script([{ reply: 'One answer.' }]);
      const first = await openai().chat.completions.create({ model: 'chat', messages }, { headers: { 'Idempotency-Key': key } }).withResponse();
      expect(first.data.choices[0]!.message.content).toBe('One answer.');
      const { data: stream, response } = await openai()
        .chat.completions.create({ model: 'chat', messages, stream: true, stream_options: { include_usage: true } }, { headers: { 'Idempotency-Key': key } })
        .withResponse();
      expect(response.status).toBe(200);
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).toBe('One answer.');
      expect(fake.calls).toHaveLength(1);
      expect(await jobsOfKey(key)).toHaveLength(1);

      const key2 = `${key}-reverse`;
      fake.script([{ reply: 'Streamed first.', chunks: ['Streamed ', 'first.'] }]);
      let streamed = '';
      for await (const chunk of await openai().chat.completions.create({ model: 'chat', messages, stream: true }, { headers: { 'Idempotency-Key': key2 } })) {
        streamed += chunk.choices[0]?.delta.content ?? '';
      }
      const plain = await openai().chat.completions.create({ model: 'chat', messages }, { headers: { 'Idempotency-Key': key2 } }).withResponse();
      expect(plain.response.headers.get('idempotent-replayed')).toBe('true');
      expect(plain.data.choices[0]!.message.content).toBe(streamed);
      expect(fake.calls).toHaveLength(2);
      expect(await jobsOfKey(key2)).toHaveLength(1);
      // Another question under the same key is still a reused key.
      const reused = await openai()
        .chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'Something else.' }], stream: true }, { headers: { 'Idempotency-Key': key2 } })
        .catch((e: unknown) => e);
      expect(reused).toBeInstanceOf(OpenAI.ConflictError);
      expect((reused as InstanceType<typeof OpenAI.ConflictError>).code).toBe('idempotency_key_reused');
    });
  });
}
