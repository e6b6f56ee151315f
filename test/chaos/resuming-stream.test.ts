/**
 * The chaos workload's resuming stream client (chaos/resuming-stream.ts)
 * against real onejob apps on SQLite: the executor's app and a second app
 * with its own stream hub (another process as far as the stream goes), a
 * fake provider streaming slowly. The client drops its stream and resumes on
 * either app; what it recorded, checked by the checker's rule
 * (chaos/resume-check.ts), is a clean chain that assembles the job's result;
 * the same history with one recorded event removed is a violation.
 */
import type { FastifyInstance } from 'fastify';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkResumedStreams } from '../../chaos/resume-check.ts';
import { resumingStream } from '../../chaos/resuming-stream.ts';
import type { DbJob, HistoryEntry } from '../../chaos/records.ts';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { StreamHub } from '../../src/executor/stream-hub.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_chaos_resume_0123456789';
const CHUNKS = ['Dropped ', 'and ', 'resumed ', 'on ', 'either ', 'app, ', 'assembled ', 'once.'];

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

describe('chaos: the resuming stream client', () => {
  let store: JobStore;
  let cleanup: () => Promise<void>;
  let fake: FakeProvider;
  let runtime: Runtime;
  let executor: Executor;
  let app: FastifyInstance;
  let other: FastifyInstance;
  const targets: { name: string; url: string }[] = [];
  const agent = new Agent();

  beforeAll(async () => {
    ({ store, cleanup } = await createTestStore(TEST_DATABASES.find((d) => d.name === 'sqlite')!));
    fake = await startFakeProvider();
    const config = defineConfig({
      apiKeys: { [TOKEN]: 'alice' },
      providers: { p1: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'm', timeoutMs: 15_000 } },
      routes: { plain: { providers: ['p1'] } },
    });
    runtime = await createRuntime({ config, store });
    executor = runtime.createExecutor({ pollMs: 100 });
    await executor.start();
    app = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100 } });
    other = buildApp({ store, config, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 10_000, retryAfterMs: 100, streamHub: new StreamHub() } });
    targets.push({ name: 'lb', url: await listen(app) }, { name: 'api-2', url: await listen(other) });
  });
  afterAll(async () => {
    await app?.close();
    await other?.close();
    await runtime?.close(100);
    await fake?.close();
    await agent.close();
    await cleanup?.();
  });

  it('drops, resumes on the other app, and records a chain the checker finds whole; an event left out is reported', async () => {
    fake.script([{ chunks: CHUNKS, chunkDelayMs: 40 }]);
    const history: HistoryEntry[] = [];
    // The draws, in order: drop the first stream (after 1 + 2 events); each resume waits, goes to the other app, is not dropped.
    const draws = [0.1, 0.3, 0.0, 0.9, 0.9, 0.0, 0.9, 0.9, 0.0, 0.9, 0.9];
    let i = 0;
    const ctx = {
      targets, random: () => draws[i++ % draws.length]!, clock: () => performance.now(), dispatcher: agent,
      record: (e: Omit<HistoryEntry, 'id'>) => {
        const entry = { id: history.length + 1, ...e } as HistoryEntry;
        history.push(entry);
        return entry;
      },
    };
    const body = { model: 'plain', messages: [{ role: 'user', content: 'resume me' }], stream: true };
    await resumingStream(ctx, { name: 'c0', owner: 'alice', token: TOKEN }, 'chat', '/v1/chat/completions', 'chaos-resume-1', body);

    expect(history.length).toBeGreaterThanOrEqual(2);
    expect(history[0]!.outcome).toBe('dropped');
    expect(history.slice(1).every((e) => e.resume !== undefined && (e.resume.via === 'lb' || e.resume.via === 'api-2'))).toBe(true);
    expect(history.some((e) => e.resume?.via === 'api-2')).toBe(true);
    const jobId = (history[0]!.response as { job_id: string }).job_id;
    const job = await (async () => {
      for (let t = 0; t < 100; t++) {
        const j = await store.getJob('alice', jobId);
        if (j?.state === 'succeeded') return j;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('the job did not succeed');
    })();
    const dbJob = { owner_id: 'alice', id: job.id, idempotency_key: job.idempotencyKey, route: job.route, input: job.input, metadata: null, state: job.state, version: 0, completed_by: job.completedBy, result: job.result, error: null } as DbJob;
    const notes: Record<string, number> = {};
    const check = (h: readonly HistoryEntry[]) => checkResumedStreams({
      history: h, jobsById: new Map([[job.id, dbJob]]), outputsOf: () => [CHUNKS.join('')], winnerOf: () => 1,
      resultText: (r) => (r as { content: string }).content, sameText: (a, b) => a === b, note: (k, n = 1) => void (notes[k] = (notes[k] ?? 0) + n),
    });
    expect(check(history)).toEqual([]);
    expect(notes).toMatchObject({ resume_chains: 1, resume_chains_done: 1, resume_chains_direct_to_a_process: 1 });
    // The ids the client recorded are the job's stream, one after the other, across both apps.
    const ids = history.flatMap((e) => (e.response as { stream?: { ids?: string[] } }).stream?.ids ?? []);
    expect(ids).toEqual(ids.map((_, k) => `1-${k + 1}`));

    // The same history with the resume's first event left out (text and id): skipped, reported.
    const resumed = history.findIndex((e) => e.resume !== undefined && ((e.response as { stream?: { ids?: string[] } }).stream?.ids?.length ?? 0) > 1);
    const e = history[resumed]!;
    const st = (e.response as { stream: { ids: string[]; text: string } }).stream;
    const cut = [...history];
    cut[resumed] = { ...e, response: { ...(e.response as object), stream: { ...st, ids: st.ids.slice(1) } } };
    expect(check(cut).map((v) => v.message).join('\n')).toMatch(/twice, skipped, or of another stream/);
    expect(fake.calls).toHaveLength(1);
  });
});
