/**
 * The official `openai` SDK's Responses API (`client.responses.*`) against
 * the gateway over a real socket, on SQLite and PostgreSQL (CONTRACT §12):
 * create, the stream helper and `stream: true`, retrieve (and its event
 * stream from `starting_after`), cancel, input items, background polling, a
 * conversation over `previous_response_id` whose second step an `anthropic`
 * provider serves, a tool round trip, a failover from a 503 primary, the
 * double click (one job, one provider call), structured output, and the
 * `unsupported:<member>` skip.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, TOKEN_BOB, type Gateway } from './gateway-server.ts';

/** The error a call rejects with (a resolved call fails the test). */
async function apiError(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  return call.then(
    () => {
      throw new Error('the call succeeded');
    },
    (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
  );
}

type Sent = { messages: { role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }[]; [k: string]: unknown };

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the openai SDK's Responses API through the gateway (${db.name})`, () => {
    let gw: Gateway;
    let seq = 0;
    let key: string;
    beforeAll(async () => {
      gw = await startGateway(db);
    });
    afterAll(async () => {
      await gw?.close();
    });
    beforeEach(() => {
      gw.reset();
      key = `resp-${db.name}-${Date.now()}-${++seq}`;
    });
    const client = (token = TOKEN) => new OpenAI({ apiKey: token, baseURL: `${gw.origin}/v1`, maxRetries: 3, timeout: 15_000 });
    const withKey = (k: string) => ({ headers: { 'Idempotency-Key': k } });

    it('responses.create: the Response object, its job (Onejob-Job-Id), instructions as the system message; the same key replays it with no provider call', async () => {
      gw.openaiFake.script([{ reply: 'Hello there.', usage: { prompt_tokens: 7, completion_tokens: 3 } }]);
      const { data, response } = await client()
        .responses.create({ model: 'gpt', instructions: 'Be brief.', input: 'Say hello', temperature: 0.2, max_output_tokens: 50, metadata: { team: 'a' } }, withKey(key))
        .withResponse();
      const [job] = await gw.jobsWithKey(key);
      expect(response.headers.get('onejob-job-id')).toBe(job!.id);
      expect(data).toMatchObject({
        id: `resp_${job!.id}`,
        object: 'response',
        status: 'completed',
        model: 'gpt-fake',
        instructions: 'Be brief.',
        temperature: 0.2,
        max_output_tokens: 50,
        metadata: { team: 'a' },
        usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10 },
        error: null,
      });
      expect(data.output_text).toBe('Hello there.');
      expect(data.output).toEqual([
        { id: `msg_${job!.id}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello there.', annotations: [], logprobs: [] }] },
      ]);
      const sent = gw.openaiFake.calls[0]!.body as Sent;
      expect(sent.messages).toEqual([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ]);
      expect(sent).toMatchObject({ temperature: 0.2, max_completion_tokens: 50 });
      expect(sent.metadata).toBeUndefined();

      const replay = await client().responses.create({ model: 'gpt', instructions: 'Be brief.', input: 'Say hello', temperature: 0.2, max_output_tokens: 50, metadata: { team: 'a' } }, withKey(key)).withResponse();
      expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.data).toEqual(data);
      expect(gw.openaiFake.calls).toHaveLength(1);
      // The same key with another body: 409, the SDK shows onejob's code.
      const reused = await client().responses.create({ model: 'gpt', input: 'Something else' }, withKey(key)).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect(reused).toBeInstanceOf(OpenAI.ConflictError);
      expect((reused as InstanceType<typeof OpenAI.APIError>).code).toBe('idempotency_key_reused');
      // retrieve answers the same Response.
      expect(await client().responses.retrieve(data.id)).toEqual(data);
    });

    it('stream: true: Responses events with sequence numbers 0, 1, 2, …, text deltas that add up to the text, response.completed with the stored Response', async () => {
      gw.openaiFake.script([{ reply: 'one two three', chunks: ['one', ' two', ' three'] }]);
      const stream = await client().responses.create({ model: 'gpt', input: 'count', stream: true }, withKey(key));
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const e of stream) events.push(e);
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      expect(events.map((e) => e.type)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      const deltas = events.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta').map((e) => e.delta);
      expect(deltas.join('')).toBe('one two three');
      const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
      expect(completed.response.status).toBe('completed');
      const retrieved = await client().responses.retrieve(completed.response.id);
      expect(retrieved.output).toEqual(completed.response.output);
      expect(retrieved.usage).toEqual(completed.response.usage);

      // Delivery is not intent: the same key without stream is the same job, replayed.
      const plain = await client().responses.create({ model: 'gpt', input: 'count' }, withKey(key)).withResponse();
      expect(plain.response.headers.get('idempotent-replayed')).toBe('true');
      expect(plain.data.id).toBe(completed.response.id);
      expect(gw.openaiFake.calls).toHaveLength(1);

      // The stored Response's events after sequence number 4, from the retrieve stream.
      const resumed = await client().responses.retrieve(completed.response.id, { stream: true, starting_after: 4 });
      const rest: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const e of resumed) rest.push(e);
      expect(rest[0]!.sequence_number).toBe(5);
      expect(rest.at(-1)!.type).toBe('response.completed');
      // The replay's Response is the stored one, completed_at included.
      expect((rest.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response).toEqual(retrieved);
    });

    it('retrieve with stream=true follows a background Response live, and starting_after skips what a client already has', async () => {
      gw.openaiFake.script([{ reply: 'alpha beta gamma', chunks: ['alpha', ' beta', ' gamma'], streamGate: { afterChunks: 1, gate: 'mid' } }]);
      const r = await client().responses.create({ model: 'gpt', input: 'go', background: true }, withKey(key));
      await gw.openaiFake.waitForCalls(1);
      const live = await client().responses.retrieve(r.id, { stream: true });
      const seen: OpenAI.Responses.ResponseStreamEvent[] = [];
      let released = false;
      for await (const e of live) {
        seen.push(e);
        // The first delta arrived while the provider is held mid-stream: the relay is live, not a replay at the end.
        if (e.type === 'response.output_text.delta' && !released) {
          expect(e.delta).toBe('alpha');
          expect((await client().responses.retrieve(r.id)).status).toBe('in_progress');
          released = true;
          gw.openaiFake.release('mid');
        }
      }
      expect(released).toBe(true);
      expect(seen.map((e) => e.sequence_number)).toEqual(seen.map((_, i) => i));
      expect(seen.at(-1)!.type).toBe('response.completed');
      const text = seen.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
      expect(text).toBe('alpha beta gamma');
      // After the end: the events after 3 are the stored Response's, numbered from 4.
      const after = await client().responses.retrieve(r.id, { stream: true, starting_after: 3 });
      const rest: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const e of after) rest.push(e);
      expect(rest.map((e) => e.sequence_number)).toEqual(rest.map((_, i) => i + 4));
      expect(gw.openaiFake.calls).toHaveLength(1);
    });

    it('a stream that breaks after output ends with an error event naming the job (the SDK raises it); the attempt is unknown', async () => {
      gw.openaiFake.script([{ reply: 'cut short here', chunks: ['cut', ' short', ' here'], streamCut: { afterChunks: 1 } }]);
      const stream = await client().responses.create({ model: 'gpt', input: 'x', stream: true }, withKey(key));
      const types: string[] = [];
      const error = await (async () => {
        for await (const e of stream) types.push(e.type);
        return null;
      })().catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      let [job] = await gw.jobsWithKey(key);
      // The error event may go out before the attempt's end is written: wait for the job to settle in doubt.
      for (let i = 0; i < 100 && job!.state !== 'unknown'; i += 1) {
        await new Promise((r) => setTimeout(r, 50));
        [job] = await gw.jobsWithKey(key);
      }
      expect(types).toContain('response.output_text.delta');
      expect(types).not.toContain('response.completed');
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect((error as unknown as { error: { job_id: string } }).error.job_id).toBe(job!.id);
      expect(job!.attempts.map((a) => a.state)).toEqual(['unknown']);
      // In doubt: retrieve says in_progress, with onejob.state unknown.
      const r = (await client().responses.retrieve(`resp_${job!.id}`)) as OpenAI.Responses.Response & { onejob: { state: string } };
      expect(r.status).toBe('in_progress');
      expect(r.onejob.state).toBe('unknown');
    });

    it("the SDK's stream helper (responses.stream): text deltas and finalResponse()", async () => {
      gw.openaiFake.script([{ reply: 'streamed helper', chunks: ['streamed', ' helper'] }]);
      const stream = client().responses.stream({ model: 'gpt', input: 'hi' }, withKey(key));
      let text = '';
      stream.on('response.output_text.delta', (e) => {
        text += e.delta;
      });
      const final = await stream.finalResponse();
      expect(text).toBe('streamed helper');
      expect(final.output_text).toBe('streamed helper');
      expect(final.status).toBe('completed');
      const [job] = await gw.jobsWithKey(key);
      expect(final.id).toBe(`resp_${job!.id}`);
    });

    it('background: answers at once (queued / in_progress), the job runs on; polling retrieve sees it complete', async () => {
      gw.openaiFake.script([{ gate: 'bg', reply: 'done in the background' }]);
      const first = await client().responses.create({ model: 'gpt', input: 'slow', background: true }, withKey(key));
      expect(['queued', 'in_progress']).toContain(first.status);
      expect(first.background).toBe(true);
      expect(first.output).toEqual([]);
      await gw.openaiFake.waitForCalls(1);
      expect((await client().responses.retrieve(first.id)).status).toBe('in_progress');
      gw.openaiFake.release('bg');
      let polled = await client().responses.retrieve(first.id);
      for (let i = 0; i < 100 && polled.status !== 'completed'; i += 1) {
        await new Promise((r) => setTimeout(r, 50));
        polled = await client().responses.retrieve(first.id);
      }
      expect(polled.status).toBe('completed');
      expect(polled.output_text).toBe('done in the background');
      // background is delivery, not intent: the same key and body without it is the same job, replayed.
      const again = await client().responses.create({ model: 'gpt', input: 'slow' }, withKey(key)).withResponse();
      expect(again.response.headers.get('idempotent-replayed')).toBe('true');
      expect(again.data.id).toBe(first.id);
      expect(again.data.output_text).toBe('done in the background');
      expect(gw.openaiFake.calls).toHaveLength(1);
    });

    it('cancel: a running Response becomes cancelled (its job too); a finished one answers as it is', async () => {
      gw.openaiFake.script([{ gate: 'never', reply: 'late' }]);
      const r = await client().responses.create({ model: 'gpt', input: 'slow', background: true }, withKey(key));
      await gw.openaiFake.waitForCalls(1);
      const cancelled = await client().responses.cancel(r.id);
      expect(cancelled.status).toBe('cancelled');
      expect((await client().responses.retrieve(r.id)).status).toBe('cancelled');
      const [job] = await gw.jobsWithKey(key);
      expect(job!.state).toBe('cancelled');
      expect((await client().responses.cancel(r.id)).status).toBe('cancelled');
      gw.openaiFake.release('never');
    });

    it('inputItems.list: this Response’s own input items with ids, newest first by default, paged with after', async () => {
      gw.openaiFake.script([{ reply: 'ok' }]);
      const r = await client().responses.create(
        {
          model: 'gpt',
          input: [
            { role: 'developer', content: 'Answer in French.' },
            { role: 'user', content: [{ type: 'input_text', text: 'Hello' }] },
            { type: 'message', role: 'user', content: 'And goodbye' },
          ],
        },
        withKey(key),
      );
      const page = await client().responses.inputItems.list(r.id);
      expect(page.data.map((i) => (i as { role?: string }).role)).toEqual(['user', 'user', 'developer']);
      expect(page.data.every((i) => typeof i.id === 'string' && i.id !== '')).toBe(true);
      const asc = await client().responses.inputItems.list(r.id, { order: 'asc', limit: 2 });
      expect(asc.data.map((i) => (i as { role?: string }).role)).toEqual(['developer', 'user']);
      expect(asc.has_more).toBe(true);
      const all: string[] = [];
      for await (const item of client().responses.inputItems.list(r.id, { order: 'asc', limit: 1 })) all.push(item.id);
      expect(all).toHaveLength(3);
      expect(new Set(all).size).toBe(3);
    });

    it('previous_response_id: a conversation whose second step an anthropic provider serves; the first step’s instructions are not carried', async () => {
      gw.openaiFake.script([{ reply: 'Paris is the capital of France.' }]);
      gw.anthropicFake.script([{ reply: 'About 2.1 million people.' }]);
      const first = await client().responses.create({ model: 'gpt', instructions: 'You are a geographer.', input: 'Capital of France?' }, withKey(key));
      const second = await client().responses.create(
        { model: 'claude', instructions: 'Be precise.', previous_response_id: first.id, input: 'How many people live there?' },
        withKey(`${key}-2`),
      );
      expect(second.output_text).toBe('About 2.1 million people.');
      expect(second.previous_response_id).toBe(first.id);
      const sent = gw.anthropicFake.calls[0]!.body as { system?: unknown; messages: { role: string; content: unknown }[] };
      expect(sent.system).toBe('Be precise.');
      expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(JSON.stringify(sent.messages)).toContain('Paris is the capital of France.');
      // A third step back on the openai provider carries both earlier turns.
      gw.openaiFake.script([{ reply: 'Yes.' }]);
      await client().responses.create({ model: 'gpt', previous_response_id: second.id, input: 'Is that the city proper?' }, withKey(`${key}-3`));
      const third = gw.openaiFake.calls[1]!.body as Sent;
      expect(third.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
      expect(third.messages[3]!.content).toBe('About 2.1 million people.');

      // Another owner's or an unknown id is 404, and creates nothing.
      const other = await client(TOKEN_BOB).responses.create({ model: 'gpt', previous_response_id: first.id, input: 'x' }, withKey(`${key}-bob`)).catch((e: unknown) => e);
      expect(other).toBeInstanceOf(OpenAI.NotFoundError);
      expect(await client(TOKEN_BOB).responses.retrieve(first.id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
      const unknown = await client().responses.create({ model: 'gpt', previous_response_id: 'resp_job_nope', input: 'x' }, withKey(`${key}-unknown`)).catch((e: unknown) => e);
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
      expect(await gw.jobsWithKey(`${key}-unknown`)).toEqual([]);
      expect(gw.openaiFake.calls).toHaveLength(2);
    });

    it('a tool round trip: a function_call item, then its function_call_output continues the Response', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_7', name: 'get_weather', arguments: { city: 'Oslo' } }] }, { reply: 'Cold in Oslo.' }]);
      const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', description: 'The weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true }];
      const first = await client().responses.create({ model: 'gpt', input: 'Weather in Oslo?', tools, tool_choice: 'auto' }, withKey(key));
      const [job] = await gw.jobsWithKey(key);
      expect(first.output).toEqual([{ id: `fc_${job!.id}_0`, type: 'function_call', call_id: 'call_7', name: 'get_weather', arguments: '{"city":"Oslo"}', status: 'completed' }]);
      expect((gw.openaiFake.calls[0]!.body as Sent).tools).toEqual([
        { type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: (tools[0] as OpenAI.Responses.FunctionTool).parameters, strict: true } },
      ]);
      const second = await client().responses.create(
        { model: 'gpt', tools, previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: 'call_7', output: '{"temp":-5}' }] },
        withKey(`${key}-2`),
      );
      expect(second.output_text).toBe('Cold in Oslo.');
      const sent = gw.openaiFake.calls[1]!.body as Sent;
      expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(sent.messages[1]!.tool_calls).toEqual([{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
      expect(sent.messages[2]).toMatchObject({ tool_call_id: 'call_7', content: '{"temp":-5}' });
      // The same round trip without previous_response_id, the items passed back as they came.
      gw.openaiFake.script([{ reply: 'Still cold.' }]);
      const manual = await client().responses.create(
        { model: 'gpt', tools, input: [{ role: 'user', content: 'Weather in Oslo?' }, ...(first.output as OpenAI.Responses.ResponseInputItem[]), { type: 'function_call_output', call_id: 'call_7', output: 'cold' }] },
        withKey(`${key}-3`),
      );
      expect(manual.output_text).toBe('Still cold.');
      expect((gw.openaiFake.calls[2]!.body as Sent).messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      // The call passed back by reference (as the AI SDK does with stored items): resolved from the owner's own Response.
      gw.openaiFake.script([{ reply: 'By reference.' }]);
      const fcId = (first.output[0] as { id: string }).id;
      const byRef = await client().responses.create(
        { model: 'gpt', tools, input: [{ role: 'user', content: 'Weather in Oslo?' }, { type: 'item_reference', id: fcId }, { type: 'function_call_output', call_id: 'call_7', output: 'cold' }] },
        withKey(`${key}-4`),
      );
      expect(byRef.output_text).toBe('By reference.');
      expect((gw.openaiFake.calls[3]!.body as Sent).messages[1]!.tool_calls).toEqual([{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
      // Another owner cannot reference it: 404, nothing created.
      const bob = await apiError(client(TOKEN_BOB).responses.create({ model: 'gpt', input: [{ type: 'item_reference', id: fcId }] }, withKey(`${key}-bob`)));
      expect(bob).toBeInstanceOf(OpenAI.NotFoundError);
      expect(gw.openaiFake.calls).toHaveLength(4);
    });

    it('streamed function call arguments: function_call_arguments.delta events and the done item', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_s', name: 'lookup', arguments: { q: 'x' } }] }]);
      const stream = await client().responses.create({ model: 'gpt', input: 'look it up', stream: true, tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object' }, strict: false }] }, withKey(key));
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const e of stream) events.push(e);
      const args = events.filter((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
      expect(args).toBe('{"q":"x"}');
      const done = events.find((e) => e.type === 'response.output_item.done') as OpenAI.Responses.ResponseOutputItemDoneEvent;
      expect(done.item).toMatchObject({ type: 'function_call', call_id: 'call_s', name: 'lookup', arguments: '{"q":"x"}' });
      expect(events.at(-1)!.type).toBe('response.completed');
    });

    it('a failover from a 503 primary: the anthropic fallback answers, the job shows both attempts', async () => {
      gw.openaiFake.script([{ status: 503 }]);
      gw.anthropicFake.script([{ reply: 'from the fallback' }]);
      const r = await client().responses.create({ model: 'gpt-then-claude', input: 'hi' }, withKey(key));
      expect(r.output_text).toBe('from the fallback');
      const [job] = await gw.jobsWithKey(key);
      expect(job!.attempts.map((a) => [a.provider, a.state])).toEqual([
        ['gpt', 'failed'],
        ['claude', 'succeeded'],
      ]);
    });

    it('the double click: two concurrent creates with one key are one job and one provider call', async () => {
      gw.openaiFake.script([{ delayMs: 300, reply: 'once' }]);
      const body = { model: 'gpt', input: 'click' };
      const [a, b] = await Promise.all([client().responses.create(body, withKey(key)), client().responses.create(body, withKey(key))]);
      expect(a.id).toBe(b.id);
      expect(a.output_text).toBe('once');
      expect(b.output_text).toBe('once');
      expect(await gw.jobsWithKey(key)).toHaveLength(1);
      expect(gw.openaiFake.calls).toHaveLength(1);
    });

    it('streamed duplicates share the stream: both receive the same events from the first, one provider call', async () => {
      gw.openaiFake.script([{ reply: 'shared live text', chunks: ['shared', ' live', ' text'], streamGate: { afterChunks: 1, gate: 'dup' } }]);
      const body = { model: 'gpt', input: 'share', stream: true as const };
      const read = async (onFirst: () => void = () => {}) => {
        const events: OpenAI.Responses.ResponseStreamEvent[] = [];
        for await (const e of await client().responses.create(body, withKey(key))) {
          events.push(e);
          if (events.length === 1) onFirst();
        }
        return events;
      };
      const a = read();
      await gw.openaiFake.waitForCalls(1);
      // The provider is held after its first chunk: the second request joins the live stream (its buffered events come at once).
      let joined!: () => void;
      const firstOfB = new Promise<void>((r) => (joined = r));
      const b = read(joined);
      await firstOfB;
      gw.openaiFake.release('dup');
      const [ea, eb] = await Promise.all([a, b]);
      expect(eb.map((e) => [e.type, e.sequence_number])).toEqual(ea.map((e) => [e.type, e.sequence_number]));
      expect(ea.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as OpenAI.Responses.ResponseTextDeltaEvent).delta)).toEqual(['shared', ' live', ' text']);
      expect(gw.openaiFake.calls).toHaveLength(1);
    });

    it('structured output: text.format json_schema reaches the provider as response_format; the text is the JSON', async () => {
      gw.openaiFake.script([{ reply: { city: 'Rome' } }]);
      const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
      const r = await client().responses.create({ model: 'gpt', input: 'A city?', text: { format: { type: 'json_schema', name: 'city', schema, strict: true } } }, withKey(key));
      expect(JSON.parse(r.output_text)).toEqual({ city: 'Rome' });
      expect((gw.openaiFake.calls[0]!.body as Sent).response_format).toEqual({ type: 'json_schema', json_schema: { name: 'city', schema, strict: true } });
      expect(r.text?.format).toMatchObject({ type: 'json_schema', name: 'city' });
    });

    it('reasoning reaches an OpenAI provider as reasoning_effort; an anthropic one is skipped with unsupported:reasoning_effort', async () => {
      gw.openaiFake.script([{ reply: 'thought' }]);
      const r = await client().responses.create({ model: 'claude-then-gpt', input: 'think', reasoning: { effort: 'low' } }, withKey(key));
      expect(r.output_text).toBe('thought');
      expect((gw.openaiFake.calls[0]!.body as Sent).reasoning_effort).toBe('low');
      expect(gw.anthropicFake.calls).toHaveLength(0);
      const [job] = await gw.jobsWithKey(key);
      expect(job!.skipped).toEqual([{ provider: 'claude', reason: 'unsupported:reasoning_effort' }]);
    });

    it('a member onejob cannot serve is refused (422 invalid_request naming it), a hosted tool too; nothing is created', async () => {
      const e = await apiError(client().responses.create({ model: 'gpt', input: 'x', tools: [{ type: 'web_search' }] }, withKey(key)));
      expect(e).toBeInstanceOf(OpenAI.UnprocessableEntityError);
      expect(e.code).toBe('invalid_request');
      expect(e.message).toContain('tools');
      const c = await apiError(client().responses.create({ model: 'gpt', input: 'x', conversation: 'conv_1' }, withKey(key)));
      expect(c).toBeInstanceOf(OpenAI.UnprocessableEntityError);
      expect(await gw.jobsWithKey(key)).toEqual([]);
      const missing = await apiError(client().responses.create({ model: 'gpt', input: 'x' }));
      expect(missing.status).toBe(400);
      expect(missing.code).toBe('idempotency_key_missing');
    });

    it('a failed job: the plain create is 502 job_failed; retrieve shows status failed with its error', async () => {
      gw.openaiFake.script([{ status: 400, error: { message: 'bad' } }]);
      const e = await apiError(client().responses.create({ model: 'gpt', input: 'x' }, withKey(key)));
      expect(e.status).toBe(502);
      expect(e.code).toBe('job_failed');
      const [job] = await gw.jobsWithKey(key);
      const r = await client().responses.retrieve(`resp_${job!.id}`);
      expect(r.status).toBe('failed');
      expect(r.error?.message).toContain('failed');
    });
  });
}
