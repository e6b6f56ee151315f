/**
 * POST /v1/chat/completions over real HTTP, on SQLite and PostgreSQL, with the
 * official `openai` SDK as the client (its retries and timeouts on), an
 * executor in-process, and fake providers speaking the OpenAI and Anthropic
 * wire protocols. The point throughout: however the SDK retries, the
 * provider runs once per intent (one Idempotency-Key).
 */
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics, type Metrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_chat_0123456789';
const OWNER = 'alice';
/** The server-side wait cap of this suite's app. */
const MAX_WAIT_MS = 2_000;
const messages = [{ role: 'user' as const, content: 'Summarize: the cat sat on the mat.' }];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`POST /v1/chat/completions with the openai SDK (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let openaiFake: FakeProvider;
    let fallbackFake: FakeProvider;
    let anthropicFake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let metrics: Metrics;
    let baseURL: string;
    /** Requests that reached onejob's chat endpoint, per Idempotency-Key. */
    const arrivals = new Map<string, number>();
    let seq = 0;
    let key: string;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [openaiFake, fallbackFake, anthropicFake] = await Promise.all([startFakeProvider(), startFakeProvider(), startFakeProvider()]);
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: {
          // Short deadline: a hang becomes unknown quickly.
          primary: { type: 'openai', baseUrl: `${openaiFake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 400 },
          // Same server, a patient deadline: slow answers still win.
          patient: { type: 'openai', baseUrl: `${openaiFake.url}/v1`, apiKey: 'k', model: 'gpt-patient', timeoutMs: 20_000 },
          fallback: { type: 'openai', baseUrl: `${fallbackFake.url}/v1`, apiKey: 'k', model: 'gpt-fallback', timeoutMs: 5_000 },
          claude: { type: 'anthropic', baseUrl: anthropicFake.url, apiKey: 'k', model: 'claude-fake', timeoutMs: 5_000 },
        },
        routes: {
          chat: { providers: ['primary', 'fallback'] },
          patient: { providers: ['patient'] },
          claude: { providers: ['claude'] },
        },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100, lateAnswerGraceMs: 1_000 });
      await executor.start();
      metrics = createMetrics({ processMetrics: false });
      app = buildApp({ store, config, metrics, executor, waitRecheckMs: 200, chatCompletions: { maxWaitMs: MAX_WAIT_MS, retryAfterMs: 100 } });
      // Counted as they arrive on the socket, before any hook (so 401s count too).
      app.server.on('request', (request: { url?: string; headers: Record<string, unknown> }) => {
        if (request.url !== '/v1/chat/completions') return;
        const k = String(request.headers['idempotency-key'] ?? '');
        arrivals.set(k, (arrivals.get(k) ?? 0) + 1);
      });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      baseURL = `http://127.0.0.1:${address.port}/v1`;
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await Promise.all([openaiFake?.close(), fallbackFake?.close(), anthropicFake?.close()]);
      await cleanup?.();
    });
    beforeEach(() => {
      for (const f of [openaiFake, fallbackFake, anthropicFake]) f.reset();
      key = `chat-${db.name}-${Date.now()}-${++seq}`;
    });

    function client(o: { maxRetries?: number; timeout?: number } = {}): OpenAI {
      return new OpenAI({ apiKey: TOKEN, baseURL, maxRetries: o.maxRetries ?? 2, timeout: o.timeout ?? 15_000 });
    }
    const withKey = (k: string) => ({ headers: { 'Idempotency-Key': k } });
    /** The error a promise rejects with (fails the test when it resolves). */
    async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
      const e = await p.then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(OpenAI.APIError);
      return e as InstanceType<typeof OpenAI.APIError>;
    }
    const jobsWithKey = async (k: string) => (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.filter((j) => j.idempotencyKey === k);

    it('a plain call answers the completion in OpenAI shape, with the job id', async () => {
      openaiFake.script([{ reply: 'A cat sat on a mat.', usage: { prompt_tokens: 12, completion_tokens: 7 } }]);
      const { data, response } = await client().chat.completions.create({ model: 'chat', messages, temperature: 0 }, withKey(key)).withResponse();
      const [job] = await jobsWithKey(key);
      expect(job).toBeDefined();
      expect(data).toMatchObject({
        id: `chatcmpl-${job!.id}`,
        object: 'chat.completion',
        model: 'gpt-fake',
        provider: 'primary',
        choices: [{ index: 0, message: { role: 'assistant', content: 'A cat sat on a mat.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
      });
      const finishedAt = job!.attempts[0]!.finishedAt!.getTime();
      expect(data.created).toBe(Math.floor(finishedAt / 1000));
      expect(response.status).toBe(200);
      expect(response.headers.get('onejob-job-id')).toBe(job!.id);
      expect(response.headers.get('idempotent-replayed')).toBeNull();
      // The job's input is the body without `model`; the provider got its own model.
      expect(job).toMatchObject({ route: 'chat', input: { messages, temperature: 0 }, state: 'succeeded' });
      expect(openaiFake.calls).toHaveLength(1);
      expect(openaiFake.calls[0]!.body).toMatchObject({ model: 'gpt-fake', messages, temperature: 0 });
      expect(arrivals.get(key)).toBe(1);
    });

    it('the same key and body again replays the stored completion without calling the provider', async () => {
      openaiFake.script([{ reply: 'first and only' }]);
      const first = await client().chat.completions.create({ model: 'chat', messages }, withKey(key));
      // The same body written in another key order is the same request.
      const { data, response } = await client()
        .chat.completions.create({ messages, model: 'chat' }, withKey(key))
        .withResponse();
      expect(data).toEqual(first);
      expect(response.status).toBe(200);
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      expect(openaiFake.calls).toHaveLength(1);
      expect(await jobsWithKey(key)).toHaveLength(1);
      // `route:<name>` names the same route, but it is another body: not this key's request.
      const other = await rejection(client().chat.completions.create({ model: 'route:chat', messages }, withKey(key)));
      expect(other.status).toBe(409);
    });

    it('the same key with another body: the SDK surfaces 409 idempotency_key_reused and does not retry it', async () => {
      openaiFake.script([{ reply: 'original' }]);
      await client().chat.completions.create({ model: 'chat', messages }, withKey(key));
      const before = arrivals.get(key);
      const err = await rejection(client({ maxRetries: 3 }).chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'something else' }] }, withKey(key)));
      expect(err).toBeInstanceOf(OpenAI.ConflictError);
      expect(err.status).toBe(409);
      expect(err.code).toBe('idempotency_key_reused');
      expect(err.message).toContain('already used with a different request');
      expect(err.headers?.get('x-should-retry')).toBe('false');
      expect(arrivals.get(key)).toBe(before! + 1);
      expect(openaiFake.calls).toHaveLength(1);
      const [job] = await jobsWithKey(key);
      expect(job!.result).toMatchObject({ content: 'original' });
    });

    it('20 concurrent duplicates: the provider is called once and every caller gets the same completion', async () => {
      openaiFake.script([{ gate: 'once', reply: 'computed once' }]);
      const sdk = client();
      const calls = Array.from({ length: 20 }, () => sdk.chat.completions.create({ model: 'chat', messages }, withKey(key)).withResponse());
      await openaiFake.waitForCalls(1);
      await waitUntil(() => (arrivals.get(key) ?? 0) >= 20);
      openaiFake.release('once');
      const answers = await Promise.all(calls);
      expect(new Set(answers.map((a) => JSON.stringify(a.data))).size).toBe(1);
      expect(answers[0]!.data.choices[0]!.message.content).toBe('computed once');
      expect(answers.filter((a) => a.response.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
      expect(openaiFake.calls).toHaveLength(1);
      expect(await jobsWithKey(key)).toHaveLength(1);
      expect(arrivals.get(key)).toBe(20);
    });

    it('a primary hanging past its deadline: 409 attempt_in_doubt after the SDK retries, and the provider was called once', async () => {
      openaiFake.script([{ hang: true }]);
      const err = await rejection(client({ maxRetries: 2 }).chat.completions.create({ model: 'chat', messages }, withKey(key)));
      const [job] = await jobsWithKey(key);
      expect(err.status).toBe(409);
      expect(err.code).toBe('attempt_in_doubt');
      expect(err.headers?.get('onejob-job-id')).toBe(job!.id);
      expect(err.headers?.get('retry-after')).toBe('1');
      expect(err.error).toMatchObject({ code: 'attempt_in_doubt', job_id: job!.id, attempt_id: job!.attempts[0]!.id });
      expect(arrivals.get(key)).toBe(3);
      expect(job).toMatchObject({ state: 'unknown' });
      expect(openaiFake.calls).toHaveLength(1);
      expect(fallbackFake.calls).toHaveLength(0);

      // Resolved from outside with a JSON value: the same key now answers it, as JSON text.
      await store.settleAttempt({
        ownerId: OWNER,
        attemptId: job!.attempts[0]!.id,
        outcome: { state: 'succeeded', result: { content: { summary: 'cat, mat' }, finish_reason: 'stop', model: 'gpt-fake', provider: 'primary', usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } } },
        actor: 'test',
      });
      const { data, response } = await client().chat.completions.create({ model: 'chat', messages }, withKey(key)).withResponse();
      expect(data.choices[0]!.message.content).toBe('{"summary":"cat, mat"}');
      expect(data.id).toBe(`chatcmpl-${job!.id}`);
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      expect(openaiFake.calls).toHaveLength(1);
    });

    it('a client-side SDK timeout and the SDK retries with the same key: one provider execution', async () => {
      openaiFake.script([{ delayMs: 1_500, reply: 'slow but sure' }]);
      const completion = await client({ timeout: 400, maxRetries: 5 }).chat.completions.create({ model: 'patient', messages }, withKey(key));
      expect(completion.choices[0]!.message.content).toBe('slow but sure');
      expect(completion.model).toBe('gpt-patient');
      expect(arrivals.get(key)).toBeGreaterThanOrEqual(2);
      expect(openaiFake.calls).toHaveLength(1);
      const [job] = await jobsWithKey(key);
      expect(job!.attempts).toHaveLength(1);
    });

    it('a wait that ends with the job still running: 409 attempt_in_flight with Retry-After; the same key later gets the answer', async () => {
      openaiFake.script([{ gate: 'slow', reply: 'worth the wait' }]);
      const started = Date.now();
      const err = await rejection(client({ maxRetries: 0 }).chat.completions.create({ model: 'patient', messages }, withKey(key)));
      expect(Date.now() - started).toBeGreaterThanOrEqual(MAX_WAIT_MS - 50);
      const [job] = await jobsWithKey(key);
      expect(err.status).toBe(409);
      expect(err.code).toBe('attempt_in_flight');
      expect(err.headers?.get('retry-after')).toBe('1');
      expect(err.headers?.get('onejob-job-id')).toBe(job!.id);
      openaiFake.release('slow');
      const completion = await client().chat.completions.create({ model: 'patient', messages }, withKey(key));
      expect(completion.choices[0]!.message.content).toBe('worth the wait');
      expect(openaiFake.calls).toHaveLength(1);
    });

    it('on shutdown a waiting request answers 409 attempt_in_flight at once; the job carries on', async () => {
      openaiFake.script([{ gate: 'shutdown', reply: 'after the restart' }]);
      const second = buildApp({ store, config: runtime.config, chatCompletions: { maxWaitMs: 60_000 } });
      await second.listen({ host: '127.0.0.1', port: 0 });
      const address = second.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      const pending = fetch(`http://127.0.0.1:${address.port}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'patient', messages }),
      });
      await openaiFake.waitForCalls(1);
      const started = Date.now();
      await second.close();
      const res = await pending;
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(res.status).toBe(409);
      expect(res.headers.get('retry-after')).toBe('1');
      const [job] = await jobsWithKey(key);
      expect(res.headers.get('onejob-job-id')).toBe(job!.id);
      expect(await res.json()).toMatchObject({ code: 'attempt_in_flight', job_id: job!.id });
      openaiFake.release('shutdown');
      const completion = await client().chat.completions.create({ model: 'patient', messages }, withKey(key));
      expect(completion.choices[0]!.message.content).toBe('after the restart');
      expect(openaiFake.calls).toHaveLength(1);
    });

    it('a provider 503 fails over: the fallback answers', async () => {
      openaiFake.script([{ status: 503 }]);
      fallbackFake.script([{ reply: 'from the fallback' }]);
      const { data, response } = await client().chat.completions.create({ model: 'route:chat', messages }, withKey(key)).withResponse();
      expect(data).toMatchObject({ model: 'gpt-fallback', provider: 'fallback', choices: [{ message: { content: 'from the fallback' } }] });
      const [job] = await jobsWithKey(key);
      expect(response.headers.get('onejob-job-id')).toBe(job!.id);
      expect(job!.attempts.map((a) => [a.provider, a.state])).toEqual([
        ['primary', 'failed'],
        ['fallback', 'succeeded'],
      ]);
      expect([openaiFake.calls.length, fallbackFake.calls.length, arrivals.get(key)]).toEqual([1, 1, 1]);
    });

    it('every provider failing definitely: 502 job_failed with the job error, not retried', async () => {
      openaiFake.script([{ status: 503 }]);
      fallbackFake.script([{ status: 429 }]);
      const err = await rejection(client({ maxRetries: 3 }).chat.completions.create({ model: 'chat', messages }, withKey(key)));
      const [job] = await jobsWithKey(key);
      expect(err).toBeInstanceOf(OpenAI.InternalServerError);
      expect(err.status).toBe(502);
      expect(err.code).toBe('job_failed');
      expect(err.headers?.get('onejob-job-id')).toBe(job!.id);
      expect(err.headers?.get('x-should-retry')).toBe('false');
      expect(job!.state).toBe('failed');
      expect(err.error).toMatchObject({ job_id: job!.id, job_error: { code: job!.error!.code } });
      expect(arrivals.get(key)).toBe(1);
      expect([openaiFake.calls.length, fallbackFake.calls.length]).toEqual([1, 1]);
      // The raw problem document carries the job error too.
      const raw = await fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat', messages }),
      });
      expect(raw.status).toBe(502);
      expect(raw.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await raw.json()).toMatchObject({ status: 502, code: 'job_failed', job_id: job!.id, job_error: job!.error });
    });

    it("an Anthropic provider's completion is reshaped to OpenAI's shape", async () => {
      anthropicFake.script([{ reply: 'Bonjour from Claude', usage: { prompt_tokens: 9, completion_tokens: 4 } }]);
      const completion = await client().chat.completions.create({ model: 'claude', messages, max_tokens: 64 }, withKey(key));
      expect(completion).toMatchObject({
        object: 'chat.completion',
        model: 'claude-fake',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Bonjour from Claude' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
      });
      expect(anthropicFake.calls).toHaveLength(1);
      expect(anthropicFake.calls[0]!.protocol).toBe('anthropic');
    });

    it('bad requests are refused like POST /v1/jobs, create nothing, and are not retried', async () => {
      const sdk = client({ maxRetries: 3 });
      // A streaming request is refused the same way, before any byte of a stream (CONTRACT §7).
      const stream = await rejection(sdk.chat.completions.create({ model: 'chat', messages, stream: true, n: 2 }, withKey(key)));
      expect([stream.status, stream.code]).toEqual([422, 'invalid_request']);
      expect(stream.message).toContain('must be 1');
      const unknown = await rejection(sdk.chat.completions.create({ model: 'gpt-4o', messages }, withKey(key)));
      expect([unknown.status, unknown.code]).toEqual([422, 'route_unknown']);
      const noMessages = await rejection(sdk.chat.completions.create({ model: 'chat' } as never, withKey(key)));
      expect([noMessages.status, noMessages.code]).toEqual([422, 'invalid_request']);
      // Content parts that are not parts (found by the chaos fuzzer: a 502 once a provider refused them).
      const badParts = await rejection(sdk.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: [null, 'text'] }] } as never, withKey(key)));
      expect([badParts.status, badParts.code]).toEqual([422, 'invalid_request']);
      const noKey = await rejection(sdk.chat.completions.create({ model: 'chat', messages }));
      expect([noKey.status, noKey.code]).toEqual([400, 'idempotency_key_missing']);
      const badToken = await rejection(new OpenAI({ apiKey: 'tok_nobody', baseURL, maxRetries: 3 }).chat.completions.create({ model: 'chat', messages }, withKey(key)));
      expect([badToken.status, badToken.code]).toEqual([401, 'unauthorized']);
      expect(arrivals.get(key)).toBe(5);
      expect(await jobsWithKey(key)).toHaveLength(0);
      expect(openaiFake.calls).toHaveLength(0);
      // The key was not used up.
      openaiFake.script([{ reply: 'now fine' }]);
      expect((await sdk.chat.completions.create({ model: 'chat', messages }, withKey(key))).choices[0]!.message.content).toBe('now fine');
    });

    it('counts chat requests by outcome and replay', async () => {
      openaiFake.script([{ reply: 'counted' }]);
      await client().chat.completions.create({ model: 'chat', messages }, withKey(key));
      await client().chat.completions.create({ model: 'chat', messages }, withKey(key));
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/onejob_chat_requests_total\{outcome="succeeded",replayed="false"\} [1-9]/);
      expect(text).toMatch(/onejob_chat_requests_total\{outcome="succeeded",replayed="true"\} [1-9]/);
    });
  });
}

/** Resolves once `pred` holds (polled; for counters outside the store). */
async function waitUntil(pred: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
