/**
 * A resume never starts work (CONTRACT §15), over real HTTP on SQLite and
 * PostgreSQL: a request with `Last-Event-ID` (or `GET /v1/responses/{id}?stream=true`)
 * that names no job of the owner answers `404 not_found` and creates
 * nothing; in keyless `fingerprint` mode a resume after `windowMs` follows the
 * job it was reading, never a second job or a second provider call.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_resume_never_starts_01';
const OWNER = 'alice';
const WINDOW_MS = 600;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/** The SSE events of a body: their `id:` and `data:` lines. */
function sseEvents(text: string): { id: string | null; data: string }[] {
  return text.split('\n\n').filter((e) => /^data: /m.test(e)).map((e) => ({
    id: /^id: (.*)$/m.exec(e)?.[1] ?? null,
    data: e.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n'),
  }));
}

/** The text a chat stream's chunks carry. */
function chatText(events: readonly { data: string }[]): string {
  return events.filter((e) => e.data !== '[DONE]')
    .map((e) => (JSON.parse(e.data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '').join('');
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`a resume never starts work (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let origin: string;
    let seq = 0;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        keyless: { mode: 'fingerprint', windowMs: WINDOW_MS },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 5_000, retryAfterMs: 100 } });
      origin = await listen(app);
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${origin}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const jobCount = async () => (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.length;
    const callsWith = (content: string) => fake.calls.filter((c) => JSON.stringify(c.body).includes(content)).length;

    it('a keyed resume naming no job answers 404 not_found on chat, messages and responses, and creates nothing', async () => {
      const content = `nothing here ${++seq}`;
      const before = await jobCount();
      const chat = await post('/v1/chat/completions', { model: 'chat', stream: true, messages: [{ role: 'user', content }] },
        { 'idempotency-key': `never-${db.name}-${seq}`, 'last-event-id': '1-3' });
      expect(chat.status).toBe(404);
      expect(((await chat.json()) as { code: string }).code).toBe('not_found');
      const messages = await post('/v1/messages', { model: 'chat', max_tokens: 50, stream: true, messages: [{ role: 'user', content }] },
        { 'idempotency-key': `never-m-${db.name}-${seq}`, 'last-event-id': '1-3' });
      expect(messages.status).toBe(404);
      const m = (await messages.json()) as { type: string; code: string };
      expect(m.type).toBe('error');
      expect(m.code).toBe('not_found');
      const responses = await post('/v1/responses', { model: 'chat', stream: true, input: content },
        { 'idempotency-key': `never-r-${db.name}-${seq}`, 'last-event-id': '1-3' });
      expect(responses.status).toBe(404);
      expect(((await responses.json()) as { code: string }).code).toBe('not_found');
      // Keyless too: a body never sent has no job to follow.
      const keyless = await post('/v1/chat/completions', { model: 'chat', stream: true, messages: [{ role: 'user', content }] }, { 'last-event-id': '1-1' });
      expect(keyless.status).toBe(404);
      expect(((await keyless.json()) as { code: string }).code).toBe('not_found');
      expect(await jobCount()).toBe(before);
      expect(callsWith(content)).toBe(0);
    });

    it('GET /v1/responses/{id}?stream=true naming no Response of the owner answers 404 not_found', async () => {
      const r = await fetch(`${origin}/v1/responses/resp_job_00000000000000000000000000?stream=true`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(r.status).toBe(404);
      expect(((await r.json()) as { code: string }).code).toBe('not_found');
    });

    it('a keyless chat resume after windowMs follows the job it was reading: no second job, no second provider call', async () => {
      const content = `keyless resume ${++seq}`;
      const chunks = ['One ', 'job, ', 'one ', 'call.'];
      fake.when({ contains: content }, { chunks });
      const body = { model: 'chat', stream: true, messages: [{ role: 'user', content }] };
      const first = await post('/v1/chat/completions', body);
      expect(first.status).toBe(200);
      const events = sseEvents(await first.text());
      expect(chatText(events)).toBe(chunks.join(''));
      const jobId = first.headers.get('onejob-job-id');
      const before = await jobCount();
      await new Promise((r) => setTimeout(r, WINDOW_MS + 300));
      // Past the window the same body would be a new job; as a resume it is the old one's stream after the cursor.
      const cursor = events[1]!.id!;
      const resumed = await post('/v1/chat/completions', body, { 'last-event-id': cursor });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('onejob-job-id')).toBe(jobId);
      expect(resumed.headers.get('idempotent-replayed')).toBe('true');
      const rest = sseEvents(await resumed.text());
      expect(rest.map((e) => e.id)).toEqual(events.slice(2).map((e) => e.id));
      expect(chatText(events.slice(0, 2)) + chatText(rest)).toBe(chunks.join(''));
      expect(await jobCount()).toBe(before);
      expect(callsWith(content)).toBe(1);
    });

    it('a keyless Responses resume after windowMs follows its job: no second job, no second provider call', async () => {
      const content = `keyless responses resume ${++seq}`;
      fake.when({ contains: content }, { chunks: ['Never ', 'twice.'] });
      const body = { model: 'chat', stream: true, input: content };
      const first = await post('/v1/responses', body);
      expect(first.status).toBe(200);
      const events = sseEvents(await first.text());
      const jobId = first.headers.get('onejob-job-id');
      const before = await jobCount();
      await new Promise((r) => setTimeout(r, WINDOW_MS + 300));
      const resumed = await post('/v1/responses', body, { 'last-event-id': events[2]!.id! });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('onejob-job-id')).toBe(jobId);
      expect(sseEvents(await resumed.text()).map((e) => e.id)).toEqual(events.slice(3).map((e) => e.id));
      expect(await jobCount()).toBe(before);
      expect(callsWith(content)).toBe(1);
    });

    it('a keyed resume follows its job as before', async () => {
      const content = `keyed resume ${++seq}`;
      fake.when({ contains: content }, { chunks: ['a ', 'b ', 'c'] });
      const body = { model: 'chat', stream: true, messages: [{ role: 'user', content }] };
      const key = `keyed-resume-${db.name}-${seq}`;
      const first = await post('/v1/chat/completions', body, { 'idempotency-key': key });
      const events = sseEvents(await first.text());
      const resumed = await post('/v1/chat/completions', body, { 'idempotency-key': key, 'last-event-id': events[0]!.id! });
      expect(resumed.status).toBe(200);
      expect(sseEvents(await resumed.text()).map((e) => e.id)).toEqual(events.slice(1).map((e) => e.id));
      // The same key with another body is still a reused key, resume or not.
      const other = await post('/v1/chat/completions', { ...body, messages: [{ role: 'user', content: 'other' }] }, { 'idempotency-key': key, 'last-event-id': '1-1' });
      expect(other.status).toBe(409);
      expect(((await other.json()) as { code: string }).code).toBe('idempotency_key_reused');
      expect(callsWith(content)).toBe(1);
    });
  });
}
