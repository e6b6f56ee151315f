/**
 * OpenAI ↔ Anthropic translation of a chat job's input and of answers, and
 * the members a protocol cannot express (pure functions, no I/O).
 */
import { describe, expect, it } from 'vitest';
import { anthropicMessageDeltas, buildAnthropicRequestBody, unsupportedAnthropicMembers } from '../../src/providers/anthropic/anthropic-provider.ts';
import { accumulateDeltas, completionDeltas } from '../../src/providers/completion-accumulator.ts';
import { buildOpenAIRequestBody, openAICompletionDeltas, unsupportedOpenAIMembers } from '../../src/providers/openai/openai-provider.ts';
import type { ChatRequest } from '../../src/providers/provider.ts';

const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

describe('OpenAI request → Anthropic request', () => {
  it('translates tools, tool_choice, assistant tool calls, tool results, system and stop', () => {
    const input: ChatRequest = {
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: 'rain' }] },
        { role: 'user', content: 'Thanks. Summarize.' },
      ],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      stop: ['END'],
      max_completion_tokens: 300,
      user: 'u-1',
    };
    expect(unsupportedAnthropicMembers(input)).toEqual([]);
    expect(buildAnthropicRequestBody(input, 'claude-x')).toEqual({
      body: {
        model: 'claude-x',
        max_tokens: 300,
        system: 'You are terse.',
        messages: [
          { role: 'user', content: 'Weather in Paris and Rome?' },
          {
            role: 'assistant',
            content: [
              { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
              { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Rome' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'call_1', content: 'sunny' },
              { type: 'tool_result', tool_use_id: 'call_2', content: 'rain' },
              { type: 'text', text: 'Thanks. Summarize.' },
            ],
          },
        ],
        tools: [{ name: 'get_weather', description: 'Weather by city', input_schema: weather.function.parameters }],
        tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
        stop_sequences: ['END'],
        metadata: { user_id: 'u-1' },
      },
    });
  });

  it('maps every tool_choice and response_format json_schema to output_config.format', () => {
    const messages = [{ role: 'user' as const, content: 'x' }];
    const choice = (tool_choice: ChatRequest['tool_choice']) => {
      const built = buildAnthropicRequestBody({ messages, tools: [weather], tool_choice }, 'm');
      return 'body' in built ? built.body.tool_choice : built.error;
    };
    expect(choice('auto')).toEqual({ type: 'auto' });
    expect(choice('none')).toEqual({ type: 'none' });
    expect(choice('required')).toEqual({ type: 'any' });
    const schema = { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'], additionalProperties: false };
    const built = buildAnthropicRequestBody({ messages, response_format: { type: 'json_schema', json_schema: { name: 'summary', schema, strict: true } } }, 'm');
    expect(built).toMatchObject({ body: { output_config: { format: { type: 'json_schema', schema } } } });
    expect(buildAnthropicRequestBody({ messages, stop: 'X' }, 'm')).toMatchObject({ body: { stop_sequences: ['X'] } });
  });

  it('translates image parts and refuses arguments that are not JSON', () => {
    const built = buildAnthropicRequestBody(
      { messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] },
      'm',
    );
    expect(built).toMatchObject({
      body: { messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] },
    });
    const bad = buildAnthropicRequestBody({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{not json' } }] }] }, 'm');
    expect(bad).toEqual({ error: 'messages[1].tool_calls[0].function.arguments is not JSON' });
  });

  it('names the members Anthropic cannot express, and not the neutral ones', () => {
    const messages = [{ role: 'user' as const, content: 'x' }];
    expect(unsupportedAnthropicMembers({ messages, logprobs: true, top_logprobs: 2, n: 2, seed: 7, frequency_penalty: 0.5, logit_bias: { '1': 2 } })).toEqual(
      ['logprobs', 'top_logprobs', 'n', 'seed', 'frequency_penalty', 'logit_bias'],
    );
    expect(unsupportedAnthropicMembers({ messages, n: 1, logprobs: false, presence_penalty: 0, store: false, seed: null, modalities: ['text'] })).toEqual([]);
    expect(unsupportedAnthropicMembers({ messages, response_format: { type: 'json_object' } })).toEqual(['response_format.json_object']);
    expect(unsupportedAnthropicMembers({ messages, vendor_knob: 3 })).toEqual(['vendor_knob']);
    expect(
      unsupportedAnthropicMembers({
        messages: [
          { role: 'user', name: 'ann', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] },
          { role: 'function', name: 'f', content: 'x' },
        ],
        tools: [{ type: 'custom', custom: { name: 'grammar' } }],
        tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } },
      }),
    ).toEqual(['messages.name', 'messages.content.input_audio', 'messages.role.function', 'tools.custom', 'tool_choice.allowed_tools']);
  });

  it('lets OpenAI-compatible servers have every OpenAI member, but not the Anthropic-only ones', () => {
    const input: ChatRequest = { messages: [{ role: 'user', content: 'x' }], logprobs: true, n: 2, seed: 1, tools: [weather], top_k: 5 };
    expect(unsupportedOpenAIMembers(input)).toEqual([]);
    expect(unsupportedOpenAIMembers({ ...input, thinking: { type: 'enabled', budget_tokens: 1024 } })).toEqual(['thinking']);
    expect(buildOpenAIRequestBody({ ...input, stream: true, stream_options: { include_usage: false }, model: 'x', user: null as unknown as string }, 'gpt')).toEqual({
      messages: [{ role: 'user', content: 'x' }], logprobs: true, n: 2, seed: 1, tools: [weather], top_k: 5, model: 'gpt', stream: false,
    });
    expect(buildOpenAIRequestBody(input, 'gpt', true)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });
});

describe('answers → the normalized completion', () => {
  it('turns Anthropic tool_use blocks into OpenAI tool calls and maps stop_reason and usage', () => {
    const deltas = anthropicMessageDeltas({
      type: 'message',
      model: 'claude-x',
      content: [
        { type: 'text', text: 'Checking.' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 3 },
    });
    if ('malformed' in deltas) throw new Error(deltas.malformed);
    expect(accumulateDeltas(deltas, 'fallback', 'configured')).toEqual({
      content: 'Checking.',
      finish_reason: 'tool_calls',
      model: 'claude-x',
      provider: 'fallback',
      usage: { prompt_tokens: 13, completion_tokens: 5, total_tokens: 18 },
      tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
    });
  });

  it('keeps an OpenAI answer’s tool calls, refusal and logprobs', () => {
    const logprobs = { content: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [] }], refusal: null };
    const deltas = openAICompletionDeltas({
      model: 'gpt-x',
      choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'I cannot.', tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'f', arguments: '{}' } }] }, logprobs, finish_reason: 'tool_calls' }],
      usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
    });
    if ('malformed' in deltas) throw new Error(deltas.malformed);
    const c = accumulateDeltas(deltas, 'primary', 'm');
    expect(c).toEqual({
      content: '',
      finish_reason: 'tool_calls',
      model: 'gpt-x',
      provider: 'primary',
      usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
      tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'f', arguments: '{}' } }],
      refusal: 'I cannot.',
      logprobs,
    });
    // A plain answer has tool_calls null and no refusal/logprobs members.
    const plain = openAICompletionDeltas({ choices: [{ message: { content: 'ok', refusal: null }, finish_reason: 'stop' }] });
    if ('malformed' in plain) throw new Error(plain.malformed);
    expect(accumulateDeltas(plain, 'p', 'm')).toEqual({ content: 'ok', finish_reason: 'stop', model: 'm', provider: 'p', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, tool_calls: null });
    // Replaying a completion as deltas gives it back.
    expect(accumulateDeltas(completionDeltas(c), c.provider, 'other')).toEqual(c);
  });
});
