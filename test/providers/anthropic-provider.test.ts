/**
 * The anthropic adapter: request translation, and the Messages API over real loopback HTTP.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { anthropicMessagesUrl, buildAnthropicRequestBody } from '../../src/providers/anthropic/anthropic-provider.ts';
import { asChatRequest } from '../../src/providers/chat-request.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { attemptRequest } from './provider-test-support.ts';

describe('anthropic request translation', () => {
  it('moves system and developer messages to the top-level system and requires max_tokens', () => {
    const built = buildAnthropicRequestBody(
      {
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: [{ type: 'text', text: 'Answer in JSON.' }] },
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello' },
          { role: 'user', content: [{ type: 'text', text: 'Again' }] },
        ],
        temperature: 0,
        stop: 'END',
        user: 'u1',
      },
      'claude-test',
    );
    expect(built).toEqual({
      body: {
        model: 'claude-test',
        max_tokens: 4096,
        system: 'Be brief.\n\nAnswer in JSON.',
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello' },
          { role: 'user', content: [{ type: 'text', text: 'Again' }] },
        ],
        temperature: 0,
        stop_sequences: ['END'],
        metadata: { user_id: 'u1' },
      },
    });
  });

  it('takes max_tokens from the input, else from maxOutputTokens', () => {
    const messages = [{ role: 'user' as const, content: 'x' }];
    expect(buildAnthropicRequestBody({ messages, max_tokens: 10 }, 'm', 99)).toMatchObject({ body: { max_tokens: 10 } });
    expect(buildAnthropicRequestBody({ messages, max_completion_tokens: 11 }, 'm', 99)).toMatchObject({ body: { max_tokens: 11 } });
    expect(buildAnthropicRequestBody({ messages }, 'm', 99)).toMatchObject({ body: { max_tokens: 99 } });
  });

  it('refuses what it cannot translate', () => {
    expect(buildAnthropicRequestBody({ messages: [{ role: 'function', content: 'x', name: 'f' }] }, 'm')).toHaveProperty('error');
    expect(buildAnthropicRequestBody({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] }] }, 'm')).toHaveProperty('error');
    expect(buildAnthropicRequestBody({ messages: [{ role: 'system', content: 'only system' }] }, 'm')).toHaveProperty('error');
    expect(
      buildAnthropicRequestBody({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:' } }] }] }, 'm'),
    ).toHaveProperty('error');
  });

  it('builds the Messages URL from a host root or a /v1 base', () => {
    expect(anthropicMessagesUrl('https://api.anthropic.com').href).toBe('https://api.anthropic.com/v1/messages');
    expect(anthropicMessagesUrl('https://api.anthropic.com/v1/').href).toBe('https://api.anthropic.com/v1/messages');
  });
});

describe('anthropic adapter over HTTP', () => {
  let fake: FakeProvider;
  let provider: Provider;

  beforeAll(async () => {
    fake = await startFakeProvider({ apiKey: 'ak-test' });
    provider = createProvider('fallback', { type: 'anthropic', baseUrl: fake.url, apiKey: 'ak-test', model: 'claude-test' });
  });
  afterAll(async () => {
    await provider.close();
    await fake.close();
  });
  afterEach(() => fake.reset());

  it('normalizes a message: text, stop_reason mapped, usage in OpenAI terms', async () => {
    fake.script([{ reply: 'Bonjour', finishReason: 'length', usage: { prompt_tokens: 12, completion_tokens: 4 } }]);
    const outcome = await provider.call(
      attemptRequest({ input: { messages: [{ role: 'system', content: 'French only.' }, { role: 'user', content: 'Hello' }] } }),
    );
    expect(outcome).toMatchObject({
      kind: 'success',
      completion: {
        content: 'Bonjour',
        finish_reason: 'length',
        model: 'claude-test',
        provider: 'fallback',
        usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
      },
      providerRequestId: 'req_fake_1',
    });
    if (outcome.kind === 'success') {
      expect(outcome.raw).toMatchObject({ type: 'message', stop_reason: 'max_tokens', content: [{ type: 'text', text: 'Bonjour' }] });
    }
  });

  it('sends the Messages API headers, the identity headers and the translated body', async () => {
    await provider.call(attemptRequest({ jobId: 'job_x', attemptId: 'att_y', attemptNumber: 2, input: { messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }] } }));
    const [call] = await fake.waitForCalls(1);
    expect(call).toMatchObject({
      protocol: 'anthropic',
      path: '/v1/messages',
      idempotencyKey: 'job_x:2',
      jobId: 'job_x',
      attemptId: 'att_y',
      body: { model: 'claude-test', max_tokens: 4096, system: 'S', messages: [{ role: 'user', content: 'U' }] },
      headers: { 'x-api-key': 'ak-test', 'anthropic-version': '2023-06-01', 'x-request-id': 'job_x', 'onejob-attempt-id': 'att_y' },
    });
    expect(call?.headers.authorization).toBeUndefined();
  });

  it('529 overloaded_error is a definite failure', async () => {
    fake.script([{ status: 529 }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome).toMatchObject({
      kind: 'failure',
      error: { code: 'provider_overloaded', details: { status: 529, provider_error_type: 'overloaded_error', retry_after_ms: 1000 } },
    });
  });

  it('429 rate_limit_error is a definite failure', async () => {
    fake.script([{ status: 429 }]);
    expect(await provider.call(attemptRequest())).toMatchObject({ kind: 'failure', error: { code: 'provider_rate_limited', details: { provider_error_type: 'rate_limit_error' } } });
  });

  it('500 api_error is ambiguous', async () => {
    fake.script([{ status: 500 }]);
    expect(await provider.call(attemptRequest())).toMatchObject({ kind: 'ambiguous', error: { code: 'provider_server_error', details: { provider_error_type: 'api_error' } } });
  });

  it('a reset after sending is ambiguous', async () => {
    fake.script([{ reset: 'before-headers' }]);
    expect(await provider.call(attemptRequest())).toMatchObject({ kind: 'ambiguous', error: { code: 'connection_lost' } });
  });

  it('an input the adapter cannot translate is a failure and sends nothing', async () => {
    const outcome = await provider.call(attemptRequest({ input: asChatRequest({ messages: [{ role: 'tool', content: 'x' }] }) }));
    expect(outcome).toMatchObject({ kind: 'failure', error: { code: 'invalid_input' } });
    expect(fake.calls).toHaveLength(0);
  });
});
