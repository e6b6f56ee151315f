/**
 * The openai adapter against the fake server over real loopback HTTP.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider, ProviderOutcome } from '../../src/providers/provider.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { attemptRequest, closedPort } from './provider-test-support.ts';

let fake: FakeProvider;
let provider: Provider;

beforeAll(async () => {
  fake = await startFakeProvider({ apiKey: 'sk-test' });
  provider = createProvider('primary', {
    type: 'openai',
    baseUrl: `${fake.url}/v1`,
    apiKey: 'sk-test',
    model: 'gpt-test',
    headers: { 'X-Custom': 'yes', 'Idempotency-Key': 'must-be-overridden' },
  });
});
afterAll(async () => {
  await provider.close();
  await fake.close();
});
afterEach(() => fake.reset());

function errorOf(outcome: ProviderOutcome) {
  if (outcome.kind === 'success') throw new Error(`expected an error, got success: ${outcome.completion.content}`);
  return outcome.error;
}

describe('openai adapter: success', () => {
  it('normalizes a completion and keeps the raw body', async () => {
    fake.script([{ reply: 'Hello there', usage: { prompt_tokens: 7, completion_tokens: 3 }, model: 'gpt-test-2025' }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome).toMatchObject({
      kind: 'success',
      completion: {
        content: 'Hello there',
        finish_reason: 'stop',
        model: 'gpt-test-2025',
        provider: 'primary',
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
      },
      providerRequestId: 'req_fake_1',
    });
    if (outcome.kind !== 'success') return;
    expect(outcome.raw).toMatchObject({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' } }] });
  });

  it('passes a JSON reply through as text and maps finish_reason', async () => {
    fake.script([{ reply: { summary: 'short' }, finishReason: 'length' }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome).toMatchObject({ kind: 'success', completion: { content: '{"summary":"short"}', finish_reason: 'length' } });
  });

  it('sends the identity headers, the API key, the configured model and stream: false', async () => {
    const request = attemptRequest({
      jobId: 'job_abc',
      attemptId: 'att_def',
      attemptNumber: 3,
      input: { messages: [{ role: 'user', content: 'hi' }], temperature: 0, model: 'ignored', stream: false },
    });
    await provider.call(request);
    const [call] = await fake.waitForCalls(1);
    expect(call).toMatchObject({
      protocol: 'openai',
      path: '/v1/chat/completions',
      idempotencyKey: 'job_abc:3',
      jobId: 'job_abc',
      attemptId: 'att_def',
      body: { model: 'gpt-test', stream: false, temperature: 0, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(call?.headers).toMatchObject({
      authorization: 'Bearer sk-test',
      'x-request-id': 'job_abc',
      'onejob-job-id': 'job_abc',
      'onejob-attempt-id': 'att_def',
      'x-custom': 'yes',
      'content-type': 'application/json',
    });
  });

  it('calls onDispatched exactly once, before the outcome', async () => {
    let dispatched = 0;
    const outcome = await provider.call(attemptRequest({ onDispatched: () => (dispatched += 1) }));
    expect(outcome.kind).toBe('success');
    expect(dispatched).toBe(1);
  });

  it('ignores an onDispatched that throws', async () => {
    const outcome = await provider.call(attemptRequest({ onDispatched: () => { throw new Error('boom'); } }));
    expect(outcome.kind).toBe('success');
  });
});

describe('openai adapter: definite failures (not executed)', () => {
  it.each([
    [429, 'provider_rate_limited'],
    [503, 'provider_overloaded'],
    [400, 'provider_rejected'],
    [401, 'provider_rejected'],
    [403, 'provider_rejected'],
    [404, 'provider_rejected'],
    [422, 'provider_rejected'],
  ] as const)('%i is a failure (%s)', async (status, code) => {
    fake.script([{ status }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome.kind).toBe('failure');
    expect(errorOf(outcome)).toMatchObject({ code, details: { provider: 'primary', status, phase: 'after_body' } });
  });

  it('reports the provider error type, message and Retry-After of a 429', async () => {
    fake.script([{ status: 429, headers: { 'retry-after': '2' } }]);
    const error = errorOf(await provider.call(attemptRequest()));
    expect(error.details).toMatchObject({ provider_error_type: 'requests', provider_message: 'Rate limit reached for requests.', retry_after_ms: 2000 });
    expect(error.message).toContain('429');
  });

  it('a wrong API key is a rejected failure', async () => {
    const wrong = createProvider('wrongkey', { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'nope', model: 'm' });
    try {
      const error = errorOf(await wrong.call(attemptRequest()));
      expect(error).toMatchObject({ code: 'provider_rejected', details: { status: 401 } });
    } finally {
      await wrong.close();
    }
  });

  it('connection refused is a failure, and the request was never dispatched', async () => {
    const port = await closedPort();
    const refused = createProvider('gone', { type: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' });
    let dispatched = false;
    try {
      const outcome = await refused.call(attemptRequest({ onDispatched: () => (dispatched = true) }));
      expect(outcome.kind).toBe('failure');
      expect(errorOf(outcome)).toMatchObject({ code: 'provider_unreachable', details: { phase: 'before_send', cause_code: 'ECONNREFUSED' } });
      expect(dispatched).toBe(false);
    } finally {
      await refused.close();
    }
  });

  it('a signal aborted before the call is a failure and sends nothing', async () => {
    const controller = new AbortController();
    controller.abort(new Error('deadline'));
    const outcome = await provider.call(attemptRequest({ signal: controller.signal }));
    expect(errorOf(outcome)).toMatchObject({ code: 'aborted_before_send' });
    expect(outcome.kind).toBe('failure');
    expect(fake.calls).toHaveLength(0);
  });

  it('an invalid input is a failure and sends nothing', async () => {
    const outcome = await provider.call(attemptRequest({ input: { messages: [] } }));
    expect(outcome.kind).toBe('failure');
    expect(errorOf(outcome).code).toBe('invalid_input');
    expect(fake.calls).toHaveLength(0);
  });
});

describe('openai adapter: ambiguous outcomes (maybe executed)', () => {
  it.each([500, 502, 504, 409])('%i is ambiguous', async (status) => {
    fake.script([{ status }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome.kind).toBe('ambiguous');
    expect(errorOf(outcome)).toMatchObject({ code: 'provider_server_error', details: { status } });
  });

  it.each(['before-headers', 'after-headers', 'mid-body'] as const)('a connection reset %s is ambiguous', async (reset) => {
    let dispatched = false;
    fake.script([{ reset }]);
    const outcome = await provider.call(attemptRequest({ onDispatched: () => (dispatched = true) }));
    expect(outcome.kind).toBe('ambiguous');
    expect(errorOf(outcome)).toMatchObject({
      code: 'connection_lost',
      details: { phase: reset === 'before-headers' ? 'after_send' : 'after_headers' },
    });
    expect(dispatched).toBe(true);
    expect((await fake.waitForResult(1)).result).toBe('reset');
  });

  it('a malformed body is ambiguous', async () => {
    fake.script([{ malformed: true }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome.kind).toBe('ambiguous');
    expect(errorOf(outcome)).toMatchObject({ code: 'malformed_response', details: { status: 200 } });
  });

  it('a 200 that is not a completion is ambiguous', async () => {
    fake.script([{ rawBody: '{"error":{"message":"upstream died"}}' }]);
    const outcome = await provider.call(attemptRequest());
    expect(outcome.kind).toBe('ambiguous');
    expect(errorOf(outcome).code).toBe('malformed_response');
  });

  it('an abort while the provider holds the request is ambiguous, at once', async () => {
    fake.script([{ hang: true }]);
    const controller = new AbortController();
    const pending = provider.call(attemptRequest({ signal: controller.signal }));
    await fake.waitForCalls(1); // the provider has the request
    controller.abort(new DOMException('deadline passed', 'TimeoutError'));
    const outcome = await pending;
    expect(outcome.kind).toBe('ambiguous');
    expect(errorOf(outcome)).toMatchObject({ code: 'aborted_after_send', details: { phase: 'after_send', cause_code: 'TimeoutError' } });
    expect((await fake.waitForResult(1)).result).toBe('client-closed');
  });

  it('the fake closing under a hanging call is ambiguous', async () => {
    const other = await startFakeProvider({ script: [{ hang: true }] });
    const p = createProvider('other', { type: 'openai', baseUrl: other.url, model: 'm' });
    try {
      const pending = p.call(attemptRequest());
      await other.waitForCalls(1);
      const closing = other.close();
      const outcome = await pending;
      await closing;
      expect(outcome.kind).toBe('ambiguous');
      expect(errorOf(outcome).code).toBe('connection_lost');
      expect(other.calls[0]?.result).toBe('server-closed');
    } finally {
      await p.close();
    }
  });
});
