/**
 * A content-policy refusal is an answer, not a fault (issue 35), over real
 * HTTP on SQLite and PostgreSQL: on a route with `"passThrough":
 * ["content_filter"]`, a provider's 400 with a content-filter code ends the
 * job with that refusal (no failover) and is answered as the provider's
 * error in each protocol's shape (chat completions, messages, responses, the
 * job's error on POST /v1/jobs); without the setting the job fails over as
 * before.
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

const TOKEN = 'tok_alice_pass_through_0123456';
const REFUSAL = { status: 400, error: { type: 'invalid_request_error', code: 'content_filter', message: 'The prompt was flagged by the content policy.' } };

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`passThrough content_filter (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let fallback: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let origin: string;
    let seq = 0;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [primary, fallback] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      const config = defineConfig({
        apiKeys: { [TOKEN]: 'alice' },
        providers: {
          primary: { type: 'openai', baseUrl: `${primary.url}/v1`, apiKey: 'k', model: 'gpt-a', timeoutMs: 5_000 },
          fallback: { type: 'openai', baseUrl: `${fallback.url}/v1`, apiKey: 'k', model: 'gpt-b', timeoutMs: 5_000 },
        },
        routes: {
          guarded: { providers: ['primary', 'fallback'], passThrough: ['content_filter'] },
          plain: { providers: ['primary', 'fallback'] },
        },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 5_000, retryAfterMs: 100 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      origin = `http://127.0.0.1:${address.port}`;
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await Promise.all([primary?.close(), fallback?.close()]);
      await cleanup?.();
    });

    const post = (path: string, body: unknown) => fetch(`${origin}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': `pt-${db.name}-${++seq}` },
      body: JSON.stringify(body),
    });
    const fallbackCalls = (content: string) => fallback.calls.filter((c) => JSON.stringify(c.body).includes(content)).length;

    it('chat completions: the refusal is answered as a 400 content_filter in OpenAI\'s error shape; no failover', async () => {
      const content = `refuse chat ${seq}`;
      primary.when({ contains: content }, REFUSAL);
      const r = await post('/v1/chat/completions', { model: 'guarded', messages: [{ role: 'user', content }] });
      expect(r.status).toBe(400);
      const body = (await r.json()) as { code: string; error: { code: string; message: string }; job_id: string };
      expect(body.code).toBe('content_filter');
      expect(body.error.code).toBe('content_filter');
      expect(body.error.message).toContain('The prompt was flagged by the content policy.');
      expect(fallbackCalls(content)).toBe(0);
      const job = await store.getJob('alice', r.headers.get('onejob-job-id')!);
      expect(job).toMatchObject({ state: 'failed', error: { code: 'content_filter' } });
      expect(job!.attempts).toHaveLength(1);
    });

    it('messages: Anthropic\'s error body, type invalid_request_error, code content_filter', async () => {
      const content = `refuse messages ${seq}`;
      primary.when({ contains: content }, REFUSAL);
      const r = await post('/v1/messages', { model: 'guarded', max_tokens: 50, messages: [{ role: 'user', content }] });
      expect(r.status).toBe(400);
      expect(await r.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' }, code: 'content_filter' });
      expect(fallbackCalls(content)).toBe(0);
    });

    it('responses: a 400 content_filter with the OpenAI error member', async () => {
      const content = `refuse responses ${seq}`;
      primary.when({ contains: content }, REFUSAL);
      const r = await post('/v1/responses', { model: 'guarded', input: content });
      expect(r.status).toBe(400);
      expect(await r.json()).toMatchObject({ code: 'content_filter', error: { code: 'content_filter' } });
      expect(fallbackCalls(content)).toBe(0);
    });

    it('POST /v1/jobs: the job fails with the refusal as its error (code content_filter, the provider\'s details)', async () => {
      const content = `refuse job ${seq}`;
      primary.when({ contains: content }, REFUSAL);
      const created = await post('/v1/jobs', { route: 'guarded', input: { messages: [{ role: 'user', content }] } });
      const { id } = (await created.json()) as { id: string };
      const r = await fetch(`${origin}/v1/jobs/${id}?wait=5`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const job = (await r.json()) as { state: string; error: { code: string; message: string; details: Record<string, unknown> }; attempts: unknown[] };
      expect(job.state).toBe('failed');
      expect(job.error.code).toBe('content_filter');
      expect(job.error.details).toMatchObject({ status: 400, provider: 'primary', provider_error_code: 'content_filter', pass_through: 'content_filter' });
      expect(job.attempts).toHaveLength(1);
      expect(fallbackCalls(content)).toBe(0);
    });

    it('without passThrough the same refusal fails over, as before; another 400 fails over even with it', async () => {
      const content = `refuse plain ${seq}`;
      primary.when({ contains: content }, REFUSAL);
      const r = await post('/v1/chat/completions', { model: 'plain', messages: [{ role: 'user', content }] });
      expect(r.status).toBe(200);
      expect(fallbackCalls(content)).toBe(1);
      const other = `other 400 ${seq}`;
      primary.when({ contains: other }, { status: 400, error: { type: 'invalid_request_error', code: 'context_length_exceeded', message: 'too long' } });
      const o = await post('/v1/chat/completions', { model: 'guarded', messages: [{ role: 'user', content: other }] });
      expect(o.status).toBe(200);
      expect(fallbackCalls(other)).toBe(1);
    });
  });
}
