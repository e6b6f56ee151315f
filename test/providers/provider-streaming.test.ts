/**
 * `Provider.stream` against the fake provider over real loopback HTTP, in
 * both protocols: deltas as they arrive, tool-call deltas, an error event
 * mid-stream (definite failure), a cut (ambiguous), the deadline (ambiguous),
 * and the accumulated result equal to what `call` gives for the same script.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { ChatDelta, Provider, ProviderOutcome } from '../../src/providers/provider.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { attemptRequest } from './provider-test-support.ts';

const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

describe.each(['openai', 'anthropic'] as const)('%s streaming', (protocol) => {
  let fake: FakeProvider;
  let provider: Provider;

  beforeAll(async () => {
    fake = await startFakeProvider();
    provider = createProvider('p', { type: protocol, baseUrl: protocol === 'openai' ? `${fake.url}/v1` : fake.url, model: 'model-x' });
  });
  afterAll(async () => {
    await provider.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  /** Streams one attempt, collecting deltas; `until` resolves when a predicate over the deltas so far holds. */
  function streamed(input = attemptRequest({ input: { messages: [{ role: 'user', content: 'hi' }], tools } })) {
    const deltas: ChatDelta[] = [];
    const waiters: { test: (d: ChatDelta[]) => boolean; resolve: () => void }[] = [];
    const outcome = provider.stream(input, (d) => {
      deltas.push(d);
      for (const w of waiters.filter((x) => x.test(deltas))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    });
    const until = (test: (d: ChatDelta[]) => boolean) => (test(deltas) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ test, resolve })));
    return { deltas, outcome, until };
  }
  const text = (deltas: ChatDelta[]) => deltas.flatMap((d) => (d.type === 'text' ? [d.text] : []));

  it('reports every SSE event to onEvent (a sign of life for the idle bound), the terminator included', async () => {
    fake.script([{ chunks: ['a ', 'b ', 'c'] }]);
    let events = 0;
    let deltas = 0;
    const outcome = await provider.stream(attemptRequest({ input: { messages: [{ role: 'user', content: 'hi' }] }, onEvent: () => void events++ }), () => void deltas++);
    expect(outcome.kind).toBe('success');
    // Every event, also those that carry no delta (the terminator at least): more events than deltas.
    expect(deltas).toBeGreaterThanOrEqual(3);
    expect(events).toBeGreaterThan(deltas);
  });

  it('asks for a stream upstream and relays each text chunk before the stream ends', async () => {
    fake.script([{ chunks: ['One ', 'two ', 'three.'], chunkDelayMs: 5, streamGate: { afterChunks: 2, gate: 'rest' } }]);
    const s = streamed();
    await s.until((d) => text(d).length === 2);
    // The provider is still holding the rest: the first two pieces arrived on their own.
    expect(text(s.deltas)).toEqual(['One ', 'two ']);
    expect(fake.calls[0]).toMatchObject({ result: 'pending', stream: true, chunksSent: 2 });
    fake.release('rest');
    const outcome = await s.outcome;
    expect(outcome).toMatchObject({ kind: 'success', completion: { content: 'One two three.', finish_reason: 'stop', tool_calls: null, model: 'model-x' } });
    expect(text(s.deltas)).toEqual(['One ', 'two ', 'three.']);
    const body = fake.calls[0]?.body as Record<string, unknown>;
    expect(body.stream).toBe(true);
    if (protocol === 'openai') expect(body.stream_options).toEqual({ include_usage: true });
    expect(s.deltas.filter((d) => d.type === 'usage').at(-1)).toMatchObject({ usage: { completion_tokens: expect.any(Number), prompt_tokens: expect.any(Number) } });
    if (outcome.kind === 'success') expect(outcome.completion.usage.completion_tokens).toBeGreaterThan(0);
  });

  it('streams tool calls as deltas: id and name first, then the arguments in pieces', async () => {
    fake.script([{ reply: 'Let me check.', toolCalls: [{ id: 'call_a', name: 'get_weather', arguments: { city: 'Paris' } }, { id: 'call_b', name: 'get_weather', arguments: { city: 'Rome' } }] }]);
    const s = streamed();
    const outcome = await s.outcome;
    const calls = s.deltas.filter((d): d is Extract<ChatDelta, { type: 'tool_call' }> => d.type === 'tool_call');
    expect(calls[0]).toMatchObject({ index: 0, id: 'call_a', name: 'get_weather' });
    expect(calls.filter((c) => c.index === 0).length).toBeGreaterThan(2); // the arguments came in several pieces
    expect(calls.filter((c) => c.index === 0).map((c) => c.arguments ?? '').join('')).toBe('{"city":"Paris"}');
    expect(calls.find((c) => c.index === 1)).toMatchObject({ id: 'call_b', name: 'get_weather' });
    expect(outcome).toMatchObject({
      kind: 'success',
      completion: {
        content: 'Let me check.',
        finish_reason: 'tool_calls',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
    });
  });

  it('ends in the same normalized result as call() for the same script', async () => {
    const behaviour = { reply: 'Same answer, twice.', toolCalls: [{ id: 'call_same', name: 'get_weather', arguments: '{"city":"Oslo"}' }], usage: { prompt_tokens: 11, completion_tokens: 7 } };
    fake.script([behaviour, behaviour]);
    const whole = await provider.call(attemptRequest({ input: { messages: [{ role: 'user', content: 'hi' }], tools } }));
    const s = streamed();
    const outcome = await s.outcome;
    expect(whole.kind).toBe('success');
    expect(outcome.kind).toBe('success');
    if (whole.kind === 'success' && outcome.kind === 'success') {
      expect(outcome.completion).toEqual(whole.completion);
      expect(outcome.completion.usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    }
  });

  it('an error event mid-stream is a definite failure, with what had arrived', async () => {
    fake.script([{ chunks: ['partial ', 'answer ', 'never'], streamError: { afterChunks: 2, message: 'overloaded mid-way' } }]);
    const s = streamed();
    const outcome = await s.outcome;
    expect(outcome).toMatchObject({
      kind: 'failure',
      error: { code: 'provider_stream_error', details: { provider: 'p', status: 200, provider_message: 'overloaded mid-way' } },
      partial: { content: 'partial answer ' },
    });
    expect((await fake.waitForResult(1)).result).toBe('stream-error');
  });

  it('a connection cut mid-stream is ambiguous, with what had arrived', async () => {
    fake.script([{ chunks: ['a ', 'b ', 'c'], streamCut: { afterChunks: 1 } }]);
    const outcome = await streamed().outcome;
    expect(outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'connection_lost', details: { phase: 'after_headers', status: 200 } }, partial: { content: 'a ' } });
  });

  it('a cut after all the content but before the end event is still ambiguous', async () => {
    fake.script([{ chunks: ['all ', 'here'], streamCut: { afterChunks: 99 } }]);
    const outcome = await streamed().outcome;
    expect(outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'connection_lost' }, partial: { content: 'all here' } });
  });

  it('the deadline firing mid-stream is ambiguous (aborted after send)', async () => {
    fake.script([{ chunks: ['slow ', 'start'], streamGate: { afterChunks: 1, gate: 'never' } }]);
    const controller = new AbortController();
    const s = streamed(attemptRequest({ signal: controller.signal }));
    await s.until((d) => text(d).length === 1);
    controller.abort(new DOMException('deadline', 'TimeoutError'));
    expect(await s.outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'aborted_after_send' }, partial: { content: 'slow ' } });
  });

  it('classifies an error status on a stream request exactly like call()', async () => {
    fake.script([{ status: 429 }, { status: 500 }]);
    const rateLimited: ProviderOutcome = await streamed().outcome;
    expect(rateLimited).toMatchObject({ kind: 'failure', error: { code: 'provider_rate_limited', details: { status: 429 } } });
    expect(await streamed().outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'provider_server_error' } });
  });

  it('calls onDispatched once and refuses an unsupported member without sending', async () => {
    fake.script([{ reply: 'ok' }]);
    let dispatched = 0;
    const outcome = await provider.stream(attemptRequest({ onDispatched: () => (dispatched += 1) }), () => {});
    expect(outcome.kind).toBe('success');
    expect(dispatched).toBe(1);
    if (protocol === 'anthropic') {
      const refused = await provider.stream(attemptRequest({ input: { messages: [{ role: 'user', content: 'x' }], logprobs: true } }), () => {});
      expect(refused).toMatchObject({ kind: 'failure', error: { code: 'invalid_input' } });
      expect(provider.unsupportedMembers({ messages: [{ role: 'user', content: 'x' }], logprobs: true, n: 3 })).toEqual(['logprobs', 'n']);
      expect(fake.calls).toHaveLength(1);
    }
  });
});

describe('a server that ignores stream: true', () => {
  it('answers with one JSON body: the deltas are emitted from it and the result is the same', async () => {
    const fake = await startFakeProvider();
    const provider = createProvider('p', { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'm' });
    try {
      fake.script([{ rawBody: JSON.stringify({ model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'whole' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1 } }) }]);
      const deltas: ChatDelta[] = [];
      const outcome = await provider.stream(attemptRequest(), (d) => deltas.push(d));
      expect(outcome).toMatchObject({ kind: 'success', completion: { content: 'whole' } });
      expect(deltas).toContainEqual({ type: 'text', text: 'whole' });
    } finally {
      await provider.close();
      await fake.close();
    }
  });
});
