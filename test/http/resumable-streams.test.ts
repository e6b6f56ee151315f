/**
 * Resumable streams (CONTRACT §13) over real sockets, on SQLite and
 * PostgreSQL, with the real `openai` and `@anthropic-ai/sdk` clients: every
 * event carries an SSE id; a client that disconnects mid-stream and comes
 * back with `Last-Event-ID` (same key and body) receives exactly the events
 * after it, while the job runs and after it finished, on the app whose
 * executor runs the attempt and on a second API app with its own stream hub
 * (another process as far as the stream is concerned: it reads the stored
 * stream). What the client assembled across its connections equals the job's
 * result, no event twice, and the ids are the same for everyone.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { JobWithAttempts } from '../../src/core/types.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { StreamHub } from '../../src/executor/stream-hub.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_resume_0123456789';
const OWNER = 'alice';
const messages = [{ role: 'user' as const, content: 'Tell me about resuming.' }];
const CHUNKS = ['Streams ', 'resume ', 'where ', 'they ', 'broke, ', 'never ', 'twice.'];
const TEXT = CHUNKS.join('');

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/**
 * A `fetch` for the SDKs that passes every byte through and records the SSE
 * ids of the events carrying data, in order: the k-th event an SDK hands out
 * is the k-th id here (a chat stream's `[DONE]` is recorded last).
 */
function recordingFetch(ids: string[]): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return res;
    const decoder = new TextDecoder();
    let buffer = '';
    const tap = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
          const event = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const id = /^id: (.*)$/m.exec(event);
          if (/^data: /m.test(event)) ids.push(id ? id[1]! : '(none)');
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(res.body.pipeThrough(tap), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** The ids of a whole stream, numbered 1… within attempt 1. */
function expectIdsInOrder(ids: readonly string[]): void {
  expect(ids.length).toBeGreaterThan(0);
  expect(ids).toEqual(ids.map((_, i) => `1-${i + 1}`));
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`resumable streams with the real SDKs (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let fallbackFake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    /** An API app without the executor's hub: another process, as far as the stream goes. */
    let other: FastifyInstance;
    let origin: string;
    let otherOrigin: string;
    let seq = 0;
    let key: string;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [fake, fallbackFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: {
          primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-primary', timeoutMs: 15_000 },
          fallback: { type: 'openai', baseUrl: `${fallbackFake.url}/v1`, apiKey: 'k', model: 'gpt-fallback', timeoutMs: 15_000 },
        },
        routes: { chat: { providers: ['primary'] }, chain: { providers: ['primary', 'fallback'] }, json: { providers: ['primary'], contract: 'summary' } },
        contracts: { summary: { outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } }, samples: 1, cases: [{ name: 'one', input: { messages } }] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100 });
      await executor.start();
      app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100 } });
      other = buildApp({ store, config, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100, streamHub: new StreamHub() } });
      origin = await listen(app);
      otherOrigin = await listen(other);
    });
    afterAll(async () => {
      await app?.close();
      await other?.close();
      await runtime?.close(100);
      await Promise.all([fake?.close(), fallbackFake?.close()]);
      await cleanup?.();
    });
    beforeEach(() => {
      fake.reset();
      fallbackFake.reset();
      key = `resume-${db.name}-${Date.now()}-${++seq}`;
    });

    const jobOf = async (k: string): Promise<JobWithAttempts> => {
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
    const resultText = (j: JobWithAttempts): string => (j.result as { content: string }).content;

    // ---- chat completions, the openai SDK ----------------------------------

    const openai = (ids: string[], at = origin) => new OpenAI({ apiKey: TOKEN, baseURL: `${at}/v1`, maxRetries: 0, timeout: 15_000, fetch: recordingFetch(ids) });
    const chatBody = { model: 'chat', messages, stream: true as const };
    const chatHeaders = (lastEventId?: string) => ({ headers: { 'Idempotency-Key': key, ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}) } });
    const chunkText = (c: OpenAI.Chat.Completions.ChatCompletionChunk): string => c.choices[0]?.delta.content ?? '';

    /** Reads `take` chunks of a chat stream, then drops the connection. */
    async function chatUntilDisconnect(take: number, at = origin): Promise<{ texts: string[]; ids: string[] }> {
      const ids: string[] = [];
      const stream = await openai(ids, at).chat.completions.create(chatBody, chatHeaders());
      const texts: string[] = [];
      for await (const c of stream) {
        texts.push(chunkText(c));
        if (texts.length === take) break; // leaving the loop aborts the request
      }
      return { texts, ids: ids.slice(0, take) };
    }
    /** Reads a chat stream to its end (optionally resuming after `lastEventId`). */
    async function chatToEnd(lastEventId: string | undefined, at = origin): Promise<{ texts: string[]; ids: string[] }> {
      return chatToEndWith(chatBody, lastEventId, at);
    }
    async function chatToEndWith(body: typeof chatBody, lastEventId: string | undefined, at = origin): Promise<{ texts: string[]; ids: string[] }> {
      const ids: string[] = [];
      const stream = await openai(ids, at).chat.completions.create(body, chatHeaders(lastEventId));
      const texts: string[] = [];
      for await (const c of stream) texts.push(chunkText(c));
      return { texts, ids };
    }

    it('chat: a client that drops mid-stream and resumes with Last-Event-ID while the job runs (on another API app) gets the rest live; nothing twice', async () => {
      fake.script([{ chunks: CHUNKS, streamGate: { afterChunks: 4, gate: `g-${key}` } }]);
      const first = await chatUntilDisconnect(2);
      expect(first.texts.join('')).toBe('Streams resume ');
      const lastId = first.ids.at(-1)!;
      expect(first.ids).toEqual(['1-1', '1-2']);

      // The resume reaches the API app without the executor: it reads the stored stream, live.
      const ids: string[] = [];
      const stream = await openai(ids, otherOrigin).chat.completions.create(chatBody, chatHeaders(lastId));
      const it = stream[Symbol.asyncIterator]();
      const texts: string[] = [];
      while (texts.join('') !== 'where they ') texts.push(chunkText((await it.next()).value as OpenAI.Chat.Completions.ChatCompletionChunk));
      // Received before the job ended: the provider is still held at its gate.
      expect((await jobOf(key)).state).toBe('running');
      fake.release(`g-${key}`);
      for (let r = await it.next(); !r.done; r = await it.next()) texts.push(chunkText(r.value));

      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(first.texts.join('') + texts.join('')).toBe(resultText(job));
      expect(resultText(job)).toBe(TEXT);
      const all = [...first.ids, ...ids];
      expect(new Set(all).size).toBe(all.length);
      expectIdsInOrder(all);
      expect(fake.calls).toHaveLength(1);
    });

    it('chat: after the job finished, a resume gets exactly the stored events after its id, and a replay the same events with the same ids as the first client', async () => {
      fake.script([{ chunks: CHUNKS, usage: { prompt_tokens: 5, completion_tokens: 7 } }]);
      const original = await chatToEnd(undefined);
      expect(original.texts.join('')).toBe(TEXT);
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      await until(async () => (await store.readStreamBatches(OWNER, job.id, 1, 0)).some((b) => b.events.includes('"end"')), (x) => x);

      for (const at of [origin, otherOrigin]) {
        // A replay: the stored stream, event for event (not the result as one chunk).
        const replay = await chatToEnd(undefined, at);
        expect(replay.ids).toEqual(original.ids);
        expect(replay.texts).toEqual(original.texts);
        // A resume after the third event: exactly the rest.
        const resumed = await chatToEnd(original.ids[2], at);
        expect(resumed.ids).toEqual(original.ids.slice(3));
        expect(original.texts.slice(0, 3).join('') + resumed.texts.join('')).toBe(resultText(job));
      }
      expect(fake.calls).toHaveLength(1);
    });

    it('chat: dropped twice, resumed twice on alternating apps while running: the pieces concatenate to the result', async () => {
      fake.script([{ chunks: CHUNKS, chunkDelayMs: 40 }]);
      const pieces: string[] = [];
      const seen: string[] = [];
      const a = await chatUntilDisconnect(2);
      pieces.push(...a.texts);
      seen.push(...a.ids);
      // Second connection, to the other app, dropped after two more.
      const ids: string[] = [];
      const s = await openai(ids, otherOrigin).chat.completions.create(chatBody, chatHeaders(seen.at(-1)));
      let n = 0;
      for await (const c of s) {
        pieces.push(chunkText(c));
        if (++n === 2) break;
      }
      seen.push(...ids.slice(0, 2));
      const rest = await chatToEnd(seen.at(-1), origin);
      pieces.push(...rest.texts);
      seen.push(...rest.ids);
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(pieces.join('')).toBe(resultText(job));
      expect(new Set(seen).size).toBe(seen.length);
      expectIdsInOrder(seen);
    });

    it('a contract route (one burst after the check) sends its result with ids too, and resumes after one of them', async () => {
      fake.script([{ chunks: ['{"summary": ', '"one burst"}'] }]);
      const body = { model: 'json', messages, stream: true as const };
      const ids: string[] = [];
      const texts: string[] = [];
      for await (const c of await openai(ids).chat.completions.create(body, chatHeaders())) texts.push(chunkText(c));
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(ids.length).toBeGreaterThan(2);
      expectIdsInOrder(ids);
      const again: string[] = [];
      const rest: string[] = [];
      for await (const c of await openai(again, otherOrigin).chat.completions.create(body, chatHeaders(ids[0]))) rest.push(chunkText(c));
      expect(again).toEqual(ids.slice(1));
      expect(texts[0]! + rest.join('')).toBe(texts.join(''));
      expect(JSON.parse(texts.join(''))).toEqual(job.result && (job.result as { content: unknown }).content);
    });

    it('chat: a resume after the last event gets an empty stream; a stream that broke is resumed into its error, not into the failover', async () => {
      fake.script([{ chunks: CHUNKS }]);
      const all = await chatToEnd(undefined);
      await until(() => jobOf(key), (j) => j.state === 'succeeded');
      const none = await chatToEnd(all.ids.at(-1), otherOrigin);
      expect(none.ids).toEqual([]);

      key = `${key}-broken`;
      fake.script([{ chunks: ['lost ', 'words ', 'here'], streamError: { afterChunks: 2, message: 'upstream broke' } }]);
      fallbackFake.script([{ chunks: ['the ', 'fallback ', 'answer'] }]);
      const ids: string[] = [];
      const texts: string[] = [];
      const broken = await (async () => {
        for await (const c of await openai(ids).chat.completions.create({ ...chatBody, model: 'chain' }, chatHeaders())) texts.push(chunkText(c));
      })().then(() => null, (e: unknown) => e);
      expect(broken).toBeInstanceOf(OpenAI.APIError);
      expect(texts.join('')).toBe('lost words ');
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(resultText(job)).toBe('the fallback answer');
      // The resume names the broken stream: the rest of it is its error, never the other attempt's text.
      const resumed: string[] = [];
      const again = await (async () => {
        for await (const c of await openai([], otherOrigin).chat.completions.create({ ...chatBody, model: 'chain' }, chatHeaders(ids[1]))) resumed.push(chunkText(c));
      })().then(() => null, (e: unknown) => e);
      expect(again).toBeInstanceOf(OpenAI.APIError);
      expect(resumed).toEqual([]);
      // Asked again from the start: the job's stream, the winner's, under its own attempt number.
      const fresh = await chatToEndWith({ ...chatBody, model: 'chain' }, undefined);
      expect(fresh.texts.join('')).toBe('the fallback answer');
      expect(fresh.ids.every((id) => id.startsWith('2-'))).toBe(true);
    });

    // ---- messages, the Anthropic SDK ------------------------------------------

    const anthropic = (ids: string[], at = origin) => new Anthropic({ apiKey: TOKEN, baseURL: at, maxRetries: 0, timeout: 15_000, fetch: recordingFetch(ids) });
    const messagesBody = { model: 'chat', max_tokens: 100, messages, stream: true as const };
    const textOf = (e: Anthropic.MessageStreamEvent): string => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? e.delta.text : '');

    it('messages: a client that drops mid-stream and resumes while the job runs (on another API app) gets the rest live, then after the end the stored events; nothing twice', async () => {
      fake.script([{ chunks: CHUNKS, streamGate: { afterChunks: 4, gate: `g-${key}` } }]);
      const firstIds: string[] = [];
      const first: Anthropic.MessageStreamEvent[] = [];
      const s1 = await anthropic(firstIds).messages.create(messagesBody, chatHeaders());
      for await (const e of s1) {
        first.push(e);
        if (first.map(textOf).join('') === 'Streams resume ') break;
      }
      const lastId = firstIds[first.length - 1]!;
      expect(first[0]!.type).toBe('message_start');

      const ids: string[] = [];
      const s2 = await anthropic(ids, otherOrigin).messages.create(messagesBody, chatHeaders(lastId));
      const it = s2[Symbol.asyncIterator]();
      const second: Anthropic.MessageStreamEvent[] = [];
      while (second.map(textOf).join('') !== 'where they ') second.push((await it.next()).value as Anthropic.MessageStreamEvent);
      expect((await jobOf(key)).state).toBe('running');
      fake.release(`g-${key}`);
      for (let r = await it.next(); !r.done; r = await it.next()) second.push(r.value);
      expect(second.at(-1)!.type).toBe('message_stop');
      expect(second.some((e) => e.type === 'message_start')).toBe(false);

      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect([...first, ...second].map(textOf).join('')).toBe(resultText(job));
      const all = [...firstIds.slice(0, first.length), ...ids];
      expect(new Set(all).size).toBe(all.length);
      expectIdsInOrder(all);

      // After the end, on either app: a replay has the same ids and events, a resume exactly the rest.
      await until(async () => (await store.readStreamBatches(OWNER, job.id, 1, 0)).some((b) => b.events.includes('"end"')), (x) => x);
      for (const at of [origin, otherOrigin]) {
        const replayIds: string[] = [];
        const replay: Anthropic.MessageStreamEvent[] = [];
        for await (const e of await anthropic(replayIds, at).messages.create(messagesBody, chatHeaders())) replay.push(e);
        expect(replayIds).toEqual(all);
        expect(replay).toEqual([...first, ...second]);
        const restIds: string[] = [];
        const rest: Anthropic.MessageStreamEvent[] = [];
        for await (const e of await anthropic(restIds, at).messages.create(messagesBody, chatHeaders(all[4]))) rest.push(e);
        expect(restIds).toEqual(all.slice(5));
        expect([...replay.slice(0, 5), ...rest].map(textOf).join('')).toBe(resultText(job));
      }
      expect(fake.calls).toHaveLength(1);
    });

    // ---- responses, the openai SDK ----------------------------------------------

    const responsesBody = { model: 'chat', input: 'Tell me about resuming.', stream: true as const };
    type ResponseEvent = OpenAI.Responses.ResponseStreamEvent;
    const deltaOf = (e: ResponseEvent): string => (e.type === 'response.output_text.delta' ? e.delta : '');

    it('responses: a client that drops mid-stream resumes while the job runs, on another API app, by Last-Event-ID on the create and by starting_after on retrieve; after the end too; nothing twice', async () => {
      fake.script([{ chunks: CHUNKS, streamGate: { afterChunks: 4, gate: `g-${key}` } }]);
      const firstIds: string[] = [];
      const first: ResponseEvent[] = [];
      for await (const e of await openai(firstIds).responses.create(responsesBody, chatHeaders())) {
        first.push(e);
        if (first.map(deltaOf).join('') === 'Streams resume ') break;
      }
      expect(first[0]!.type).toBe('response.created');
      const responseId = (first[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
      const lastId = firstIds[first.length - 1]!;

      // While the provider is held: a duplicate create with Last-Event-ID, and a retrieve stream with starting_after, both on the other app.
      const byIdIds: string[] = [];
      const byId = (await openai(byIdIds, otherOrigin).responses.create(responsesBody, chatHeaders(lastId)))[Symbol.asyncIterator]();
      const byAfter = (await openai([], otherOrigin).responses.retrieve(responseId, { stream: true, starting_after: first.at(-1)!.sequence_number }))[Symbol.asyncIterator]();
      const resumedById: ResponseEvent[] = [];
      const resumedAfter: ResponseEvent[] = [];
      while (resumedById.map(deltaOf).join('') !== 'where they ') resumedById.push((await byId.next()).value as ResponseEvent);
      while (resumedAfter.map(deltaOf).join('') !== 'where they ') resumedAfter.push((await byAfter.next()).value as ResponseEvent);
      expect((await jobOf(key)).state).toBe('running');
      fake.release(`g-${key}`);
      for (let r = await byId.next(); !r.done; r = await byId.next()) resumedById.push(r.value);
      for (let r = await byAfter.next(); !r.done; r = await byAfter.next()) resumedAfter.push(r.value);

      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      expect(resultText(job)).toBe(TEXT);
      for (const resumed of [resumedById, resumedAfter]) {
        expect([...first, ...resumed].map(deltaOf).join('')).toBe(resultText(job));
        expect(resumed.at(-1)!.type).toBe('response.completed');
        // One numbering: the resume continues the first connection's sequence numbers, none twice, none skipped.
        const seqs = [...first, ...resumed].map((e) => e.sequence_number);
        expect(seqs).toEqual(seqs.map((_, i) => i));
      }
      const all = [...firstIds.slice(0, first.length), ...byIdIds];
      expect(new Set(all).size).toBe(all.length);
      expectIdsInOrder(all);

      // After the end, on either app: the stored stream after the same cursor, by either spelling.
      await until(async () => (await store.readStreamBatches(OWNER, job.id, 1, 0)).some((b) => b.events.includes('"end"')), (x) => x);
      for (const at of [origin, otherOrigin]) {
        const restIds: string[] = [];
        const rest: ResponseEvent[] = [];
        for await (const e of await openai(restIds, at).responses.create(responsesBody, chatHeaders(all[5]))) rest.push(e);
        expect(restIds).toEqual(all.slice(6));
        const after: ResponseEvent[] = [];
        for await (const e of await openai([], at).responses.retrieve(responseId, { stream: true, starting_after: 5 })) after.push(e);
        expect(after.map((e) => e.sequence_number)).toEqual(rest.map((e) => e.sequence_number));
        expect([...first, ...resumedById].slice(0, 6).map(deltaOf).join('') + rest.map(deltaOf).join('')).toBe(resultText(job));
        expect([...first, ...resumedById].slice(0, 6).map(deltaOf).join('') + after.map(deltaOf).join('')).toBe(resultText(job));
      }
      expect(fake.calls).toHaveLength(1);
    });

    // ---- storage ----------------------------------------------------------------

    it('the stored stream is a handful of batches, not a row per chunk, and retention deletes it with its job', async () => {
      const many = Array.from({ length: 60 }, (_, i) => `w${i} `);
      fake.script([{ chunks: many, chunkDelayMs: 2 }]);
      const { texts } = await chatToEnd(undefined);
      expect(texts.join('')).toBe(many.join(''));
      const job = await until(() => jobOf(key), (j) => j.state === 'succeeded');
      const batches = await until(() => store.readStreamBatches(OWNER, job.id, null, 0), (b) => b.some((x) => x.events.includes('"end"')));
      // Chunks 2 ms apart for about 120 ms, one write per 50 ms slice after the first: far fewer rows than chunks.
      expect(batches.length).toBeLessThan(12);
      expect(batches.flatMap((b) => JSON.parse(b.events) as unknown[]).length).toBeGreaterThanOrEqual(many.length + 1);
      await new Promise((r) => setTimeout(r, 20));
      await store.deleteFinishedJobs({ olderThanMs: 0 });
      expect(await store.getJob(OWNER, job.id)).toBeNull();
      expect(await store.readStreamBatches(OWNER, job.id, null, 0)).toEqual([]);
    });
  });
}
