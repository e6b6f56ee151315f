/**
 * The outbound Chat → Responses translation of the `openai-responses`
 * provider (`src/providers/openai-responses/responses-upstream.ts`), and the way back.
 */
import { describe, expect, it } from 'vitest';
import { chatToResponsesRequest, responseDeltas, responsesUnsupportedMembers, ResponsesStreamReader } from '../../src/providers/openai-responses/responses-upstream.ts';

describe('chat → responses', () => {
  it('translates messages, tool calls and their results, tools, limits and the response format', () => {
    const body = chatToResponsesRequest({
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'what is in' }, { type: 'image_url', image_url: { url: 'https://x/fox.png', detail: 'low' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'look', arguments: '{"at":"fox"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'a red fox' },
      ],
      temperature: 0.2,
      max_tokens: 64,
      tools: [{ type: 'function', function: { name: 'look', description: 'look at', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'look' } },
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } },
    });
    expect(body).toEqual({
      input: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'input_text', text: 'what is in' }, { type: 'input_image', image_url: 'https://x/fox.png', detail: 'low' }] },
        { type: 'function_call', call_id: 'call_1', name: 'look', arguments: '{"at":"fox"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'a red fox' },
      ],
      temperature: 0.2,
      max_output_tokens: 64,
      tools: [{ type: 'function', name: 'look', description: 'look at', parameters: { type: 'object' }, strict: null }],
      tool_choice: { type: 'function', name: 'look' },
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
    });
  });

  it('names what the Responses API cannot express: an allow-list, so a member it does not know is named too', () => {
    expect(responsesUnsupportedMembers({ messages: [{ role: 'user', content: 'x' }], n: 2, stop: ['\n'], n_ok: 1 } as never)).toEqual(['n', 'stop', 'n_ok']);
    expect(responsesUnsupportedMembers({ messages: [{ role: 'user', content: 'x' }], n: 1, logprobs: false })).toEqual([]);
    expect(responsesUnsupportedMembers({ messages: [{ role: 'user', content: 'x' }], web_search_options: {}, seed: 1 } as never)).toEqual(['web_search_options', 'seed']);
  });

  it('carries the members the issue found dropped (reasoning_effort, verbosity, service_tier, prompt_cache_key, safety_identifier, metadata, allowed_tools)', () => {
    const input = {
      messages: [{ role: 'user', content: 'x' }],
      reasoning_effort: 'low', verbosity: 'high', service_tier: 'flex', prompt_cache_key: 'pk', safety_identifier: 'sid', prompt_cache_retention: '24h',
      metadata: { order: '42' }, store: true, user: 'u',
      tools: [{ type: 'function', function: { name: 'a' } }, { type: 'function', function: { name: 'b' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'a' } }] } },
      response_format: { type: 'json_schema', json_schema: { name: 'n', description: 'd', schema: { type: 'object' }, strict: true } },
    };
    expect(responsesUnsupportedMembers(input as never)).toEqual([]);
    expect(chatToResponsesRequest(input as never)).toMatchObject({
      reasoning: { effort: 'low' },
      text: { verbosity: 'high', format: { type: 'json_schema', name: 'n', description: 'd', schema: { type: 'object' }, strict: true } },
      service_tier: 'flex', prompt_cache_key: 'pk', safety_identifier: 'sid', prompt_cache_retention: '24h', user: 'u',
      metadata: { order: '42' },
      tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'a' }] },
    });
  });

  it('a member it cannot pass on as given is named, never dropped: store false, custom tools, other parts and message members', () => {
    const messages = [{ role: 'user', content: 'x' }];
    const named = (input: Record<string, unknown>) => responsesUnsupportedMembers({ messages, ...input } as never);
    expect(named({ store: false })).toEqual(['store']);
    expect(named({ store: true })).toEqual([]);
    expect(named({ tools: [{ type: 'custom', custom: { name: 'grammar' } }] })).toEqual(['tools.custom']);
    expect(named({ tool_choice: { type: 'custom', custom: { name: 'grammar' } } })).toEqual(['tool_choice.custom']);
    expect(named({ tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'custom', custom: { name: 'g' } }] } } })).toEqual(['tool_choice.allowed_tools.custom']);
    expect(named({ metadata: { onejob_attempt_id: 'att_forged' } })).toEqual(['metadata.onejob_attempt_id']);
    expect(named({ metadata: { n: 1 } })).toEqual(['metadata']);
    expect(named({ response_format: { type: 'grammar' } })).toEqual(['response_format.grammar']);
    expect(responsesUnsupportedMembers({ messages: [
      { role: 'user', name: 'ann', content: [{ type: 'text', text: 'a' }, { type: 'file', file: { file_id: 'f' } }, { type: 'input_audio', input_audio: {} }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'custom', custom: { name: 'g', input: 'x' } }] },
      { role: 'function', name: 'f', content: 'r' },
    ] } as never)).toEqual(['messages.name', 'messages.content.file', 'messages.content.input_audio', 'messages.tool_calls.custom', 'messages.role.function']);
  });

  it('reads a completed response: text, function calls as tool calls, usage', () => {
    const deltas = responseDeltas({
      id: 'resp_1', status: 'completed', model: 'gpt-4.1-mini',
      output: [
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello', annotations: [] }] },
        { type: 'function_call', call_id: 'call_9', name: 'look', arguments: '{}' },
      ],
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
    });
    expect(deltas).toEqual([
      { type: 'model', model: 'gpt-4.1-mini' },
      { type: 'text', text: 'hello' },
      { type: 'tool_call', index: 0, id: 'call_9', name: 'look', arguments: '{}' },
      { type: 'finish', finish_reason: 'tool_calls' },
      { type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
    ]);
    expect(responseDeltas({ id: 'x' })).toEqual({ malformed: 'no output' });
  });
});

describe('responses stream → deltas (ResponsesStreamReader)', () => {
  const ev = (seq: number, type: string, fields: Record<string, unknown> = {}) => JSON.stringify({ type, sequence_number: seq, ...fields });
  const response = (status: string, extra: Record<string, unknown> = {}) => ({ id: 'resp_9', object: 'response', status, model: 'gpt-4.1-mini', output: [], ...extra });

  it('reads the id, text, function calls and the end; keeps the cursor', () => {
    const r = new ResponsesStreamReader();
    expect(r.cursor).toBe(-1);
    expect(r.read(ev(0, 'response.created', { response: response('queued') }))).toEqual({ kind: 'event', responseId: 'resp_9', deltas: [{ type: 'model', model: 'gpt-4.1-mini' }] });
    expect(r.read(ev(1, 'response.in_progress', { response: response('in_progress') }))).toEqual({ kind: 'event', responseId: 'resp_9', deltas: [] });
    expect(r.read(ev(2, 'response.output_item.added', { output_index: 0, item: { type: 'message', id: 'm', role: 'assistant', content: [] } }))).toEqual({ kind: 'event', deltas: [] });
    expect(r.read(ev(3, 'response.output_text.delta', { output_index: 0, content_index: 0, item_id: 'm', delta: 'Hel' }))).toEqual({ kind: 'event', deltas: [{ type: 'text', text: 'Hel' }] });
    expect(r.read(ev(4, 'response.output_item.added', { output_index: 1, item: { type: 'function_call', id: 'fc', call_id: 'call_1', name: 'look', arguments: '' } }))).toEqual({
      kind: 'event', deltas: [{ type: 'tool_call', index: 0, id: 'call_1', name: 'look' }],
    });
    expect(r.read(ev(5, 'response.function_call_arguments.delta', { output_index: 1, item_id: 'fc', delta: '{"a":1}' }))).toEqual({ kind: 'event', deltas: [{ type: 'tool_call', index: 0, arguments: '{"a":1}' }] });
    const end = r.read(ev(6, 'response.completed', { response: response('completed', { usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } }) }));
    expect(end).toMatchObject({ kind: 'completed', deltas: [{ type: 'finish', finish_reason: 'tool_calls' }, { type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }] });
    expect(r.cursor).toBe(6);
  });

  it('skips events at or before the cursor, so a resume that replays from the start relays nothing twice', () => {
    const r = new ResponsesStreamReader();
    r.read(ev(0, 'response.created', { response: response('queued') }));
    r.read(ev(1, 'response.output_text.delta', { output_index: 0, content_index: 0, item_id: 'm', delta: 'once' }));
    expect(r.read(ev(0, 'response.created', { response: response('queued') }))).toEqual({ kind: 'seen' });
    expect(r.read(ev(1, 'response.output_text.delta', { output_index: 0, content_index: 0, item_id: 'm', delta: 'once' }))).toEqual({ kind: 'seen' });
    expect(r.read(ev(2, 'response.output_text.delta', { output_index: 0, content_index: 0, item_id: 'm', delta: ' more' }))).toEqual({ kind: 'event', deltas: [{ type: 'text', text: ' more' }] });
  });

  it('failed and incomplete end the response; an error event ends only the connection; garbage is malformed', () => {
    const r = new ResponsesStreamReader();
    expect(r.read(ev(0, 'response.failed', { response: response('failed', { error: { code: 'server_error', message: 'x' } }) }))).toEqual({ kind: 'failed', status: 'failed', details: { code: 'server_error', message: 'x' } });
    expect(r.read(ev(1, 'response.incomplete', { response: response('incomplete', { incomplete_details: { reason: 'max_output_tokens' } }) }))).toEqual({ kind: 'failed', status: 'incomplete', details: { reason: 'max_output_tokens' } });
    expect(r.read(ev(2, 'error', { code: 'server_error', message: 'stream broke', param: null }))).toEqual({ kind: 'error', message: 'stream broke' });
    expect(r.read('not json')).toEqual({ kind: 'malformed', reason: 'an event that is not JSON' });
    expect(r.read(ev(3, 'response.function_call_arguments.delta', { output_index: 7, delta: '{' }))).toMatchObject({ kind: 'malformed' });
  });
});
