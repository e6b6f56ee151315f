/**
 * The outbound Chat → Responses translation of the `openai-responses`
 * provider (`src/protocols/responses-upstream.ts`), and the way back.
 */
import { describe, expect, it } from 'vitest';
import { chatToResponsesRequest, responseDeltas, responsesUnsupportedMembers } from '../../src/protocols/responses-upstream.ts';

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

  it('names what the Responses API cannot express', () => {
    expect(responsesUnsupportedMembers({ messages: [{ role: 'user', content: 'x' }], n: 2, stop: ['\n'], n_ok: 1 } as never)).toEqual(['n', 'stop']);
    expect(responsesUnsupportedMembers({ messages: [{ role: 'user', content: 'x' }], n: 1, logprobs: false })).toEqual([]);
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
