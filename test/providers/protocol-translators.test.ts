/**
 * The endpoint translators of src/protocols: an Anthropic Messages request
 * to the internal chat input and back, a result to a Messages response, and
 * both stream encoders, each checked by decoding its output with the
 * adapters' own stream decoders.
 */
import { describe, expect, it } from 'vitest';
import { AnthropicStreamDecoder, buildAnthropicRequestBody } from '../../src/providers/anthropic/anthropic-provider.ts';
import { accumulateDeltas } from '../../src/providers/completion-accumulator.ts';
import { OpenAIStreamDecoder } from '../../src/providers/openai/openai-provider.ts';
import type { ChatDelta, NormalizedCompletion } from '../../src/providers/provider.ts';
import {
  chatResultToMessagesResponse,
  messagesRequestToChatInput,
  messagesSseEvent,
  MessagesStreamEncoder,
} from '../../src/protocols/anthropic-messages.ts';
import { ChatChunkEncoder, chatSseEvent } from '../../src/protocols/openai-chat-stream.ts';

const schema = { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] };

const messagesRequest = {
  model: 'route:chat',
  max_tokens: 512,
  system: [{ type: 'text', text: 'Be terse.', cache_control: { type: 'ephemeral' } }],
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }, { type: 'text', text: 'And now?' }] },
  ],
  tools: [{ name: 'get_weather', description: 'Weather by city', input_schema: schema }],
  tool_choice: { type: 'any', disable_parallel_tool_use: true },
  stop_sequences: ['END'],
  temperature: 0.2,
  metadata: { user_id: 'u-7' },
  stream: true,
};

const completion: NormalizedCompletion = {
  content: 'Looking it up.',
  finish_reason: 'tool_calls',
  model: 'claude-x',
  provider: 'fallback',
  usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 },
  tool_calls: [{ id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
};

describe('messagesRequestToChatInput', () => {
  it('translates system, tool_use, tool_result, tools, tool_choice, stop_sequences and metadata', () => {
    const t = messagesRequestToChatInput(messagesRequest);
    expect(t).toEqual({
      ok: true,
      model: 'route:chat',
      stream: true,
      input: {
        messages: [
          { role: 'system', content: 'Be terse.' },
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', content: 'Checking.', tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
          { role: 'user', content: 'And now?' },
        ],
        max_tokens: 512,
        temperature: 0.2,
        stop: ['END'],
        user: 'u-7',
        tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather by city', parameters: schema } }],
        tool_choice: 'required',
        parallel_tool_calls: false,
      },
    });
  });

  it('goes back to the same Messages request through the anthropic adapter', () => {
    const t = messagesRequestToChatInput(messagesRequest);
    if (!t.ok) throw new Error(t.message);
    const back = buildAnthropicRequestBody(t.input, 'claude-x');
    if ('error' in back) throw new Error(back.error);
    const { model: _m, stream: _s, system: _sys, ...rest } = messagesRequest;
    expect(back.body).toEqual({ ...rest, model: 'claude-x', system: 'Be terse.', tool_choice: { type: 'any', disable_parallel_tool_use: true } });
  });

  it('maps output_config.format to response_format json_schema', () => {
    const t = messagesRequestToChatInput({ model: 'chat', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], output_config: { format: { type: 'json_schema', schema } } });
    expect(t).toMatchObject({ ok: true, input: { response_format: { type: 'json_schema', json_schema: { name: 'output', schema, strict: true } } } });
  });

  it('names a member it cannot carry, or a malformed one', () => {
    const base = { model: 'chat', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] };
    expect(messagesRequestToChatInput({ ...base, container: 'c' })).toMatchObject({ ok: false, member: 'container' });
    expect(messagesRequestToChatInput({ ...base, max_tokens: undefined })).toMatchObject({ ok: false, member: 'max_tokens' });
    expect(messagesRequestToChatInput({ ...base, tools: [{ type: 'web_search_20250305', name: 'web_search' }] })).toMatchObject({ ok: false, member: 'tools[0]' });
    expect(messagesRequestToChatInput({ ...base, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] })).toMatchObject({ ok: false, member: 'messages[0].content[0].type' });
  });
});

describe('chatResultToMessagesResponse', () => {
  it('answers the Messages shape: text and tool_use blocks, stop_reason, usage', () => {
    expect(chatResultToMessagesResponse(completion, { id: 'msg_job1', model: 'chat' })).toMatchObject({
      id: 'msg_job1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [
        { type: 'text', text: 'Looking it up.' },
        { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 20, output_tokens: 9 },
    });
    // A contract's parsed JSON content, or a resolve's arbitrary result, is sent as text.
    expect(chatResultToMessagesResponse({ ...completion, content: { summary: 'ok' }, tool_calls: null, finish_reason: 'length' }, { id: 'm', model: 'chat' })).toMatchObject({
      content: [{ type: 'text', text: '{"summary":"ok"}' }],
      stop_reason: 'max_tokens',
    });
    expect(chatResultToMessagesResponse({ answer: 42 }, { id: 'm', model: 'chat' })).toMatchObject({ content: [{ type: 'text', text: '{"answer":42}' }], stop_reason: 'end_turn', model: 'chat' });
  });
});

/** Feeds SSE text to a decoder the way the adapters do, event by event. */
function decode(sse: string, decoder: OpenAIStreamDecoder | AnthropicStreamDecoder): ChatDelta[] {
  const out: ChatDelta[] = [];
  for (const block of sse.split('\n\n').filter((b) => b.trim() !== '')) {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1] ?? '';
    const step = decoder.decode(event, data);
    if (!('deltas' in step)) throw new Error(JSON.stringify(step));
    out.push(...step.deltas);
  }
  return out;
}

describe('stream encoders', () => {
  it('MessagesStreamEncoder replays a result as Anthropic events that decode back to it', () => {
    const events = new MessagesStreamEncoder({ id: 'msg_job1', model: 'chat' }).replay(completion);
    expect(events.map((e) => e.type)).toEqual([
      'message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
    ]);
    const decoder = new AnthropicStreamDecoder();
    const deltas = decode(events.map((e) => messagesSseEvent(e)).join(''), decoder);
    expect(decoder.done).toBe(true);
    expect(accumulateDeltas(deltas, 'fallback', 'x')).toEqual(completion);
  });

  it('MessagesStreamEncoder relays live deltas, opening and closing blocks as the output changes', () => {
    const enc = new MessagesStreamEncoder({ id: 'msg_2', model: 'chat' });
    const events = [
      ...enc.delta({ type: 'model', model: 'claude-y' }),
      ...enc.delta({ type: 'text', text: 'Hi' }),
      ...enc.delta({ type: 'text', text: ' there' }),
      ...enc.delta({ type: 'tool_call', index: 0, id: 't1', name: 'f', arguments: '' }),
      ...enc.delta({ type: 'tool_call', index: 0, arguments: '{"a":' }),
      ...enc.delta({ type: 'tool_call', index: 0, arguments: '1}' }),
      ...enc.delta({ type: 'finish', finish_reason: 'tool_calls' }),
      ...enc.delta({ type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }),
      ...enc.finish(),
    ];
    const decoder = new AnthropicStreamDecoder();
    const result = accumulateDeltas(decode(events.map((e) => messagesSseEvent(e)).join(''), decoder), 'p', 'x');
    expect(result).toEqual({
      content: 'Hi there', finish_reason: 'tool_calls', model: 'claude-y', provider: 'p', usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
      tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
    });
  });

  it('ChatChunkEncoder replays a result as chat.completion.chunk events that decode back to it', () => {
    const enc = new ChatChunkEncoder({ id: 'chatcmpl-job1', model: 'chat', created: 1, includeUsage: true });
    const chunks = enc.replay(completion);
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: completion.usage });
    const decoder = new OpenAIStreamDecoder();
    const sse = chunks.map((c) => chatSseEvent(c)).join('') + 'data: [DONE]\n\n';
    expect(accumulateDeltas(decode(sse, decoder), 'fallback', 'x')).toEqual(completion);
    expect(decoder.done).toBe(true);
  });
});
