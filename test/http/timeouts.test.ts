/**
 * Timeouts named for what they bound (CONTRACT §11), over real sockets on
 * SQLite and PostgreSQL: the HTTP API and an in-process executor from the
 * config, fake providers over HTTP.
 *
 * - `timeoutMs` bounds a non-streamed attempt's answer (`deadline_exceeded`)
 *   and a stream's first output; a stream that keeps sending is never cut,
 *   however long it runs;
 * - `idleTimeoutMs` bounds the silence between a stream's events after its
 *   first output (`stream_stalled`, an `event: error` to the client);
 * - `deadline_at` is the deadline in force: to the answer, or to a stream's
 *   first output; null once a stream's output flows;
 * - a provider's `retry` from the config file retries a 429 with
 *   `Retry-After` where it happened, visible in the API.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { StreamHub } from '../../src/executor/stream-hub.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_timeouts_0123456789';
const OWNER = 'alice';
const messages = [{ role: 'user' as const, content: 'Tell me a long story.' }];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`timeouts named for what they bound (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let upstream: FakeProvider;
    let fallbackFake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let base: string;
    /** An API without the executor and its hub: another process. */
    let apiOnly: FastifyInstance;
    let apiOnlyBase: string;
    let seq = 0;
    let key: string;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [upstream, fallbackFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      const url = `${upstream.url}/v1`;
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: {
          // A short deadline, a generous idle bound: a long stream must outlast timeoutMs and still succeed.
          steady: { type: 'openai', baseUrl: url, apiKey: 'k', model: 'gpt-steady', timeoutMs: 300, idleTimeoutMs: 3_000 },
          // A long deadline, a short idle bound: a stall is noticed by the idle bound, not the deadline.
          stalling: { type: 'openai', baseUrl: url, apiKey: 'k', model: 'gpt-stall', timeoutMs: 10_000, idleTimeoutMs: 400 },
          slow: { type: 'openai', baseUrl: url, apiKey: 'k', model: 'gpt-slow', timeoutMs: 300 },
          limited: { type: 'openai', baseUrl: url, apiKey: 'k', model: 'gpt-limited', timeoutMs: 5_000, retry: { attempts: 2, maxWaitMs: 3_000 } },
          fallback: { type: 'openai', baseUrl: `${fallbackFake.url}/v1`, apiKey: 'k', model: 'gpt-fallback', timeoutMs: 5_000 },
        },
        routes: {
          steady: { providers: ['steady', 'fallback'] },
          stalling: { providers: ['stalling', 'fallback'] },
          slow: { providers: ['slow', 'fallback'] },
          limited: { providers: ['limited', 'fallback'] },
        },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100, lateAnswerGraceMs: 60_000 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 15_000, retryAfterMs: 100, keepAliveMs: 50 } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      base = `http://127.0.0.1:${address.port}`;
      apiOnly = buildApp({ store, config, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 15_000, retryAfterMs: 100, keepAliveMs: 50, streamHub: new StreamHub() } });
      await apiOnly.listen({ host: '127.0.0.1', port: 0 });
      apiOnlyBase = `http://127.0.0.1:${(apiOnly.server.address() as { port: number }).port}`;
    });
    afterAll(async () => {
      await app?.close();
      await apiOnly?.close();
      await runtime?.close(100);
      await Promise.all([upstream?.close(), fallbackFake?.close()]);
      await cleanup?.();
    });
    beforeEach(() => {
      upstream.reset();
      fallbackFake.reset();
      key = `timeouts-${db.name}-${Date.now()}-${++seq}`;
    });

    const headers = (k: string) => ({ authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': k });
    const chat = (route: string, signal?: AbortSignal) =>
      fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: headers(key), body: JSON.stringify({ model: route, messages, stream: true }), ...(signal ? { signal } : {}) });
    const api = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      return res.json() as Promise<any>;
    };
    /** The job of key `k` (one at most), or null before it exists. */
    const jobOf = async (k: string) => {
      const jobs = (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.filter((j) => j.idempotencyKey === k);
      expect(jobs.length).toBeLessThanOrEqual(1);
      return jobs[0] === undefined ? null : (await store.getJob(OWNER, jobs[0].id))!;
    };
    async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
      for (let i = 0; i < 600; i++) {
        const v = await read();
        if (ok(v)) return v;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('condition never held');
    }
    /** The SSE events of a whole response body, comments left out. */
    const eventsOf = (text: string) => text.split('\n\n').filter((e) => e.trim() !== '' && !e.startsWith(':')).map((e) => e.replace(/^id: [^\n]*\n/, '')); // CONTRACT §13: every event has an id
    /** The SSE ids of a whole response body's events, in order (null for an event without one). */
    const idsOf = (text: string) => text.split('\n\n').filter((e) => e.trim() !== '' && !e.startsWith(':')).map((e) => /^id: ([^\n]*)$/m.exec(e)?.[1] ?? null);
    const contentOf = (events: readonly string[]) =>
      events
        .filter((e) => e.startsWith('data: {'))
        .map((e) => (JSON.parse(e.slice('data: '.length)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '')
        .join('');

    it('a stream that sends a chunk every 100 ms for far longer than timeoutMs is not cut: it succeeds', async () => {
      const chunks = Array.from({ length: 12 }, (_, i) => `piece${i} `);
      upstream.script([{ chunks, chunkDelayMs: 100 }]);
      const res = await chat('steady');
      expect(res.status).toBe(200);
      const events = eventsOf(await res.text());
      expect(events.at(-1)).toBe('data: [DONE]');
      expect(events.some((e) => e.startsWith('event: error'))).toBe(false);
      expect(contentOf(events)).toBe(chunks.join(''));
      const job = (await until(() => jobOf(key), (j) => j?.state === 'succeeded'))!;
      expect(job.attempts.map((a) => [a.provider, a.state, a.error])).toEqual([['steady', 'succeeded', null]]);
      // It really outlasted timeoutMs (300 ms): eleven pauses of 100 ms between its events.
      const call = upstream.calls[0]!;
      expect(Date.parse(call.finishedAt!) - Date.parse(call.receivedAt)).toBeGreaterThanOrEqual(1_100);
      expect(fallbackFake.calls).toHaveLength(0);
    });

    it('deadline_at is the deadline in force: to the first output while none came, none once the output flows', async () => {
      upstream.script([{ chunks: ['first ', 'second'], gate: `start-${key}`, streamGate: { afterChunks: 1, gate: `more-${key}` } }]);
      const res = chat('stalling');
      const running = (await until(() => jobOf(key), (j) => j?.attempts[0]?.state === 'running'))!;
      const before = (await api(`/v1/jobs/${running.id}/attempts`)).data[0];
      expect(before.state).toBe('running');
      // Before the first output: the deadline to it, timeoutMs (10 s) after the running mark.
      expect(Date.parse(before.deadline_at) - Date.parse(before.started_at)).toBeGreaterThanOrEqual(10_000);
      upstream.release(`start-${key}`);
      await until(() => store.listEvents(OWNER, running.id), (events) => events.some((e) => e.type === 'attempt.stream_claimed'));
      const during = (await api(`/v1/jobs/${running.id}/attempts`)).data[0];
      expect(during).toMatchObject({ state: 'running', deadline_at: null });
      upstream.release(`more-${key}`);
      expect((await (await res).text()).endsWith('data: [DONE]\n\n')).toBe(true);
      expect((await until(() => jobOf(key), (j) => j?.state === "succeeded"))!.attempts[0]!.deadlineAt).toBeNull();
    });

    it('a stream that stalls after its first chunk ends unknown with stream_stalled after idleTimeoutMs, and an event: error to the client', async () => {
      upstream.script([{ chunks: ['the ', 'rest ', 'never ', 'comes'], streamGate: { afterChunks: 1, gate: `never-${key}` } }]);
      const res = await chat('stalling');
      expect(res.status).toBe(200);
      const events = eventsOf(await res.text());
      expect(contentOf(events)).toBe('the ');
      expect(events).not.toContain('data: [DONE]');
      const last = events.at(-1)!;
      expect(last.startsWith('event: error\ndata: ')).toBe(true);
      const data = JSON.parse(last.slice('event: error\ndata: '.length)) as { error: { code: string; message: string; job_id: string } };
      const job = (await until(() => jobOf(key), (j) => j?.state === 'unknown'))!;
      expect(data.error).toMatchObject({ code: 'stream_stalled', job_id: job.id });
      expect(job.attempts).toHaveLength(1);
      expect(job.attempts[0]).toMatchObject({ provider: 'stalling', state: 'unknown', error: { code: 'stream_stalled', details: { idle_timeout_ms: 400 } } });
      // The stalled request was stopped upstream; nothing else was tried (the outcome is in doubt).
      await until(async () => upstream.calls[0]!.finishedAt, (f) => f !== null);
      expect(fallbackFake.calls).toHaveLength(0);
      const body = (await api(`/v1/jobs/${job.id}`)) as { state: string; attempts: { error: { code: string } }[] };
      expect(body.state).toBe('unknown');
      expect(body.attempts[0]!.error.code).toBe('stream_stalled');
    });

    it('/v1/responses: a client that lost a stream before its error and retrieves it with starting_after gets that error, numbered after its cursor', async () => {
      upstream.script([{ chunks: ['the ', 'rest ', 'never ', 'comes'], streamGate: { afterChunks: 1, gate: `never-${key}` } }]);
      const res = await fetch(`${base}/v1/responses`, { method: 'POST', headers: headers(key), body: JSON.stringify({ model: 'stalling', input: 'Tell me.', stream: true }) });
      expect(res.status).toBe(200);
      const text = await res.text();
      const data = eventsOf(text).map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)) as { type: string; sequence_number: number; code?: string; response?: { id: string } });
      expect(data.at(-1)).toMatchObject({ type: 'error', code: 'stream_stalled' });
      const ids = idsOf(text);
      expect(ids.every((id) => id?.startsWith('1-'))).toBe(true);
      const job = (await until(() => jobOf(key), (j) => j?.state === 'unknown'))!;
      await until(async () => (await store.readStreamBatches(OWNER, job.id, 1, 0)).some((b) => b.events.includes('"end"')), (x) => x);
      // The client had every event but the error; it retrieves the rest by position, on this API and on another process's.
      const before = data.at(-2)!.sequence_number;
      for (const at of [base, apiOnlyBase]) {
        const again = await fetch(`${at}/v1/responses/${data[0]!.response!.id}?stream=true&starting_after=${before}`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(again.status).toBe(200);
        const rest = await again.text();
        expect(idsOf(rest)).toEqual([ids.at(-1)]);
        expect(JSON.parse(eventsOf(rest)[0]!.slice(eventsOf(rest)[0]!.indexOf('data: ') + 6))).toMatchObject({ type: 'error', sequence_number: before + 1, code: 'stream_stalled' });
      }
    });

    it('a stream with no output within timeoutMs is unknown deadline_exceeded (the first output is what timeoutMs bounds)', async () => {
      upstream.script([{ gate: `never-${key}`, chunks: ['late'] }]);
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST', headers: headers(key), body: JSON.stringify({ model: 'steady', messages, stream: true }),
      });
      const job = (await until(() => jobOf(key), (j) => j?.state === 'unknown'))!;
      expect(job.attempts[0]).toMatchObject({ provider: 'steady', state: 'unknown', error: { code: 'deadline_exceeded', details: { timeout_ms: 300 } } });
      expect([200, 409]).toContain(res.status);
      await res.body?.cancel();
    });

    it.each([
      // chat and messages open with their first content: only the error event is sent (before, /v1/messages got chat's shape)
      ['/v1/chat/completions', { messages }, 1, { error: { code: 'attempt_in_doubt' } }],
      ['/v1/messages', { max_tokens: 64, messages }, 1, { type: 'error', error: { type: 'api_error', code: 'attempt_in_doubt' } }],
      // a Responses stream opens at once (response.created, response.in_progress), every event numbered in order
      ['/v1/responses', { input: 'Tell me a long story.' }, 3, { type: 'error', sequence_number: 2, code: 'attempt_in_doubt', error: { code: 'attempt_in_doubt' } }],
    ])('%s on an API of another process: a job that went unknown before any output, after keep-alives, ends with the protocol\'s own error event', async (path, body, count, expected) => {
      upstream.script([{ gate: `never-${key}`, chunks: ['late'] }]);
      // No executor and a hub of its own: no stream event ever reaches this API, only the job's change.
      const res = await fetch(`${apiOnlyBase}${path}`, { method: 'POST', headers: headers(key), body: JSON.stringify({ model: 'steady', stream: true, ...body }) });
      // Keep-alives (every 50 ms) committed the stream before the 300 ms deadline: the doubt can only be told inside it.
      expect(res.status).toBe(200);
      const text = await res.text();
      const events = eventsOf(text);
      expect(events).toHaveLength(count);
      // CONTRACT §13: every event has an id; no attempt's stream began, so they are numbered as the stream of none (0)
      // (and on /v1/responses id 0-n carries sequence_number n - 1, as every Responses stream's ids do).
      expect(idsOf(text)).toEqual(Array.from({ length: count }, (_, i) => `0-${i + 1}`));
      const last = events.at(-1)!;
      expect(last.startsWith('event: error\ndata: ')).toBe(true);
      expect(JSON.parse(last.slice('event: error\ndata: '.length))).toMatchObject(expected);
      if (path === '/v1/responses') {
        expect(events.map((e) => (JSON.parse(e.slice(e.indexOf('data: ') + 6)) as { sequence_number: number }).sequence_number)).toEqual([0, 1, 2]);
      }
      expect((await jobOf(key))!.state).toBe('unknown');
      if (path === '/v1/responses') {
        // Retrieved as a stream now: the job's ending events, numbered as the stream of none, the same way.
        const responseId = (JSON.parse(events[0]!.slice(events[0]!.indexOf('data: ') + 6)) as { response: { id: string } }).response.id;
        const retrieved = await fetch(`${apiOnlyBase}/v1/responses/${responseId}?stream=true`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(retrieved.status).toBe(200);
        expect(idsOf(await retrieved.text())).toEqual(['0-1', '0-2', '0-3']);
      }
      if (path !== '/v1/chat/completions') return;
      // Resolved by hand, then resumed after the error: the cursor 0-1 names no attempt's stream, so the resume gets the
      // result whole, numbered as the winner's stream (a cursor read as "attempt 0" would wait for a stream that never comes).
      const job = (await jobOf(key))!;
      const resolved = await fetch(`${apiOnlyBase}/v1/attempts/${job.attempts[0]!.id}/resolve`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'succeeded', result: { content: 'settled by hand', finish_reason: 'stop', model: 'm', provider: 'p', usage: null, tool_calls: null } }),
      });
      expect(resolved.status).toBe(200);
      const resumed = await fetch(`${apiOnlyBase}${path}`, {
        method: 'POST', headers: { ...headers(key), 'last-event-id': '0-1' }, body: JSON.stringify({ model: 'steady', stream: true, ...body }),
      });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('idempotent-replayed')).toBe('true');
      const again = await resumed.text();
      expect(idsOf(again).every((id) => id?.startsWith('1-'))).toBe(true);
      const content = eventsOf(again).filter((e) => e.startsWith('data: {')).map((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '').join('');
      expect(content).toBe('settled by hand');
      expect(eventsOf(again).at(-1)).toBe('data: [DONE]');
    });

    it('a non-streamed answer that comes after timeoutMs: the attempt is unknown with deadline_exceeded, its deadline_at shown', async () => {
      upstream.script([{ hang: true }]);
      const created = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: headers(key), body: JSON.stringify({ route: 'slow', input: { messages } }) });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const job = (await api(`/v1/jobs/${id}?wait=10`)) as { state: string; attempts: { state: string; error: { code: string }; started_at: string; deadline_at: string }[] };
      expect(job.state).toBe('unknown');
      expect(job.attempts).toHaveLength(1);
      expect(job.attempts[0]).toMatchObject({ state: 'unknown', error: { code: 'deadline_exceeded' } });
      const a = job.attempts[0]!;
      expect(Date.parse(a.deadline_at) - Date.parse(a.started_at)).toBeGreaterThanOrEqual(300);
      expect(fallbackFake.calls).toHaveLength(0);
    });

    it('a provider retry from the config: a 429 with Retry-After: 1 becomes attempt 2 on the same provider, visible in the API', async () => {
      upstream.script([{ status: 429, headers: { 'retry-after': '1' } }, { reply: 'after the wait' }]);
      const created = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: headers(key), body: JSON.stringify({ route: 'limited', input: { messages } }) });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const job = await until(() => api(`/v1/jobs/${id}`), (j) => j.state === 'succeeded');
      expect(job.attempts.map((a: { number: number; provider: string; state: string }) => [a.number, a.provider, a.state])).toEqual([
        [1, 'limited', 'failed'],
        [2, 'limited', 'succeeded'],
      ]);
      expect(job.attempts[0].error).toMatchObject({ code: 'provider_rate_limited', details: { status: 429, retry_after_ms: 1_000 } });
      expect(job.result).toMatchObject({ content: 'after the wait', provider: 'limited' });
      expect(fallbackFake.calls).toHaveLength(0);
    });

    it('a streamed request whose attempt got a 429 with Retry-After: the client keeps waiting and receives the retry\'s stream', async () => {
      upstream.script([{ status: 429, headers: { 'retry-after': '1' } }, { chunks: ['after ', 'the ', 'wait'] }]);
      const res = await chat('limited');
      expect(res.status).toBe(200);
      const events = eventsOf(await res.text());
      expect(events.at(-1)).toBe('data: [DONE]');
      expect(contentOf(events)).toBe('after the wait');
      const job = (await until(() => jobOf(key), (j) => j?.state === 'succeeded'))!;
      expect(job.attempts.map((a) => [a.number, a.provider, a.state])).toEqual([[1, 'limited', 'failed'], [2, 'limited', 'succeeded']]);
      expect(fallbackFake.calls).toHaveLength(0);
    });
  });
}
