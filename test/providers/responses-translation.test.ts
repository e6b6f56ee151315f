/**
 * The Responses API translators (src/protocols/openai-responses.ts and
 * -stream.ts), pure: a create body → the chat input and the record kept on
 * the job; a job → the Response; the conversation a later Response
 * continues; the event stream's numbering, `starting_after`, and the
 * equality of a live stream's end with the stored Response.
 */
import { describe, expect, it } from 'vitest';
import { conversationOf, jobIdOfItem, responseInputItems, responseOf, responsesRequestToChatInput, type ResponsesRecord } from '../../src/protocols/openai-responses.ts';
import { ResponsesStreamEncoder } from '../../src/protocols/openai-responses-stream.ts';

const ok = (body: unknown, previous: Parameters<typeof responsesRequestToChatInput>[1] = null) => {
  const t = responsesRequestToChatInput(body, previous);
  if (!t.ok) throw new Error(`refused: ${t.member}: ${t.message}`);
  return t;
};
const refused = (body: unknown) => {
  const t = responsesRequestToChatInput(body, null);
  if (t.ok) throw new Error('accepted');
  return t.member;
};

describe('responsesRequestToChatInput', () => {
  it('instructions first, messages by role, parts translated, the assistant text and its function calls joined, outputs as tool messages', () => {
    const t = ok({
      model: 'chat',
      instructions: 'Be brief.',
      input: [
        { role: 'developer', content: 'Use metric units.' },
        { role: 'user', content: [{ type: 'input_text', text: 'Look:' }, { type: 'input_image', image_url: 'data:image/png;base64,AAA', detail: 'low' }] },
        { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Checking.', annotations: [] }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{"a":1}' },
        { type: 'function_call_output', call_id: 'c1', output: 'one' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
      ],
    });
    expect(t.input.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'developer', content: 'Use metric units.' },
      { role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA', detail: 'low' } }] },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } },
          { id: 'c2', type: 'function', function: { name: 'g', arguments: '{"a":1}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
    ]);
    expect(t.input.stream).toBe(true);
    expect(t.record.instructions_first).toBe(true);
    expect(t.record.request).not.toHaveProperty('input');
  });

  it('members mapped to their chat names', () => {
    const t = ok({
      model: 'chat',
      input: 'x',
      max_output_tokens: 10,
      reasoning: { effort: 'high', summary: null },
      text: { format: { type: 'json_schema', name: 'o', schema: { type: 'object' }, strict: true }, verbosity: 'low' },
      tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: false }, { type: 'custom', name: 'sql', description: 'SQL' }],
      tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'f' }] },
      include: ['message.output_text.logprobs', 'reasoning.encrypted_content'],
      top_logprobs: 2,
      metadata: { a: 'b' },
      store: false,
      stream: true,
      background: true,
    });
    expect(t.input).toMatchObject({
      max_completion_tokens: 10,
      reasoning_effort: 'high',
      verbosity: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'o', schema: { type: 'object' }, strict: true } },
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: false } }, { type: 'custom', custom: { name: 'sql', description: 'SQL' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'f' } }] } },
      logprobs: true,
      top_logprobs: 2,
    });
    expect(t.input).not.toHaveProperty('metadata');
    expect(t.input).not.toHaveProperty('store');
    expect(t.stream).toBe(true);
    expect(t.background).toBe(true);
  });

  it('refuses, naming the member, what no provider onejob has can run', () => {
    expect(refused({ model: 'm', input: 'x', tools: [{ type: 'web_search' }] })).toBe('tools[0]');
    expect(refused({ model: 'm', input: 'x', conversation: 'conv_1' })).toBe('conversation');
    expect(refused({ model: 'm', input: 'x', prompt: { id: 'p' } })).toBe('prompt');
    expect(refused({ model: 'm', input: 'x', truncation: 'auto' })).toBe('truncation');
    expect(refused({ model: 'm', input: 'x', reasoning: { summary: 'auto' } })).toBe('reasoning.summary');
    expect(refused({ model: 'm', input: [{ type: 'reasoning', id: 'r', summary: [] }] })).toBe('input[0].type');
    expect(refused({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1', detail: 'auto' }] }] })).toBe('input[0].content[0].file_id');
    expect(refused({ model: 'm', input: 'x', frobnicate: 1 })).toBe('frobnicate');
    expect(refused({ model: 'm' })).toBe('input');
    // Null is OpenAI's "not given": accepted.
    expect(responsesRequestToChatInput({ model: 'm', input: 'x', conversation: null, prompt: null, truncation: 'disabled' }, null).ok).toBe(true);
  });

  it('a previous conversation comes before this input, this request’s instructions before it', () => {
    const t = ok({ model: 'm', instructions: 'Now.', input: 'again' }, [{ role: 'user', content: 'first' }, { role: 'assistant', content: 'answer' }]);
    expect(t.input.messages.map((m) => [m.role, m.content])).toEqual([
      ['system', 'Now.'],
      ['user', 'first'],
      ['assistant', 'answer'],
      ['user', 'again'],
    ]);
  });
});

const record = (over: Partial<ResponsesRecord> = {}): ResponsesRecord => ({ model: 'chat', request: { model: 'chat' }, input_items: [{ role: 'user', content: 'hi' }], instructions_first: false, ...over });
const result = { content: 'Hello', finish_reason: 'stop', model: 'm-1', provider: 'p', usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
const created = new Date('2026-01-01T00:00:00Z');

describe('jobIdOfItem', () => {
  it('the job an output or input item id belongs to; null for ids onejob never gave', () => {
    const job = 'job_01a233c3-c4b8-717d-bbbc-5eb5d3384cd3';
    expect(jobIdOfItem(`msg_${job}`)).toBe(job);
    expect(jobIdOfItem(`msg_${job}_2`)).toBe(job);
    expect(jobIdOfItem(`fc_${job}_0`)).toBe(job);
    expect(jobIdOfItem(`fco_${job}_in3`)).toBe(job);
    expect(jobIdOfItem('msg_abc123')).toBeNull();
    expect(jobIdOfItem(`rs_${job}`)).toBeNull();
  });
});

describe('conversationOf', () => {
  it('the job’s messages without its instructions, then its answer (text and tool calls) as the assistant', () => {
    const input = { messages: [{ role: 'system', content: 'old instructions' }, { role: 'user', content: 'hi' }], stream: true };
    expect(conversationOf(input, result, record({ instructions_first: true }))).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    ]);
    expect(conversationOf(input, result, record())[0]).toEqual({ role: 'system', content: 'old instructions' });
  });
});

describe('responseOf', () => {
  const view = { jobId: 'job_1', createdAt: created, completedAt: created, result, error: null, record: record() };
  it('status by job state; a job in doubt is in_progress with onejob.state unknown', () => {
    expect(responseOf({ ...view, state: 'queued', result: null }).status).toBe('queued');
    expect(responseOf({ ...view, state: 'running', result: null }).status).toBe('in_progress');
    const doubt = responseOf({ ...view, state: 'unknown', result: null });
    expect(doubt.status).toBe('in_progress');
    expect(doubt.onejob).toEqual({ job_id: 'job_1', state: 'unknown' });
    expect(responseOf({ ...view, state: 'cancelled', result: null }).status).toBe('cancelled');
    const failed = responseOf({ ...view, state: 'failed', result: null, error: { code: 'provider_rejected', message: 'no' } });
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({ code: 'server_error', message: 'no' });
    expect(responseOf({ ...view, state: 'succeeded', result: { ...result, finish_reason: 'length' } })).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  });

  it('a succeeded job: a message item, a function_call item per tool call, usage in Responses names', () => {
    const r = responseOf({ ...view, state: 'succeeded' });
    expect(r).toMatchObject({ id: 'resp_job_1', object: 'response', status: 'completed', model: 'm-1', output_text: 'Hello', usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } });
    expect(r.output).toEqual([
      { id: 'msg_job_1', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello', annotations: [], logprobs: [] }] },
      { id: 'fc_job_1_0', type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{}', status: 'completed' },
    ]);
  });

  it('input items get ids of their own', () => {
    const items = responseInputItems('job_1', record({ input_items: [{ role: 'user', content: 'hi' }, { type: 'function_call_output', call_id: 'c', output: 'x' }, { type: 'message', role: 'user', id: 'mine', content: [] }] }));
    expect(items.map((i) => i.id)).toEqual(['msg_job_1_in0', 'fco_job_1_in1', 'mine']);
    expect(items[0]).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] });
  });
});

describe('ResponsesStreamEncoder', () => {
  const job = { jobId: 'job_1', createdAt: created, record: record() };
  it('numbers events from 0; the live end carries the same output as the stored Response; a replay numbers alike', () => {
    const enc = new ResponsesStreamEncoder({ job });
    const events = [
      ...enc.start(),
      ...enc.delta({ type: 'model', model: 'm-1' }),
      ...enc.delta({ type: 'text', text: 'Hel' }),
      ...enc.delta({ type: 'text', text: 'lo' }),
      ...enc.delta({ type: 'tool_call', index: 0, id: 'call_1', name: 'f', arguments: '{' }),
      ...enc.delta({ type: 'tool_call', index: 0, arguments: '}' }),
      ...enc.finish(result, created),
    ];
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const last = events.at(-1)!;
    expect(last.type).toBe('response.completed');
    expect((last as { response: unknown }).response).toEqual(responseOf({ jobId: 'job_1', state: 'succeeded', createdAt: created, completedAt: created, result, error: null, record: record() }));
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === 'response.output_item.added')).toHaveLength(2);
    expect(types).toContain('response.function_call_arguments.done');
    // The replay of the stored result: one delta per part, the same items, numbered from 0.
    const replay = new ResponsesStreamEncoder({ job }).replay(result, created);
    expect(replay.map((e) => e.sequence_number)).toEqual(replay.map((_, i) => i));
    expect(replay.at(-1)).toEqual({ ...last, sequence_number: replay.length - 1 });
  });

  it("a replay's Response carries the job's completed_at, not the time of the replay", () => {
    const done = new Date('2025-06-01T12:00:00Z');
    const last = new ResponsesStreamEncoder({ job, completedAt: done }).replay(result).at(-1) as { response: { completed_at: number } };
    expect(last.response.completed_at).toBe(Math.floor(done.getTime() / 1000));
  });

  it('starting_after: only the events numbered above it', () => {
    const all = new ResponsesStreamEncoder({ job }).replay(result);
    const rest = new ResponsesStreamEncoder({ job, startingAfter: 3 }).replay(result);
    expect(rest.map((e) => e.sequence_number)).toEqual(all.slice(4).map((e) => e.sequence_number));
    expect(rest.map((e) => e.type)).toEqual(all.slice(4).map((e) => e.type));
  });

  it('starting_after past everything the stream now has (a cursor from an attempt that failed over): the ending is still sent, numbered after the cursor', () => {
    // Seen in the HA chaos run: a resume with starting_after=4 of a job whose first attempt's stream failed over and whose
    // second went unknown got an empty 200 (the error event numbered 2 was filtered out as "already seen").
    const doubt = new ResponsesStreamEncoder({ job, startingAfter: 4 }).error({ code: 'attempt_in_doubt', message: 'in doubt' });
    expect(doubt).toEqual([expect.objectContaining({ type: 'error', code: 'attempt_in_doubt', sequence_number: 5 })]);
    const failed = new ResponsesStreamEncoder({ job, startingAfter: 4 }).failed('every provider failed');
    expect(failed.map((e) => [e.type, e.sequence_number])).toEqual([['response.failed', 5]]);
    // Above the cursor the numbering is the stream's own: start events after the cursor are sent as they are.
    const early = new ResponsesStreamEncoder({ job, startingAfter: 0 }).error({ code: 'provider_stream_error', message: 'cut' });
    expect(early.map((e) => [e.type, e.sequence_number])).toEqual([['response.in_progress', 1], ['error', 2]]);
  });

  it('a break is an error event with the job id; a failed job is response.failed; start is sent once', () => {
    const enc = new ResponsesStreamEncoder({ job });
    const first = [...enc.start(), ...enc.start()];
    expect(first.map((e) => e.type)).toEqual(['response.created', 'response.in_progress']);
    const [error] = enc.error({ code: 'stream_stalled', message: 'quiet' });
    expect(error).toMatchObject({ type: 'error', code: 'stream_stalled', sequence_number: 2, error: { code: 'stream_stalled', message: 'quiet', job_id: 'job_1' } });
    const failed = new ResponsesStreamEncoder({ job }).failed('every provider failed');
    expect(failed.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed', error: { message: 'every provider failed' } } });
  });
});
