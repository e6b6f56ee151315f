/**
 * Body limits per endpoint (CONTRACT §3, v3): 1 MiB on `POST /v1/jobs`, 32
 * MiB by default on the gateway endpoints (a chat with an image inline as
 * base64), `gatewayBodyLimitBytes` configurable; past the limit `413
 * payload_too_large` and nothing created.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/build-app.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { ALICE, testConfig } from './http-test-app.ts';

const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;
const MiB = 1024 * 1024;

/** A chat request carrying an image of about `bytes` bytes inline, as the OpenAI SDKs send it. */
function chatWithImage(bytes: number): string {
  const image = `data:image/png;base64,${'A'.repeat(bytes)}`;
  return JSON.stringify({ model: 'summarize', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: image } }] }] });
}

function messagesWithImage(bytes: number): string {
  return JSON.stringify({ model: 'summarize', max_tokens: 16, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(bytes) } }, { type: 'text', text: 'what is this?' }] }] });
}

describe('request body limits per endpoint', () => {
  let store: JobStore;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ store, cleanup } = await createTestStore(sqlite));
  });
  afterAll(async () => {
    await cleanup?.();
  });

  const headers = (key: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${ALICE}`, 'idempotency-key': key, 'content-type': 'application/json', ...extra });
  const jobsWithKey = async (key: string) => (await store.listJobs({ ownerId: 'alice', limit: 200 })).jobs.filter((j) => j.idempotencyKey === key);

  it('by default: a 2 MiB chat (an inline image) is taken on /v1/chat/completions and /v1/messages; 33 MiB is 413; /v1/jobs keeps 1 MiB', async () => {
    const app = buildApp({ store, config: testConfig(), chatCompletions: { maxWaitMs: 50, retryAfterMs: 10 } });
    const chat = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: headers('img-chat'), payload: chatWithImage(2 * MiB) });
    expect(chat.statusCode, chat.body).not.toBe(413);
    expect(await jobsWithKey('img-chat')).toHaveLength(1);
    const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: headers('img-messages'), payload: messagesWithImage(2 * MiB) });
    expect(messages.statusCode, messages.body).not.toBe(413);
    expect(await jobsWithKey('img-messages')).toHaveLength(1);

    const responses = await app.inject({
      method: 'POST', url: '/v1/responses', headers: headers('img-responses'),
      payload: JSON.stringify({ model: 'summarize', input: [{ role: 'user', content: [{ type: 'input_text', text: 'what is this?' }, { type: 'input_image', image_url: `data:image/png;base64,${'A'.repeat(2 * MiB)}` }] }] }),
    });
    expect(responses.statusCode, responses.body).not.toBe(413);
    expect(await jobsWithKey('img-responses')).toHaveLength(1);

    const tooBig = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: headers('img-huge'), payload: chatWithImage(33 * MiB) });
    expect(tooBig.statusCode).toBe(413);
    expect(tooBig.json()).toMatchObject({ code: 'payload_too_large' });
    expect(await jobsWithKey('img-huge')).toHaveLength(0);

    const job = await app.inject({ method: 'POST', url: '/v1/jobs', headers: headers('img-job'), payload: JSON.stringify({ route: 'summarize', input: JSON.parse(chatWithImage(2 * MiB)) }) });
    expect(job.statusCode).toBe(413);
    expect(job.json()).toMatchObject({ code: 'payload_too_large' });
    expect(await jobsWithKey('img-job')).toHaveLength(0);
    await app.close();
  });

  it('gatewayBodyLimitBytes sets the gateway limit; bodyLimitBytes the others', async () => {
    const app = buildApp({ store, config: { ...testConfig({ bodyLimitBytes: 3 * MiB }), gatewayBodyLimitBytes: 2 * MiB }, chatCompletions: { maxWaitMs: 50, retryAfterMs: 10 } });
    const chat = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: headers('cfg-chat'), payload: chatWithImage(2 * MiB + 1000) });
    expect(chat.statusCode).toBe(413);
    const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: headers('cfg-messages'), payload: messagesWithImage(2 * MiB + 1000) });
    expect(messages.statusCode).toBe(413);
    expect(messages.json()).toMatchObject({ code: 'payload_too_large' });
    const job = await app.inject({ method: 'POST', url: '/v1/jobs', headers: headers('cfg-job'), payload: JSON.stringify({ route: 'summarize', input: JSON.parse(chatWithImage(2 * MiB + 1000)) }) });
    expect(job.statusCode).toBe(201);
    await app.close();
  });

  it('endpointBodyLimitBytes gives one gateway endpoint its own limit', async () => {
    const app = buildApp({ store, config: { ...testConfig(), gatewayBodyLimitBytes: 2 * MiB, endpointBodyLimitBytes: { '/v1/messages': 4 * MiB } }, chatCompletions: { maxWaitMs: 50, retryAfterMs: 10 } });
    const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: headers('ep-messages'), payload: messagesWithImage(3 * MiB) });
    expect(messages.statusCode, messages.body).not.toBe(413);
    const chat = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: headers('ep-chat'), payload: chatWithImage(3 * MiB) });
    expect(chat.statusCode).toBe(413);
    await app.close();
  });
});
