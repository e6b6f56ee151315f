/**
 * Following an `openai-responses` attempt by streaming (CONTRACT §11,
 * `follow: "stream"`), on SQLite and PostgreSQL, against the fake provider's
 * Responses API over real HTTP: the events relayed as the job's stream, a cut
 * resumed with `starting_after` (one submit, the text whole and never twice),
 * a stall ended by `idleTimeoutMs` and resolved by the lookup, an answer lost
 * to every stream found by the lookup, losers and cancelled jobs stopped
 * upstream; and `follow: "poll"` beside it.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { Executor, type ExecutorOptions } from '../../src/executor/executor.ts';
import { StreamHub, type StreamEvent } from '../../src/executor/stream-hub.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import { MAX_RESUMES_WITHOUT_PROGRESS } from '../../src/providers/openai-responses/response-stream-follower.ts';
import type { Provider } from '../../src/providers/provider.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { waitForJob } from '../support/wait-for-job.ts';

const OWNER = 'alice';
const CHUNKS = ['Streams ', 'resume ', 'where ', 'they ', 'broke, ', 'never ', 'twice.'];
const TEXT = CHUNKS.join('');
const STREAMED = { messages: [{ role: 'user', content: 'tell me about resuming' }], stream: true };

/** The text of a job's stream as relayed by the hub, and whether it ended ok. */
function relayed(hub: StreamHub, jobId: string): { text: () => string; ended: Promise<StreamEvent> } {
  const events: StreamEvent[] = [];
  let done!: (e: StreamEvent) => void;
  const ended = new Promise<StreamEvent>((r) => (done = r));
  hub.watch(jobId, (e) => {
    events.push(e);
    if (e.type === 'end') done(e);
  });
  return { text: () => events.map((e) => (e.type === 'delta' && e.delta.type === 'text' ? e.delta.text : '')).join(''), ended };
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`openai-responses followed by streaming on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let upstream: FakeProvider;
    let fallback: FakeProvider;
    let providers: Map<string, Provider>;
    let hub: StreamHub;
    const executors: Executor[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [upstream, fallback] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      hub = new StreamHub();
      const responses = { type: 'openai-responses' as const, baseUrl: `${upstream.url}/v1`, model: 'gpt-resp', timeoutMs: 2_000, idleTimeoutMs: 400, pollIntervalMs: 50, maxDurationMs: 60_000 };
      providers = new Map([
        ['responses', createProvider('responses', responses)],
        ['polled', createProvider('polled', { ...responses, follow: 'poll' })],
        ['fallback', createProvider('fallback', { type: 'openai', baseUrl: `${fallback.url}/v1`, model: 'gpt-fallback', timeoutMs: 2_000 })],
      ]);
    });
    afterEach(async () => {
      await Promise.all(executors.splice(0).map((e) => e.stop(100)));
      await Promise.all([...providers.values()].map((p) => p.close()));
      await Promise.all([upstream.close(), fallback.close()]);
      await cleanup();
    });

    async function executor(o: Partial<ExecutorOptions> = {}): Promise<Executor> {
      const e = new Executor({
        store, providers, streamHub: hub, routes: { r: { hedgeAfterMs: null }, hedged: { hedgeAfterMs: 150 } }, pollMs: 100, lateAnswerGraceMs: 100,
        reconciler: { everyMs: 50, firstCheckMs: 50, maxCheckMs: 200 }, ...o,
      });
      executors.push(e);
      await e.start();
      return e;
    }
    const create = (key: string, first: string, input: unknown = STREAMED, route = 'r') =>
      store.createJob({ ownerId: OWNER, idempotencyKey: key, route, input, providers: [first, 'fallback'] }).then((r) => r.job);

    it('a streamed job: created with background, stream and store, the id recorded from response.created, the deltas relayed as they come', async () => {
      upstream.script([{ chunks: CHUNKS, chunkDelayMs: 15 }]);
      await executor({ reconciler: false });
      const job = await create('relay', 'responses');
      const stream = relayed(hub, job.id);
      const end = await stream.ended;
      expect(end).toMatchObject({ type: 'end', ok: true });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(stream.text()).toBe(TEXT);
      expect(done.result).toMatchObject({ content: TEXT, provider: 'responses', model: 'gpt-resp', finish_reason: 'stop' });
      expect(done.attempts).toHaveLength(1);
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', providerRequestId: 'resp_fake_1', resolvedBy: null });
      expect(upstream.responses).toEqual([expect.objectContaining({ id: 'resp_fake_1', attemptId: done.attempts[0]!.id, status: 'completed', stream: true, resumes: [] })]);
      expect(upstream.calls).toHaveLength(0); // no chat call: the job went to the Responses API only
    });

    it('a cut mid-stream is resumed with starting_after: one submit, the relayed text whole and never twice, equal to the result', async () => {
      // Cut after three deltas while the response goes on producing: the resume reads the rest, part of it live.
      upstream.script([{ chunks: CHUNKS, chunkDelayMs: 20, streamCut: { afterChunks: 3 } }]);
      await executor({ reconciler: false });
      const job = await create('cut', 'responses');
      const stream = relayed(hub, job.id);
      await stream.ended;
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(stream.text()).toBe(TEXT);
      expect((done.result as { content: string }).content).toBe(TEXT);
      expect(done.attempts).toHaveLength(1);
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: null, unknownAt: null });
      // created 0, in_progress 1, output_item.added 2, content_part.added 3, deltas 4 5 6: resumed after 6.
      expect(upstream.responses).toHaveLength(1);
      expect(upstream.responses[0]).toMatchObject({ status: 'completed', resumes: [6] });
    });

    it('a cut of a non-streamed job is resumed too, and its answer is the whole text', async () => {
      upstream.script([{ chunks: CHUNKS, streamCut: { afterChunks: 1 } }]);
      await executor({ reconciler: false });
      const job = await create('cut-whole', 'responses', { messages: STREAMED.messages });
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect((done.result as { content: string }).content).toBe(TEXT);
      expect(upstream.responses).toEqual([expect.objectContaining({ stream: true, resumes: [4] })]);
    });

    it('a stream that goes silent after its first output is unknown with stream_stalled (idleTimeoutMs), and the lookup resolves it once the work is done', async () => {
      upstream.script([{ chunks: CHUNKS, streamGate: { afterChunks: 2, gate: 'stall' } }]);
      const e = await executor();
      const job = await create('stall', 'responses');
      const stream = relayed(hub, job.id);
      const unknown = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'unknown');
      expect(unknown.attempts[0]!.error).toMatchObject({ code: 'stream_stalled', details: { idle_timeout_ms: 400 } });
      expect(await stream.ended).toMatchObject({ ok: false, error: { code: 'stream_stalled' } });
      expect(stream.text()).toBe(CHUNKS.slice(0, 2).join(''));
      upstream.release('stall');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts).toHaveLength(1);
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: 'lookup', providerRequestId: 'resp_fake_1' });
      expect((done.result as { content: string }).content).toBe(TEXT);
      expect(upstream.responses).toHaveLength(1); // never submitted again
      expect(upstream.lookups).toBeGreaterThanOrEqual(1);
      expect(fallback.calls).toHaveLength(0);
      void e;
    });

    it('an answer lost to every stream (the work done upstream) ends in doubt after the resumes, and the lookup finds it: one submit', async () => {
      upstream.script([{ reply: 'done upstream', loseAnswer: true }]);
      await executor();
      const job = await create('lost', 'responses');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts).toHaveLength(1);
      expect(done.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: 'lookup', providerRequestId: 'resp_fake_1' });
      expect(done.attempts[0]!.unknownAt).not.toBeNull();
      expect((done.result as { content: string }).content).toBe('done upstream');
      expect(upstream.responses).toHaveLength(1);
      expect(upstream.responses[0]!.resumes).toHaveLength(MAX_RESUMES_WITHOUT_PROGRESS);
      expect(fallback.calls).toHaveLength(0);
    });

    it('a failed response ends the attempt failed and the job moves down its chain', async () => {
      upstream.script([{ chunks: CHUNKS, streamError: { afterChunks: 2, message: 'the model broke' } }]);
      fallback.script([{ reply: 'from the fallback' }]);
      await executor({ reconciler: false });
      const job = await create('failed', 'responses');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect(done.attempts.map((a) => [a.provider, a.state, a.error?.code ?? null])).toEqual([
        ['responses', 'failed', 'provider_task_failed'],
        ['fallback', 'succeeded', null],
      ]);
      expect(done.attempts[0]!.error?.details).toMatchObject({ status: 'failed', response_error: { message: 'the model broke' } });
    });

    it('a loser is stopped upstream: the hedge wins, the response is cancelled (POST …/cancel)', async () => {
      upstream.script([{ chunks: CHUNKS, task: { runMs: 30_000 } }]);
      fallback.script([{ reply: 'the hedge wins' }]);
      await executor({ reconciler: false });
      const job = await create('loser', 'responses', STREAMED, 'hedged');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded' && j.attempts.every((a) => a.state !== 'running' && a.state !== 'starting'));
      expect(done.attempts.map((a) => [a.provider, a.state])).toEqual([
        ['responses', 'superseded'],
        ['fallback', 'succeeded'],
      ]);
      expect(done.attempts[0]!.providerRequestId).toBe('resp_fake_1');
      for (let i = 0; i < 100 && !upstream.responses[0]?.cancelRequested; i++) await new Promise((r) => setTimeout(r, 20));
      expect(upstream.responses[0]).toMatchObject({ cancelRequested: true, status: 'cancelled' });
    });

    it('a cancelled streaming job stops its response upstream mid-stream', async () => {
      upstream.script([{ chunks: CHUNKS, streamGate: { afterChunks: 1, gate: 'hold' } }]);
      await executor({ reconciler: false });
      const job = await create('cancel', 'responses');
      const stream = relayed(hub, job.id);
      await waitForJob(store, job.id, (j) => j.attempts[0]?.providerRequestId === 'resp_fake_1');
      for (let i = 0; i < 100 && stream.text() === ''; i++) await new Promise((r) => setTimeout(r, 20));
      await store.cancelJob(OWNER, job.id);
      const done = await waitForJob(store, job.id, (j) => j.attempts[0]?.state === 'cancelled');
      expect(done.state).toBe('cancelled');
      for (let i = 0; i < 100 && !upstream.responses[0]?.cancelRequested; i++) await new Promise((r) => setTimeout(r, 20));
      expect(upstream.responses[0]).toMatchObject({ cancelRequested: true, status: 'cancelled' });
    });

    it('follow "poll": created without stream, followed by GET; a streamed job gets its answer whole', async () => {
      upstream.script([{ chunks: CHUNKS, task: { runMs: 200 } }]);
      await executor({ reconciler: false });
      const job = await create('poll', 'polled');
      const done = await waitForJob(store, job.id, (j) => j.state === 'succeeded');
      expect((done.result as { content: string }).content).toBe(TEXT);
      expect(done.attempts[0]).toMatchObject({ providerRequestId: 'resp_fake_1', resolvedBy: null });
      expect(upstream.responses).toEqual([expect.objectContaining({ stream: false, resumes: [], status: 'completed' })]);
      expect(upstream.lookups).toBeGreaterThanOrEqual(1); // the polls
    });
  });

  describe.skipIf(Boolean(db.skip))(`a client streaming through an openai-responses provider on ${db.name}`, () => {
    const TOKEN = 'tok_alice_responses_0123456789';
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let upstream: FakeProvider;
    let runtime: Runtime;
    let app: FastifyInstance;
    let origin: string;

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      upstream = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [TOKEN]: OWNER },
        providers: { responses: { type: 'openai-responses', baseUrl: `${upstream.url}/v1`, model: 'gpt-resp', timeoutMs: 5_000, pollIntervalMs: 50 } },
        routes: { chat: { providers: ['responses'] } },
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
    afterEach(async () => {
      await app.close();
      await runtime.close(100);
      await upstream.close();
      await cleanup();
    });

    it('chat completions streamed with the openai SDK: the chunks arrive as the upstream response streams, across a cut, and equal the result', async () => {
      upstream.script([{ chunks: CHUNKS, chunkDelayMs: 20, streamCut: { afterChunks: 4 } }]);
      const client = new OpenAI({ apiKey: TOKEN, baseURL: `${origin}/v1`, maxRetries: 0, timeout: 15_000 });
      const stream = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'go' }], stream: true }, { headers: { 'Idempotency-Key': `sdk-${db.name}` } });
      const pieces: string[] = [];
      for await (const chunk of stream) {
        const t = chunk.choices[0]?.delta.content;
        if (t) pieces.push(t);
      }
      expect(pieces.join('')).toBe(TEXT);
      expect(pieces.length).toBeGreaterThanOrEqual(CHUNKS.length); // streamed piece by piece, not one burst at the end (as follow: "poll" gives)
      const jobs = (await store.listJobs({ ownerId: OWNER, limit: 10 })).jobs;
      expect(jobs).toHaveLength(1);
      const job = (await store.getJob(OWNER, jobs[0]!.id))!;
      expect((job.result as { content: string }).content).toBe(TEXT);
      expect(upstream.responses).toEqual([expect.objectContaining({ stream: true, resumes: [7], status: 'completed' })]);
    });

    it('messages streamed with the Anthropic SDK, and a Response streamed with the openai SDK: each gets the text as the upstream response streams it', async () => {
      upstream.script([{ chunks: CHUNKS, chunkDelayMs: 10 }, { chunks: CHUNKS, chunkDelayMs: 10, streamCut: { afterChunks: 2 } }]);
      const anthropic = new Anthropic({ apiKey: TOKEN, baseURL: origin, maxRetries: 0, timeout: 15_000 });
      const messages = await anthropic.messages.create({ model: 'chat', max_tokens: 100, messages: [{ role: 'user', content: 'go' }], stream: true }, { headers: { 'Idempotency-Key': `msg-${db.name}` } });
      const texts: string[] = [];
      for await (const e of messages) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') texts.push(e.delta.text);
      expect(texts.join('')).toBe(TEXT);
      expect(texts.length).toBeGreaterThanOrEqual(CHUNKS.length); // piece by piece, not one burst at the end (as follow: "poll" gives)

      const openai = new OpenAI({ apiKey: TOKEN, baseURL: `${origin}/v1`, maxRetries: 0, timeout: 15_000 });
      const response = await openai.responses.create({ model: 'chat', input: 'go', stream: true }, { headers: { 'Idempotency-Key': `resp-${db.name}` } });
      const deltas: string[] = [];
      let completed: OpenAI.Responses.Response | null = null;
      for await (const e of response) {
        if (e.type === 'response.output_text.delta') deltas.push(e.delta);
        if (e.type === 'response.completed') completed = e.response;
      }
      expect(deltas.join('')).toBe(TEXT);
      expect(deltas.length).toBeGreaterThanOrEqual(CHUNKS.length);
      expect(completed).toMatchObject({ status: 'completed' });
      expect(upstream.responses.map((r) => [r.stream, r.resumes, r.status])).toEqual([[true, [], 'completed'], [true, [5], 'completed']]);
    });
  });
}
