/**
 * CONTRACT §15, "a lookup's answer must name the attempt", on SQLite and
 * PostgreSQL: a stored-completions lookup takes only the completion whose
 * `metadata.onejob_attempt_id` is the attempt's (the fake's
 * `ignoreLookupFilter` lists every stored completion, as several
 * OpenAI-compatible servers do); `openai-responses` and `task` lookups take
 * only the answer about the attempt's recorded `provider_request_id`. An
 * answer about another request settles nothing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Reconciler } from '../../src/executor/reconciler.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'summarize this' }] };

/** A service that answers every GET with `body` (a response or task about another request than asked). */
async function answering(body: unknown): Promise<{ url: string; asked: string[]; close(): Promise<void> }> {
  const asked: string[] = [];
  const server: Server = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, asked, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`lookup answers name the attempt, on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    const providers = new Map<string, Provider>();
    const closers: (() => Promise<void>)[] = [];

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider({ ignoreLookupFilter: true });
    });
    afterEach(async () => {
      await Promise.all([...providers.values()].map((p) => p.close()));
      providers.clear();
      await Promise.all(closers.splice(0).map((c) => c()));
      await fake.close();
      await cleanup();
    });

    /** A job on `provider` whose first attempt is in doubt, with `providerRequestId` recorded when given. */
    async function inDoubt(key: string, provider: string, providerRequestId?: string) {
      const lease = { leaseOwner: 'exe_gone', leaseMs: 30_000 };
      const { claimed } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'r', input: INPUT, providers: [provider], firstAttempt: lease });
      const a = claimed!.attempt;
      const fence = { ownerId: OWNER, attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
      if (providerRequestId !== undefined) expect(await store.recordProviderRequestId({ ...fence, providerRequestId })).toBe(true);
      expect(await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
      return (await store.getAttempt(OWNER, a.id))!;
    }

    const storeAt = (attemptId: string, reply: string) =>
      fetch(`${fake.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'onejob-fake-behaviour': JSON.stringify({ reply }) },
        body: JSON.stringify({ model: 'm', messages: INPUT.messages, store: true, metadata: { onejob_attempt_id: attemptId } }),
      }).then((r) => r.json());

    it('stored completions: another attempt\'s completion in an unfiltered list is "not found", never this job\'s result', async () => {
      providers.set('stored', createProvider('stored', { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm', lookup: 'stored-completions', maxDurationMs: 60_000 }));
      const reconciler = new Reconciler({ store, providers });
      await storeAt('att_someone_else', 'another owner\'s secret');
      const a = await inDoubt('foreign', 'stored');
      const { answer, settled } = await reconciler.check(a);
      expect(answer.kind).toBe('not_found');
      expect(settled).toBeNull();
      const job = await store.getJob(OWNER, a.jobId);
      expect({ state: job!.state, result: job!.result, attempt: job!.attempts[0]!.state }).toEqual({ state: 'unknown', result: null, attempt: 'unknown' });
      // Its own completion, listed after another one, is found.
      await storeAt(a.id, 'its own answer');
      await storeAt('att_third', 'a third');
      const found = await reconciler.check((await store.getAttempt(OWNER, a.id))!);
      expect(found.answer.kind).toBe('succeeded');
      const done = await store.getJob(OWNER, a.jobId);
      expect(done).toMatchObject({ state: 'succeeded', result: { content: 'its own answer' } });
      expect(done!.attempts[0]).toMatchObject({ state: 'succeeded', resolvedBy: 'lookup' });
    });

    it('stored completions: past maxDurationMs an unfiltered list of others\' completions is a definite not_found_at_provider', async () => {
      providers.set('stored', createProvider('stored', { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm', lookup: 'stored-completions', maxDurationMs: 1 }));
      const reconciler = new Reconciler({ store, providers });
      await storeAt('att_someone_else', 'not yours');
      const a = await inDoubt('foreign-late', 'stored');
      await new Promise((r) => setTimeout(r, 5));
      const { answer } = await reconciler.check(a);
      expect(answer).toMatchObject({ kind: 'failed', error: { code: 'not_found_at_provider' } });
      const job = await store.getJob(OWNER, a.jobId);
      expect(job).toMatchObject({ state: 'failed', result: null });
    });

    it('openai-responses: a response under another id than the recorded one settles nothing', async () => {
      const other = await answering({
        id: 'resp_other', object: 'response', status: 'completed', model: 'gpt-resp',
        output: [{ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'someone else\'s', annotations: [] }] }],
        usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      });
      closers.push(other.close);
      providers.set('responses', createProvider('responses', { type: 'openai-responses', baseUrl: `${other.url}/v1`, model: 'gpt-resp', maxDurationMs: 60_000 }));
      const reconciler = new Reconciler({ store, providers });
      const a = await inDoubt('resp', 'responses', 'resp_mine');
      const { answer, settled } = await reconciler.check(a);
      expect(answer).toMatchObject({ kind: 'error', message: expect.stringContaining('resp_other') });
      expect(settled).toBeNull();
      expect(other.asked).toEqual(['GET /v1/responses/resp_mine']);
      expect((await store.getJob(OWNER, a.jobId))!.attempts[0]!.state).toBe('unknown');
    });

    it('task: a task under another id than the recorded one settles nothing (succeeded or failed)', async () => {
      for (const status of ['succeeded', 'failed'] as const) {
        const other = await answering({ id: 'task_other', status, output: 'someone else\'s render' });
        closers.push(other.close);
        providers.set(`tasks-${status}`, createProvider(`tasks-${status}`, { type: 'task', baseUrl: `${other.url}/v1/tasks`, maxDurationMs: 60_000 }));
        const reconciler = new Reconciler({ store, providers });
        const a = await inDoubt(`task-${status}`, `tasks-${status}`, 'task_mine');
        const { answer, settled } = await reconciler.check(a);
        expect(answer).toMatchObject({ kind: 'error', message: expect.stringContaining('task_other') });
        expect(settled).toBeNull();
        expect((await store.getJob(OWNER, a.jobId))!.attempts[0]!.state).toBe('unknown');
      }
    });
  });
}
