/**
 * Callers that send no key (CONTRACT §12) over real HTTP, on SQLite and
 * PostgreSQL: in `fingerprint` mode concurrent keyless duplicates are one job
 * and one provider call, a finished one is replayed for `windowMs` and then
 * the same body is a new job; every answer names the key it used; `reject`
 * mode (the default) is unchanged.
 */
import { readFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { SENDING_A_KEY_DOCS } from '../../src/http/idempotency-key-missing.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_keyless_0123456789';
const WINDOW_MS = 1_500;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`keyless creates (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let apps: FastifyInstance[] = [];
    let fingerprintUrl: string;
    let rejectUrl: string;
    let seq = 0;

    const configOf = (mode: 'reject' | 'fingerprint'): OnejobConfig => defineConfig({
      apiKeys: { [TOKEN]: 'alice' },
      keyless: { mode, windowMs: WINDOW_MS },
      providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 } },
      routes: { chat: { providers: ['primary'] } },
    });

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = configOf('fingerprint');
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      const fingerprintApp = buildApp({ store, config, executor, waitRecheckMs: 100, chatCompletions: { maxWaitMs: 5_000, retryAfterMs: 100 } });
      const rejectApp = buildApp({ store, config: configOf('reject'), executor, waitRecheckMs: 100 });
      apps = [fingerprintApp, rejectApp];
      fingerprintUrl = await listen(fingerprintApp);
      rejectUrl = await listen(rejectApp);
    });
    afterAll(async () => {
      for (const app of apps) await app.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const chat = (baseUrl: string, content: string, headers: Record<string, string> = {}) =>
      fetch(`${baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content }] }),
      });

    it('concurrent keyless duplicates are one job and one provider call; each answer names the key it used', async () => {
      const content = `storm ${++seq}`;
      fake.when({ contains: content }, { delayMs: 300, reply: 'the one answer' });
      const before = fake.calls.length;
      const answers = await Promise.all(Array.from({ length: 8 }, () => chat(fingerprintUrl, content)));
      const bodies = await Promise.all(answers.map((r) => r.json() as Promise<{ choices: { message: { content: string } }[] }>));
      expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
      expect(bodies.every((b) => b.choices[0]!.message.content === 'the one answer')).toBe(true);
      expect(new Set(answers.map((r) => r.headers.get('onejob-job-id'))).size).toBe(1);
      const keys = new Set(answers.map((r) => r.headers.get('idempotency-key')));
      expect(keys.size).toBe(1);
      expect([...keys][0]).toMatch(/^keyless:/);
      // The first answers as a create, every other one as a replay.
      expect(answers.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(7);
      expect(fake.calls.slice(before).filter((c) => JSON.stringify(c.body).includes(content))).toHaveLength(1);
    });

    it('a finished keyless job is replayed within windowMs; after it, the same body is a new job with a new key', async () => {
      const content = `window ${++seq}`;
      const first = await chat(fingerprintUrl, content);
      expect(first.status).toBe(200);
      const replay = await chat(fingerprintUrl, content);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('onejob-job-id')).toBe(first.headers.get('onejob-job-id'));
      await new Promise((r) => setTimeout(r, WINDOW_MS + 200));
      const later = await chat(fingerprintUrl, content);
      expect(later.status).toBe(200);
      expect(later.headers.get('idempotent-replayed')).toBeNull();
      expect(later.headers.get('onejob-job-id')).not.toBe(first.headers.get('onejob-job-id'));
      expect(later.headers.get('idempotency-key')).not.toBe(first.headers.get('idempotency-key'));
      expect(fake.calls.filter((c) => JSON.stringify(c.body).includes(content))).toHaveLength(2);
    });

    it('a keyed request is unchanged in fingerprint mode and is answered with its own key', async () => {
      const content = `keyed ${++seq}`;
      const a = await chat(fingerprintUrl, content, { 'idempotency-key': `k-${seq}` });
      expect(a.status).toBe(200);
      expect(a.headers.get('idempotency-key')).toBe(`k-${seq}`);
      // The keyless twin of the same body is another intent.
      const b = await chat(fingerprintUrl, content);
      expect(b.headers.get('onejob-job-id')).not.toBe(a.headers.get('onejob-job-id'));
    });

    it('POST /v1/jobs without a key in fingerprint mode: 201, then 200 replayed, with the key in the answer', async () => {
      const post = () => fetch(`${fingerprintUrl}/v1/jobs`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'chat', input: { messages: [{ role: 'user', content: `job ${seq}` }] } }),
      });
      const a = await post();
      const b = await post();
      expect(a.status).toBe(201);
      expect(b.status).toBe(200);
      expect(b.headers.get('idempotent-replayed')).toBe('true');
      const [ja, jb] = [await a.json(), await b.json()] as { id: string; idempotency_key: string }[];
      expect(jb!.id).toBe(ja!.id);
      expect(a.headers.get('idempotency-key')).toBe(ja!.idempotency_key);
    });

    it('POST /v1/responses without a key in fingerprint mode: concurrent duplicates are one job and one provider call', async () => {
      const content = `responses ${++seq}`;
      fake.when({ contains: content }, { delayMs: 200, reply: 'one response' });
      const post = () => fetch(`${fingerprintUrl}/v1/responses`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat', input: content }),
      });
      const answers = await Promise.all([post(), post(), post()]);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(new Set(answers.map((r) => r.headers.get('onejob-job-id'))).size).toBe(1);
      expect(String(answers[0]!.headers.get('idempotency-key'))).toMatch(/^keyless:/);
      expect(fake.calls.filter((c) => JSON.stringify(c.body).includes(content))).toHaveLength(1);
    });

    it('reject mode (the default) still answers 400 idempotency_key_missing and creates nothing', async () => {
      const content = `reject ${++seq}`;
      const before = (await store.listJobs({ ownerId: 'alice', limit: 200 })).jobs.length;
      const r = await chat(rejectUrl, content);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { code: string }).code).toBe('idempotency_key_missing');
      const jobs = await fetch(`${rejectUrl}/v1/jobs`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'chat', input: {} }),
      });
      expect(jobs.status).toBe(400);
      expect((await store.listJobs({ ownerId: 'alice', limit: 200 })).jobs.length).toBe(before);
      expect(fake.calls.filter((c) => JSON.stringify(c.body).includes(content))).toHaveLength(0);
    });

    it("the 400's message says how to send a key with each client, that keyless mode exists, and where the docs are: on every create route, as the SDKs show it", async () => {
      const content = `message ${++seq}`;
      const openai = new OpenAI({ apiKey: TOKEN, baseURL: `${rejectUrl}/v1`, maxRetries: 0 });
      const anthropic = new Anthropic({ apiKey: TOKEN, baseURL: rejectUrl, maxRetries: 0 });
      const messages = [{ role: 'user' as const, content }];
      const rejected = async (p: Promise<unknown>): Promise<{ status: number; message: string }> => {
        const e = await p.then(() => null, (err: unknown) => err);
        if (!(e instanceof OpenAI.APIError) && !(e instanceof Anthropic.APIError)) throw new Error(`expected an APIError, got ${String(e)}`);
        // The Anthropic SDK's `message` is the raw body; the text a caller reads is its error.message.
        const message = e instanceof Anthropic.APIError ? (e.error as { error: { message: string } }).error.message : e.message;
        return { status: e.status ?? 0, message };
      };
      const jobs = await fetch(`${rejectUrl}/v1/jobs`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'chat', input: { content } }),
      });
      const answers = [
        { status: jobs.status, message: ((await jobs.json()) as { detail: string }).detail },
        await rejected(openai.chat.completions.create({ model: 'chat', messages })),
        await rejected(openai.responses.create({ model: 'chat', input: content })),
        await rejected(anthropic.messages.create({ model: 'chat', max_tokens: 16, messages })),
      ];
      for (const { status, message } of answers) {
        expect(status).toBe(400);
        expect(message).toContain('Idempotency-Key');
        expect(message).toContain('intentFetch()');
        expect(message).toContain("from 'onejob/client'");
        expect(message).toContain("headers: { 'Idempotency-Key': key }");
        expect(message).toContain('"keyless": {"mode": "fingerprint"}');
        expect(message).toContain(SENDING_A_KEY_DOCS);
      }
      // The address names a file and a heading that exist.
      const [file, anchor] = SENDING_A_KEY_DOCS.split('#') as [string, string];
      const headings = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').split('\n').filter((l) => l.startsWith('## '));
      expect(headings.map((h) => h.slice(3).toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-'))).toContain(anchor);
      expect(fake.calls.filter((c) => JSON.stringify(c.body).includes(content))).toHaveLength(0);
    });
  });
}
