/**
 * The fake provider server: scripting (queue, default, rules, header, gates),
 * the call log, both wire protocols, and the HTTP control plane.
 */
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseFakeScript } from '../../src/testing/fake-behaviour.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';

let fake: FakeProvider;

beforeAll(async () => {
  fake = await startFakeProvider();
});
afterAll(() => fake.close());
afterEach(() => fake.reset());

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(`${fake.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text === '' ? null : (JSON.parse(text) as Record<string, any>) };
}

const openaiBody = (content: string) => ({ model: 'm', messages: [{ role: 'user', content }] });
const anthropicBody = (content: string) => ({ model: 'claude', max_tokens: 10, messages: [{ role: 'user', content }] });

describe('wire protocols', () => {
  it('answers OpenAI Chat Completions in the real shape, echoing by default', async () => {
    const res = await post('/v1/chat/completions', openaiBody('ping'));
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('req_fake_1');
    expect(res.json).toMatchObject({
      id: 'chatcmpl-fake-1',
      object: 'chat.completion',
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ping' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
    expect(typeof res.json?.created).toBe('number');
  });

  it('answers /chat/completions without /v1 too', async () => {
    expect((await post('/chat/completions', openaiBody('x'))).status).toBe(200);
  });

  it('answers Anthropic Messages in the real shape', async () => {
    const res = await post('/v1/messages', anthropicBody('hola'));
    expect(res.status).toBe(200);
    expect(res.headers['request-id']).toBe('req_fake_1');
    expect(res.json).toMatchObject({
      id: 'msg_fake_1',
      type: 'message',
      role: 'assistant',
      model: 'claude',
      content: [{ type: 'text', text: 'hola' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 1, output_tokens: 1 },
    });
  });

  it('renders errors in each protocol’s own shape', async () => {
    fake.script([{ status: 429 }, { status: 529 }]);
    const openai = await post('/v1/chat/completions', openaiBody('x'));
    const anthropic = await post('/v1/messages', anthropicBody('x'));
    expect(openai).toMatchObject({ status: 429, json: { error: { type: 'requests', code: 'rate_limit_exceeded' } } });
    expect(anthropic).toMatchObject({ status: 529, json: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } });
    expect(anthropic.headers['retry-after']).toBe('1');
  });

  it('rejects what the real APIs reject, without using the script', async () => {
    fake.script([{ reply: 'kept' }]);
    const noMaxTokens = await post('/v1/messages', { model: 'c', messages: [{ role: 'user', content: 'x' }] });
    const systemInMessages = await post('/v1/messages', { model: 'c', max_tokens: 5, messages: [{ role: 'system', content: 'x' }] });
    const noModel = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] });
    expect([noMaxTokens.status, systemInMessages.status, noModel.status]).toEqual([400, 400, 400]);
    expect(systemInMessages.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(fake.calls.map((c) => c.result)).toEqual(['rejected', 'rejected', 'rejected']);
    expect((await post('/v1/chat/completions', openaiBody('x'))).json?.choices[0].message.content).toBe('kept');
  });
});

describe('scripting', () => {
  it('uses queued behaviours once each, in order, then the default', async () => {
    fake.setDefault({ reply: 'default' });
    fake.script([{ reply: 'first' }, { status: 503 }, { reply: { n: 3 } }]);
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await post('/v1/chat/completions', openaiBody('x')));
    expect(results.map((r) => r.status)).toEqual([200, 503, 200, 200]);
    expect(results.map((r) => r.json?.choices?.[0]?.message?.content)).toEqual(['first', undefined, '{"n":3}', 'default']);
    expect(fake.calls.map((c) => c.source)).toEqual(['queue', 'queue', 'queue', 'default']);
  });

  it('rules match content, header or protocol before the queue, `times` times', async () => {
    fake.script([{ reply: 'queued' }]);
    fake.when({ contains: 'slow please' }, { reply: 'matched' }, 1);
    fake.when({ header: { name: 'X-Tenant', value: 'b' } }, { status: 401 });
    fake.when({ protocol: 'anthropic' }, { reply: 'from anthropic rule' });
    expect((await post('/v1/chat/completions', openaiBody('be slow please'))).json?.choices[0].message.content).toBe('matched');
    expect((await post('/v1/chat/completions', openaiBody('be slow please'))).json?.choices[0].message.content).toBe('queued');
    expect((await post('/v1/chat/completions', openaiBody('x'), { 'x-tenant': 'b' })).status).toBe(401);
    expect((await post('/v1/messages', anthropicBody('x'))).json?.content[0].text).toBe('from anthropic rule');
    expect(fake.calls.map((c) => c.source)).toEqual(['rule', 'queue', 'rule', 'rule']);
  });

  it('the Onejob-Fake-Behaviour header overrides everything for its call', async () => {
    fake.script([{ reply: 'queued' }]);
    const res = await post('/v1/chat/completions', openaiBody('x'), { 'onejob-fake-behaviour': JSON.stringify({ status: 503 }) });
    expect(res.status).toBe(503);
    expect(fake.calls[0]).toMatchObject({ source: 'header', behaviour: { status: 503 }, result: 'error', status: 503 });
    const bad = await post('/v1/chat/completions', openaiBody('x'), { 'onejob-fake-behaviour': '{"sttus":1}' });
    expect(bad.status).toBe(400);
    expect(bad.json?.error.message).toContain('unknown field');
  });

  it('holds a gated call until released, deterministically', async () => {
    fake.script([{ gate: 'late', reply: 'finally' }]);
    const pending = post('/v1/chat/completions', openaiBody('x'));
    const [call] = await fake.waitForCalls(1);
    expect(call?.result).toBe('pending');
    fake.release('late');
    expect((await pending).json?.choices[0].message.content).toBe('finally');
    expect((await fake.waitForResult(1)).result).toBe('replied');
  });

  it('waits delayMs before answering', async () => {
    fake.script([{ delayMs: 150, reply: 'slow' }]);
    const started = Date.now();
    await post('/v1/chat/completions', openaiBody('x'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('records every call with headers, keys, body and what was done', async () => {
    fake.script([{ status: 500 }]);
    await post('/v1/chat/completions', openaiBody('hello'), { 'idempotency-key': 'job_1:1', 'onejob-job-id': 'job_1', 'onejob-attempt-id': 'att_1' });
    const [call] = fake.calls;
    expect(call).toMatchObject({
      seq: 1,
      protocol: 'openai',
      method: 'POST',
      path: '/v1/chat/completions',
      idempotencyKey: 'job_1:1',
      jobId: 'job_1',
      attemptId: 'att_1',
      body: openaiBody('hello'),
      source: 'queue',
      behaviour: { status: 500 },
      result: 'error',
      status: 500,
    });
    expect(Date.parse(call?.receivedAt ?? '')).not.toBeNaN();
    expect(Date.parse(call?.finishedAt ?? '')).not.toBeNaN();
  });

  it('validates scripts with the offending path', () => {
    expect(() => fake.script([{ delayMs: -1 }])).toThrow('script[0].delayMs');
    expect(() => fake.script({ queue: [{ reset: 'sometimes' as never }] })).toThrow('script.queue[0].reset');
    expect(() => parseFakeScript({ rules: [{ match: { contains: 1 }, behaviour: {} }] })).toThrow('script.rules[0].match.contains');
  });
});

describe('HTTP control plane (for other processes)', () => {
  it('POST /script, GET /calls, POST /release, POST /reset', async () => {
    const scripted = await post('/script', { queue: [{ status: 503 }], rules: [{ match: { contains: 'gate me' }, behaviour: { gate: 'g', reply: 'released' } }] });
    expect(scripted).toMatchObject({ status: 200, json: { queued: 1, rules: 1 } });

    expect((await post('/v1/chat/completions', openaiBody('x'))).status).toBe(503);
    const gated = post('/v1/chat/completions', openaiBody('gate me'));
    await fake.waitForCalls(2);
    expect((await post('/release', { gate: 'g' })).status).toBe(200);
    expect((await gated).json?.choices[0].message.content).toBe('released');

    const calls = await request(`${fake.url}/calls`);
    const list = (await calls.body.json()) as { data: { seq: number; result: string; source: string }[] };
    expect(list.data.map((c) => [c.seq, c.source, c.result])).toEqual([
      [1, 'queue', 'error'],
      [2, 'rule', 'replied'],
    ]);

    expect((await post('/reset', {})).status).toBe(200);
    expect(fake.calls).toEqual([]);
  });

  it('GET /submits counts the creates of each attempt (chat, background response, task) with the reply each chose', async () => {
    fake.script([{ reply: 'one' }, { reply: 'two' }, { reply: 'three', loseAnswer: true }, { reply: 'four' }]);
    const att = (id: string) => ({ 'onejob-attempt-id': id });
    expect((await post('/v1/chat/completions', openaiBody('x'), att('att_chat'))).status).toBe(200);
    expect((await post('/v1/responses', { model: 'm', input: 'x', background: true }, att('att_resp'))).status).toBe(200);
    // The task's answer is lost after the work; the same attempt creating again (which onejob never does) counts twice.
    await expect(post('/v1/tasks', { input: 'x' }, { ...att('att_task'), 'idempotency-key': 'att_task' })).rejects.toThrow();
    expect((await post('/v1/tasks', { input: 'x' }, { ...att('att_task'), 'idempotency-key': 'att_task' })).status).toBe(200);
    expect((await post('/v1/chat/completions', openaiBody('no attempt header'))).status).toBe(200);

    const res = await request(`${fake.url}/submits`);
    const { data } = (await res.body.json()) as { data: { attempt_id: string; submits: number; replies: unknown[] }[] };
    expect(data).toEqual([
      { attempt_id: 'att_chat', submits: 1, replies: ['one'] },
      { attempt_id: 'att_resp', submits: 1, replies: ['two'] },
      // The second create of an existing task chooses no behaviour: the task is answered as it is.
      { attempt_id: 'att_task', submits: 2, replies: ['three'] },
    ]);
    expect(fake.submits.get('att_task')?.submits).toBe(2);
    fake.reset();
    expect(fake.submits.size).toBe(0);
  });

  it('refuses a bad script with 400 and a path', async () => {
    const res = await post('/script', [{ hang: 'yes' }]);
    expect(res.status).toBe(400);
    expect(res.json?.error.message).toContain('script[0].hang');
  });
});

describe('hang and close', () => {
  it('a hanging call ends as server-closed when the fake closes', async () => {
    const other = await startFakeProvider({ script: [{ hang: true }] });
    const pending = request(`${other.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(openaiBody('x')) }).then(
      () => 'answered',
      () => 'connection error',
    );
    await other.waitForCalls(1);
    expect(other.calls[0]?.result).toBe('hanging');
    await other.close();
    expect(await pending).toBe('connection error');
    expect(other.calls[0]?.result).toBe('server-closed');
  });
});

describe('the Responses API in background mode, read by the official openai SDK', () => {
  const sdk = () => new OpenAI({ apiKey: 'k', baseURL: `${fake.url}/v1`, maxRetries: 0 });
  const textOf = (events: { type: string; delta?: string }[]) => events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');

  it('streams a background response whose events the SDK accumulates into the final Response', async () => {
    fake.script([{ chunks: ['one ', 'two ', 'three'], toolCalls: [{ name: 'look', arguments: { at: 'fox' } }] }]);
    const stream = sdk().responses.stream({ model: 'gpt-x', input: 'hi', background: true });
    const final = await stream.finalResponse();
    expect(final).toMatchObject({ id: 'resp_fake_1', status: 'completed', model: 'gpt-x', background: true });
    expect(final.output.map((o) => o.type)).toEqual(['message', 'function_call']);
    expect(final.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: 'one two three' }] });
    expect(final.output[1]).toMatchObject({ type: 'function_call', name: 'look', arguments: '{"at":"fox"}' });
    expect(fake.responses).toEqual([expect.objectContaining({ id: 'resp_fake_1', status: 'completed', stream: true, resumes: [] })]);
  });

  it('a cut create stream: the work goes on, and a resume with starting_after gets exactly the events after it, live', async () => {
    fake.script([{ chunks: ['a', 'b', 'c', 'd', 'e'], chunkDelayMs: 20, streamCut: { afterChunks: 2 } }]);
    const client = sdk();
    const first: { type: string; sequence_number: number; delta?: string }[] = [];
    const created = await client.responses.create({ model: 'gpt-x', input: 'hi', background: true, stream: true });
    await expect((async () => {
      for await (const e of created) first.push(e as never);
    })()).rejects.toThrow();
    expect(textOf(first)).toBe('ab');
    const last = first.at(-1)!.sequence_number;
    const resumed = await client.responses.retrieve('resp_fake_1', { stream: true, starting_after: last });
    const rest: { type: string; sequence_number: number; delta?: string }[] = [];
    for await (const e of resumed) rest.push(e as never);
    expect(rest[0]!.sequence_number).toBe(last + 1);
    expect([...first, ...rest].map((e) => e.sequence_number)).toEqual([...first, ...rest].map((_, i) => i));
    expect(textOf(first) + textOf(rest)).toBe('abcde');
    expect(rest.at(-1)).toMatchObject({ type: 'response.completed', response: { status: 'completed' } });
    expect(fake.responses[0]).toMatchObject({ resumes: [last], status: 'completed' });
  });

  it('polls and cancels: queued/in_progress while it runs, cancelled after POST …/cancel; an unknown id is 404', async () => {
    fake.script([{ task: { runMs: 30_000 } }]);
    const client = sdk();
    const created = await client.responses.create({ model: 'gpt-x', input: 'hi', background: true });
    expect(['queued', 'in_progress']).toContain(created.status);
    expect((await client.responses.retrieve(created.id)).status).toBe('in_progress');
    expect((await client.responses.cancel(created.id)).status).toBe('cancelled');
    expect(fake.responses[0]).toMatchObject({ cancelRequested: true, status: 'cancelled', stream: false });
    expect(fake.lookups).toBe(1);
    await expect(client.responses.retrieve('resp_nope')).rejects.toMatchObject({ status: 404 });
  });
});

describe('uniqueIds: a restarted fake never hands out an id it gave before', () => {
  it('task and response ids carry a token of the start; two starts give different ids; by default they are task_fake_1, resp_fake_1', async () => {
    const createIds = async (f: FakeProvider): Promise<string[]> => {
      const task = await fetch(`${f.url}/v1/tasks`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' }, body: JSON.stringify({ input: 'x' }) });
      const response = await fetch(`${f.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'x', background: true, store: true }) });
      return [((await task.json()) as { id: string }).id, ((await response.json()) as { id: string }).id];
    };
    const plain = await startFakeProvider();
    const a = await startFakeProvider({ uniqueIds: true });
    const b = await startFakeProvider({ uniqueIds: true });
    try {
      expect(await createIds(plain)).toEqual(['task_fake_1', 'resp_fake_1']);
      const [ta, ra] = await createIds(a);
      const [tb, rb] = await createIds(b);
      expect(ta).toMatch(/^task_fake_[0-9a-f]{8}_1$/);
      expect(ra).toMatch(/^resp_fake_[0-9a-f]{8}_1$/);
      expect(tb).not.toBe(ta);
      expect(rb).not.toBe(ra);
    } finally {
      await Promise.all([plain.close(), a.close(), b.close()]);
    }
  });
});
