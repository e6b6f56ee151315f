/**
 * `stream: true` on POST /v1/chat/completions (CONTRACT §7) over real sockets,
 * on SQLite and PostgreSQL: the official `openai` SDK as the client, an
 * executor in-process streaming from fake providers, and a second API app
 * with its own stream hub standing for another process.
 */
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { StreamHub } from '../../src/executor/stream-hub.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_stream_0123456789';
const OWNER = 'alice';
const messages = [{ role: 'user' as const, content: 'Tell me about streams.' }];
const SCHEMA = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

/** An SSE event without its `id:` line (CONTRACT §13: every event has one). */
const withoutId = (e: string): string => e.replace(/^id: [^\n]*\n/, '');

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}/v1`;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`streaming chat completions (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primaryFake: FakeProvider;
    let fallbackFake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    /** An API without the executor's hub: another process. */
    let apiOnly: FastifyInstance;
    let baseURL: string;
    let apiOnlyURL: string;
    let seq = 0;
    let key: string;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [primaryFake, fallbackFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: {
          primary: { type: 'openai', baseUrl: `${primaryFake.url}/v1`, apiKey: 'k', model: 'gpt-primary', timeoutMs: 10_000 },
          fallback: { type: 'openai', baseUrl: `${fallbackFake.url}/v1`, apiKey: 'k', model: 'gpt-fallback', timeoutMs: 10_000 },
        },
        routes: {
          chat: { providers: ['primary', 'fallback'] },
          json: { providers: ['primary'], contract: 'summary' },
          hedged: { providers: ['primary', 'fallback'], hedgeAfterMs: 100 },
        },
        contracts: { summary: { outputSchema: SCHEMA, samples: 1, cases: [{ name: 'one', input: { messages } }] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100, keepAliveMs: 50 } });
      apiOnly = buildApp({ store, config, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100, streamHub: new StreamHub() } });
      baseURL = await listen(app);
      apiOnlyURL = await listen(apiOnly);
    });
    afterAll(async () => {
      await app?.close();
      await apiOnly?.close();
      await runtime?.close(100);
      await Promise.all([primaryFake?.close(), fallbackFake?.close()]);
      await cleanup?.();
    });
    beforeEach(() => {
      primaryFake.reset();
      fallbackFake.reset();
      key = `stream-${db.name}-${Date.now()}-${++seq}`;
    });

    const client = (url = baseURL, maxRetries = 0) => new OpenAI({ apiKey: TOKEN, baseURL: url, maxRetries, timeout: 15_000 });
    const withKey = (k: string, signal?: AbortSignal) => ({ headers: { 'Idempotency-Key': k }, ...(signal ? { signal } : {}) });
    const jobOf = async (k: string) => {
      const jobs = (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.filter((j) => j.idempotencyKey === k);
      expect(jobs).toHaveLength(1);
      return (await store.getJob(OWNER, jobs[0]!.id))!;
    };
    async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
      for (let i = 0; i < 400; i++) {
        const v = await read();
        if (ok(v)) return v;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('condition never held');
    }
    /** A streamed chat request with this test's key, by plain fetch (the SSE as sent). */
    const postStream = (): Promise<Response> =>
      fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ model: 'chat', messages, stream: true }),
      });
    /** The SSE events of a body (comments dropped), without their ids. */
    const sseEvents = (text: string): string[] => text.split('\n\n').filter((e) => e.trim() !== '' && !e.startsWith(':')).map(withoutId);
    /** Reads a whole stream's text; chunk texts in order. */
    async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>): Promise<{ text: string; chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] }> {
      const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      for await (const c of stream) chunks.push(c);
      return { text: chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), chunks };
    }

    it('the openai SDK receives the text as chunks before the provider finished; the last chunk carries usage', async () => {
      primaryFake.script([{ chunks: ['Streams ', 'arrive ', 'in ', 'pieces.'], streamGate: { afterChunks: 2, gate: `g-${key}` }, usage: { prompt_tokens: 5, completion_tokens: 4 } }]);
      const { data: stream, response } = await client()
        .chat.completions.create({ model: 'chat', messages, stream: true, stream_options: { include_usage: true } }, withKey(key))
        .withResponse();
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const it = stream[Symbol.asyncIterator]();
      let early = '';
      while (early !== 'Streams arrive ') {
        const next = await it.next();
        expect(next.done).toBe(false);
        early += next.value.choices[0]?.delta.content ?? '';
      }
      // The provider is held at its gate: the text so far reached the client before the provider finished.
      expect(primaryFake.calls[0]!.finishedAt).toBeNull();
      expect((await jobOf(key)).state).toBe('running');
      primaryFake.release(`g-${key}`);
      const rest: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      for (let n = await it.next(); !n.done; n = await it.next()) rest.push(n.value);
      expect(early + rest.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Streams arrive in pieces.');
      const last = rest.at(-1)!;
      expect(last.choices).toEqual([]);
      expect(last.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 });
      expect(rest.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe('stop');
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(job.result).toMatchObject({ content: 'Streams arrive in pieces.', provider: 'primary' });
      expect(job.attempts.map((a) => a.state)).toEqual(['succeeded']);
      expect(primaryFake.calls).toHaveLength(1);
      expect(primaryFake.calls[0]!.stream).toBe(true);
    });

    it('double click with streaming: two concurrent streams, one provider call, the same text; a later duplicate gets it from the first event', async () => {
      primaryFake.script([{ chunks: ['one ', 'job, ', 'one ', 'call'], streamGate: { afterChunks: 2, gate: `g-${key}` } }]);
      const c = client();
      const a = c.chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key));
      const b = c.chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key));
      const [sa, sb] = await Promise.all([a, b]);
      const reading = [collect(sa), collect(sb)];
      await until(async () => primaryFake.calls[0]?.chunksSent ?? 0, (n) => n >= 2);
      // Joins after two chunks were relayed: still receives the stream from its first event.
      const late = collect(await c.chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)));
      await new Promise((r) => setTimeout(r, 100));
      primaryFake.release(`g-${key}`);
      const texts = (await Promise.all([...reading, late])).map((r) => r.text);
      expect(texts).toEqual(['one job, one call', 'one job, one call', 'one job, one call']);
      expect(primaryFake.calls).toHaveLength(1);
      expect(fallbackFake.calls).toHaveLength(0);
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(job.attempts).toHaveLength(1);
    });

    it('a client that aborts mid-stream cancels nothing; coming back with its key it receives the stored result, replayed', async () => {
      primaryFake.script([{ chunks: ['kept ', 'going ', 'without ', 'you'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const abort = new AbortController();
      const stream = await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key, abort.signal));
      const it = stream[Symbol.asyncIterator]();
      let first = '';
      while (first === '') first = (await it.next()).value?.choices[0]?.delta.content ?? '';
      expect(first).toBe('kept ');
      abort.abort();
      await it.return?.();
      primaryFake.release(`g-${key}`);
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(job.result).toMatchObject({ content: 'kept going without you' });
      const { data, response } = await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)).withResponse();
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      expect((await collect(data)).text).toBe('kept going without you');
      expect(primaryFake.calls).toHaveLength(1);
    });

    it('a replay after the job finished streams the stored result with Idempotent-Replayed: true, no provider call', async () => {
      primaryFake.script([{ chunks: ['stored ', 'once'] }]);
      const body = { model: 'chat', messages, stream: true, stream_options: { include_usage: true } } as const;
      const first = await collect(await client().chat.completions.create(body, withKey(key)));
      expect(first.text).toBe('stored once');
      await until(() => jobOf(key), (j) => j.state === 'succeeded');
      for (const url of [baseURL, apiOnlyURL]) {
        const { data, response } = await client(url).chat.completions.create(body, withKey(key)).withResponse();
        expect(response.headers.get('idempotent-replayed')).toBe('true');
        const again = await collect(data);
        expect(again.text).toBe('stored once');
        expect(again.chunks[0]!.id).toBe(first.chunks[0]!.id);
        expect(again.chunks.at(-1)!.usage).toEqual(first.chunks.at(-1)!.usage);
      }
      expect(primaryFake.calls).toHaveLength(1);
    });

    it('across processes (an API without the executor): the duplicate gets the stored result once it is there, no second provider call', async () => {
      primaryFake.script([{ chunks: ['elsewhere ', 'streamed'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const here = collect(await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)));
      await until(async () => primaryFake.calls.length, (n) => n === 1);
      const there = client(apiOnlyURL).chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)).then(collect);
      primaryFake.release(`g-${key}`);
      expect((await here).text).toBe('elsewhere streamed');
      expect((await there).text).toBe('elsewhere streamed');
      expect(primaryFake.calls).toHaveLength(1);
    });

    it('a provider error event mid-stream: event: error after the text, the attempt failed, the job fails over and the retry follows it', async () => {
      primaryFake.script([{ chunks: ['half ', 'of ', 'it'], streamError: { afterChunks: 1, message: 'upstream overloaded' } }]);
      fallbackFake.script([{ chunks: ['the ', 'fallback ', 'answer'] }]);
      const stream = await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key));
      let received = '';
      const error = await (async () => {
        try {
          for await (const c of stream) received += c.choices[0]?.delta.content ?? '';
          return null;
        } catch (e) {
          return e;
        }
      })();
      expect(received).toBe('half ');
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('provider_stream_error');
      expect((error as { error?: { job_id?: string } }).error?.job_id).toBe((await jobOf(key)).id);
      const failed = await until(() => jobOf(key), (j) => j.attempts[0]!.state === 'failed');
      expect(failed.attempts[0]).toMatchObject({ provider: 'primary', error: { code: 'provider_stream_error' } });
      const retry = await collect(await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)));
      expect(retry.text).toBe('the fallback answer');
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(job.attempts.map((a) => [a.provider, a.state])).toEqual([['primary', 'failed'], ['fallback', 'succeeded']]);
      expect(job.result).toMatchObject({ content: 'the fallback answer', provider: 'fallback' });
      expect(primaryFake.calls).toHaveLength(1);
      expect(fallbackFake.calls).toHaveLength(1);
    });

    it('a connection cut mid-stream: event: error, no [DONE], the attempt unknown and the job blocks (409 attempt_in_doubt on retry)', async () => {
      primaryFake.script([{ chunks: ['cut ', 'short ', 'here'], streamCut: { afterChunks: 2 } }]);
      const res = await postStream();
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('"content":"cut "');
      expect(text).not.toContain('[DONE]');
      const events = sseEvents(text);
      const last = events.at(-1)!;
      expect(last.startsWith('event: error\ndata: ')).toBe(true);
      const data = JSON.parse(last.slice('event: error\ndata: '.length)) as { error: { code: string; message: string; job_id: string } };
      const job = await until(() => jobOf(key), (j) => j.state === 'unknown');
      expect(data.error).toMatchObject({ code: 'connection_lost', job_id: job.id });
      expect(typeof data.error.message).toBe('string');
      expect(job.attempts.map((a) => a.state)).toEqual(['unknown']);
      const retry = await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key)).then(
        () => null,
        (e: unknown) => e,
      );
      expect(retry).toBeInstanceOf(OpenAI.APIError);
      expect(retry).toMatchObject({ status: 409, code: 'attempt_in_doubt' });
      expect(fallbackFake.calls).toHaveLength(0);
    });

    /** Holds every stream claim until the returned release is called (the claim's commit, ordered by hand). */
    function holdClaims(): { release: () => void; asked: Promise<void> } {
      const original = store.claimStream;
      let release!: () => void;
      let asked!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const askedP = new Promise<void>((r) => (asked = r));
      store.claimStream = async (params) => {
        asked();
        await gate;
        return original.call(store, params);
      };
      return { release: () => ((store.claimStream = original), release()), asked: askedP };
    }

    it('without hedging the first token does not wait for the stream claim\'s commit; the stream is stored once the claim is in', async () => {
      primaryFake.script([{ chunks: ['Before ', 'the ', 'claim.'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const held = holdClaims();
      try {
        const stream = await client().chat.completions.create({ model: 'chat', messages, stream: true }, withKey(key));
        const it = stream[Symbol.asyncIterator]();
        let early = '';
        while (early === '') early += (await it.next()).value?.choices[0]?.delta.content ?? '';
        await held.asked;
        // The claim is still held: nothing of the stream is stored yet, the client has its first token.
        expect(early).toBe('Before ');
        const job = await jobOf(key);
        expect(await store.readStreamBatches(OWNER, job.id, 1, 0)).toEqual([]);
        held.release();
        primaryFake.release(`g-${key}`);
        let rest = '';
        for (let n = await it.next(); !n.done; n = await it.next()) rest += n.value.choices[0]?.delta.content ?? '';
        expect(early + rest).toBe('Before the claim.');
        const done = await until(() => jobOf(key), (j) => j.state === 'succeeded');
        expect(done.attempts.map((a) => a.state)).toEqual(['succeeded']);
        // Stored from its first event once claimed: a resume on any process reads the whole stream.
        const stored = await until(() => store.readStreamBatches(OWNER, job.id, 1, 0), (rows) => rows.some((r) => r.events.includes('"end":"ok"')));
        const text = stored.flatMap((r) => JSON.parse(r.events) as { d?: { type: string; text?: string } }[]).map((e) => (e.d?.type === 'text' ? e.d.text : '')).join('');
        expect(text).toBe('Before the claim.');
      } finally {
        held.release();
        primaryFake.release(`g-${key}`);
      }
    });

    it('a claim lost without hedging (the job cancelled meanwhile): what was published ends with event: error, nothing stored, the attempt cancelled', async () => {
      primaryFake.script([{ chunks: ['Never ', 'the ', 'result.'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const held = holdClaims();
      try {
        const res = await postStream();
        expect(res.status).toBe(200);
        await held.asked;
        const job = await jobOf(key);
        await store.cancelJob(OWNER, job.id);
        held.release();
        const text = await res.text();
        expect(text).toContain('"content":"Never "');
        expect(text).not.toContain('[DONE]');
        const events = sseEvents(text);
        expect(events.at(-1)!.startsWith('event: error\ndata: ')).toBe(true);
        const done = await until(() => jobOf(key), (j) => j.attempts.every((a) => a.finishedAt !== null));
        expect(done.state).toBe('cancelled');
        expect(done.attempts.map((a) => a.state)).toEqual(['cancelled']);
        expect(await store.readStreamBatches(OWNER, job.id, 1, 0)).toEqual([]);
      } finally {
        held.release();
        primaryFake.release(`g-${key}`);
      }
    });

    it('keep-alive comments go out while nothing has been sent, then the stream', async () => {
      primaryFake.script([{ gate: `g-${key}`, chunks: ['after ', 'the ', 'wait'] }]);
      const base = baseURL.replace(/\/v1$/, '');
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ model: 'chat', messages, stream: true }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let seen = '';
      while ((seen.match(/: keep-alive\n\n/g) ?? []).length < 3) {
        const { value, done } = await reader.read();
        expect(done).toBe(false);
        seen += decoder.decode(value, { stream: true });
      }
      expect(seen).not.toContain('data:');
      primaryFake.release(`g-${key}`);
      for (let r = await reader.read(); !r.done; r = await reader.read()) seen += decoder.decode(r.value, { stream: true });
      const datas = seen.split('\n\n').map(withoutId).filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
      expect(datas.at(-1)).toBe('[DONE]');
      const text = datas.slice(0, -1).map((d) => (JSON.parse(d) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '').join('');
      expect(text).toBe('after the wait');
      // Comments only before the first event.
      expect(seen.lastIndexOf(': keep-alive')).toBeLessThan(seen.indexOf('data: '));
    });

    it('hedging counts to the first output: a primary that streams within hedgeAfterMs gets no hedge, however long it takes to finish', async () => {
      primaryFake.script([{ chunks: ['slow ', 'but ', 'started'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const reading = client().chat.completions.create({ model: 'hedged', messages, stream: true }, withKey(key)).then(collect);
      await until(async () => primaryFake.calls[0]?.chunksSent ?? 0, (n) => n >= 1);
      await until(() => jobOf(key), (j) => j.attempts[0]!.state === 'running');
      await new Promise((r) => setTimeout(r, 400)); // well past hedgeAfterMs
      expect((await jobOf(key)).attempts).toHaveLength(1);
      primaryFake.release(`g-${key}`);
      expect((await reading).text).toBe('slow but started');
      expect(fallbackFake.calls).toHaveLength(0);
    });

    it('a hedge that streams first owns the stream: the primary is stopped and ends superseded, the client gets one attempt\'s text', async () => {
      primaryFake.script([{ gate: `g-${key}`, chunks: ['primary ', 'text'] }]);
      fallbackFake.script([{ chunks: ['hedge ', 'text'] }]);
      const { text } = await collect(await client().chat.completions.create({ model: 'hedged', messages, stream: true }, withKey(key)));
      expect(text).toBe('hedge text');
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded' && j.attempts.every((a) => a.state !== 'running' && a.state !== 'starting'));
      expect(job.attempts.map((a) => [a.provider, a.kind, a.state])).toEqual([['primary', 'first', 'superseded'], ['fallback', 'hedge', 'succeeded']]);
      expect(job.result).toMatchObject({ content: 'hedge text', provider: 'fallback' });
      primaryFake.release(`g-${key}`);
    });

    it('a contract route checks the whole output first and sends it in one burst; a violation is the non-streaming error answer', async () => {
      primaryFake.script([{ reply: { summary: 'checked' }, chunks: ['{"summary":', '"checked"}'], streamGate: { afterChunks: 1, gate: `g-${key}` } }]);
      const claimed = new Promise((r) => executor.events.once('attempt:stream_claim', r));
      const stream = await client().chat.completions.create({ model: 'json', messages, stream: true }, withKey(key));
      const it = stream[Symbol.asyncIterator]();
      let got = false;
      const first = it.next().then((v) => ((got = true), v));
      await claimed; // the executor has the first output; the client must not
      await new Promise((r) => setTimeout(r, 150));
      expect(got).toBe(false);
      primaryFake.release(`g-${key}`);
      const chunks = [(await first).value!];
      for (let n = await it.next(); !n.done; n = await it.next()) chunks.push(n.value);
      expect(JSON.parse(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''))).toEqual({ summary: 'checked' });

      const bad = `${key}-bad`;
      primaryFake.script([{ reply: { wrong: true }, chunks: ['{"wrong":', 'true}'] }]);
      // (On the API with 15 s keep-alives: nothing is sent before the check fails, so the status is still the error's.)
      const e = await client(apiOnlyURL).chat.completions.create({ model: 'json', messages, stream: true }, withKey(bad)).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(OpenAI.APIError);
      expect(e).toMatchObject({ status: 502, code: 'job_failed' });
      const job = await jobOf(bad);
      expect(job.attempts[0]).toMatchObject({ state: 'failed', error: { code: 'contract_violation' } });
    });
  });
}
