/**
 * POST /v1/messages (CONTRACT §7) over real HTTP with `@anthropic-ai/sdk` as
 * the client, `x-api-key` as its credential, on SQLite and PostgreSQL: the
 * Messages shape for any provider type of the chain, tools both ways, the
 * same job and Idempotency-Key rules as the chat endpoint, and Anthropic's
 * error body on every problem answer.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from '../clients/gateway-server.ts';

const weatherTool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`POST /v1/messages with @anthropic-ai/sdk (${db.name})`, () => {
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
      key = `msg-${db.name}-${Date.now()}-${++seq}`;
    });

    const client = (apiKey = TOKEN, maxRetries = 2) => new Anthropic({ apiKey, baseURL: gw.origin, maxRetries, timeout: 15_000 });
    const withKey = (k: string) => ({ headers: { 'Idempotency-Key': k } });
    async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
      const e = await p.then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(Anthropic.APIError);
      return e as InstanceType<typeof Anthropic.APIError>;
    }
    const post = (path: string, body: unknown, headers: Record<string, string>) =>
      fetch(`${gw.origin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

    it('messages.create through x-api-key on an openai provider: the Messages shape, the system prompt translated', async () => {
      gw.openaiFake.script([{ reply: 'A cat sat.', usage: { prompt_tokens: 11, completion_tokens: 4 } }]);
      const { data, response } = await client()
        .messages.create({ model: 'gpt', max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Summarize: the cat sat on the mat.' }] }, withKey(key))
        .withResponse();
      const [job] = await gw.jobsWithKey(key);
      expect(job?.state).toBe('succeeded');
      expect(data).toMatchObject({
        id: `msg_${job!.id}`,
        type: 'message',
        role: 'assistant',
        model: 'gpt-fake',
        content: [{ type: 'text', text: 'A cat sat.' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 11, output_tokens: 4 },
      });
      expect(response.headers.get('onejob-job-id')).toBe(job!.id);
      expect(gw.openaiFake.calls).toHaveLength(1);
      const sent = gw.openaiFake.calls[0]!.body as { messages: unknown[]; max_tokens: number };
      expect(sent.messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Summarize: the cat sat on the mat.' }]);
      expect(sent.max_tokens).toBe(64);
    });

    it('tools on an anthropic provider: a tool_use block and stop_reason tool_use come back; the tool_result round trip reaches the provider', async () => {
      gw.anthropicFake.script([{ toolCalls: [{ id: 'toolu_1', name: 'get_weather', arguments: { city: 'Paris' } }] }, { reply: 'It is sunny in Paris.' }]);
      const first = await client().messages.create(
        { model: 'claude', max_tokens: 100, tools: [weatherTool], tool_choice: { type: 'auto' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] },
        withKey(key),
      );
      expect(first.stop_reason).toBe('tool_use');
      const use = first.content.find((b) => b.type === 'tool_use');
      expect(use).toMatchObject({ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } });
      const sentTools = (gw.anthropicFake.calls[0]!.body as { tools: unknown[] }).tools;
      expect(sentTools).toEqual([expect.objectContaining({ name: 'get_weather', input_schema: weatherTool.input_schema })]);
      const [job] = await gw.jobsWithKey(key);
      expect((job!.result as { tool_calls: unknown }).tool_calls).toEqual([{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);

      const second = await client().messages.create(
        {
          model: 'claude',
          max_tokens: 100,
          tools: [weatherTool],
          messages: [
            { role: 'user', content: 'Weather in Paris?' },
            { role: 'assistant', content: first.content as Anthropic.ContentBlockParam[] },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny, 24°C' }] },
          ],
        },
        withKey(`${key}-2`),
      );
      expect(second.content).toEqual([expect.objectContaining({ type: 'text', text: 'It is sunny in Paris.' })]);
      expect(second.stop_reason).toBe('end_turn');
      const sent = gw.anthropicFake.calls[1]!.body as { messages: { role: string; content: unknown }[] };
      expect(JSON.stringify(sent.messages)).toContain('"tool_result"');
      expect(JSON.stringify(sent.messages)).toContain('sunny, 24°C');
    });

    it('tools on an openai provider: Anthropic tools are sent as functions, the call comes back as tool_use', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_7', name: 'get_weather', arguments: { city: 'Oslo' } }] }]);
      const message = await client().messages.create(
        { model: 'gpt', max_tokens: 50, tools: [weatherTool], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [{ role: 'user', content: 'Oslo?' }] },
        withKey(key),
      );
      expect(message.stop_reason).toBe('tool_use');
      expect(message.content).toContainEqual(expect.objectContaining({ type: 'tool_use', id: 'call_7', name: 'get_weather', input: { city: 'Oslo' } }));
      const sent = gw.openaiFake.calls[0]!.body as { tools: unknown; tool_choice: unknown };
      expect(sent.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherTool.input_schema } }]);
      expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    });

    it('a replay with the same key answers the same message without a second provider call; another body with it is a 409 the SDK does not retry', async () => {
      gw.openaiFake.script([{ reply: 'once' }]);
      const body = { model: 'gpt', max_tokens: 20, messages: [{ role: 'user' as const, content: 'Hi' }] };
      const a = await client().messages.create(body, withKey(key));
      const { data: b, response } = await client().messages.create(body, withKey(key)).withResponse();
      expect(b).toEqual(a);
      expect(response.headers.get('idempotent-replayed')).toBe('true');
      expect(gw.openaiFake.calls).toHaveLength(1);
      const e = await rejection(client().messages.create({ ...body, max_tokens: 21 }, withKey(key)));
      expect(e).toBeInstanceOf(Anthropic.ConflictError);
      expect(e.status).toBe(409);
      expect(e.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' }, code: 'idempotency_key_reused' });
      expect(gw.openaiFake.calls).toHaveLength(1);
      expect(await gw.jobsWithKey(key)).toHaveLength(1);
    });

    it('the SDK raises its own errors with the status and code: 401, 422 route_unknown, 502 job_failed', async () => {
      const unauthorized = await rejection(client('tok_wrong_0123456789').messages.create({ model: 'gpt', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, withKey(key)));
      expect(unauthorized).toBeInstanceOf(Anthropic.AuthenticationError);
      expect(unauthorized.error).toMatchObject({ type: 'error', error: { type: 'authentication_error' }, code: 'unauthorized' });

      const unknown = await rejection(client().messages.create({ model: 'nope', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, withKey(key)));
      expect(unknown).toBeInstanceOf(Anthropic.UnprocessableEntityError);
      expect(unknown.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' }, code: 'route_unknown' });
      expect(await gw.jobsWithKey(key)).toHaveLength(0);

      gw.openaiFake.script([{ status: 400, error: { message: 'bad things' } }]);
      const failed = await rejection(client().messages.create({ model: 'gpt', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, withKey(key)));
      expect(failed.status).toBe(502);
      expect(failed.error).toMatchObject({ type: 'error', error: { type: 'api_error' }, code: 'job_failed' });
      // x-should-retry: false: the SDK did not retry a failed job.
      expect(gw.openaiFake.calls).toHaveLength(1);
    });

    it("messages.stream: Anthropic's event sequence from either provider type; a double click shares one stream (one provider call); a replay streams the stored result", async () => {
      for (const [model, fake] of [['gpt', gw.openaiFake], ['claude', gw.anthropicFake]] as const) {
        gw.reset();
        const k = `${key}-${model}`;
        fake.script([{ reply: 'A cat sat on the mat.', chunks: ['A cat ', 'sat on ', 'the mat.'], chunkDelayMs: 30, usage: { prompt_tokens: 9, completion_tokens: 6 } }]);
        const req = { model, max_tokens: 64, messages: [{ role: 'user' as const, content: 'Summarize: the cat.' }] };
        const events: string[][] = [[], []];
        const streams = [0, 1].map((i) => {
          const s = client().messages.stream(req, withKey(k));
          s.on('streamEvent', (e) => events[i]!.push(e.type));
          return s;
        });
        const finals = await Promise.all(streams.map((s) => s.finalMessage()));
        for (const [i, m] of finals.entries()) {
          expect(m.content).toEqual([{ type: 'text', text: 'A cat sat on the mat.', citations: null }].map((b) => expect.objectContaining({ type: b.type, text: b.text })));
          expect(m.stop_reason).toBe('end_turn');
          expect(events[i]![0]).toBe('message_start');
          expect(events[i]!.at(-1)).toBe('message_stop');
          expect(events[i]!.filter((t) => t === 'content_block_delta').length).toBeGreaterThanOrEqual(1);
        }
        expect(fake.calls).toHaveLength(1);
        expect(fake.calls[0]!.body).toMatchObject({ stream: true });
        const [job] = await gw.jobsWithKey(k);
        expect(job).toMatchObject({ state: 'succeeded', result: { content: 'A cat sat on the mat.' } });
        const { response } = await client().messages.stream(req, withKey(k)).withResponse();
        expect(response.headers.get('idempotent-replayed')).toBe('true');
        expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
        expect(fake.calls).toHaveLength(1);
      }
    });

    it("every problem answer of the route is Anthropic's error body (application/json), the same status and code as elsewhere; none creates a job", async () => {
      const ok = { model: 'gpt', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
      const cases: [string, Response, number, string, string][] = [
        ['no credential', await post('/v1/messages', ok, { 'idempotency-key': key }), 401, 'authentication_error', 'unauthorized'],
        ['no key', await post('/v1/messages', ok, { 'x-api-key': TOKEN }), 400, 'invalid_request_error', 'idempotency_key_missing'],
        ['not JSON', await post('/v1/messages', '{"model":', { 'x-api-key': TOKEN, 'idempotency-key': key }), 400, 'invalid_request_error', 'invalid_request'],
        ['no max_tokens', await post('/v1/messages', { model: 'gpt', messages: ok.messages }, { 'x-api-key': TOKEN, 'idempotency-key': key }), 422, 'invalid_request_error', 'invalid_request'],
        [
          'unsupported block',
          await post('/v1/messages', { ...ok, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, { 'x-api-key': TOKEN, 'idempotency-key': key }),
          422,
          'invalid_request_error',
          'invalid_request',
        ],
        ['too large', await post('/v1/messages', { ...ok, system: 'x'.repeat(33 * 1024 * 1024) }, { 'x-api-key': TOKEN, 'idempotency-key': key }), 413, 'request_too_large', 'payload_too_large'],
      ];
      for (const [name, res, status, type, code] of cases) {
        expect({ name, status: res.status }).toEqual({ name, status });
        expect(res.headers.get('content-type'), name).toMatch(/^application\/json/);
        const body = (await res.json()) as { type: string; error: { type: string; message: string }; code: string };
        expect(body, name).toMatchObject({ type: 'error', error: { type }, code });
        expect(typeof body.error.message, name).toBe('string');
      }
      expect(await gw.jobsWithKey(key)).toHaveLength(0);
      expect(gw.openaiFake.calls).toHaveLength(0);
    });

    it('x-api-key is a credential on /v1/messages only: /v1/chat/completions and /v1/jobs still want Authorization: Bearer', async () => {
      const chat = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': TOKEN, 'idempotency-key': key });
      expect(chat.status).toBe(401);
      const jobs = await fetch(`${gw.origin}/v1/jobs`, { headers: { 'x-api-key': TOKEN } });
      expect(jobs.status).toBe(401);
      expect(((await jobs.json()) as { code: string }).code).toBe('unauthorized');
    });

    it('a member the first provider cannot express skips it with unsupported:<member> (visible in the job), the next one answers', async () => {
      // `thinking` is Anthropic's: the OpenAI protocol cannot express it, so the openai provider first in the chain is skipped.
      gw.anthropicFake.script([{ reply: 'from claude' }]);
      const message = await client().messages.create(
        { model: 'gpt-then-claude', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'x' }] },
        withKey(key),
      );
      expect(message.content).toEqual([expect.objectContaining({ type: 'text', text: 'from claude' })]);
      expect(gw.openaiFake.calls).toHaveLength(0);
      const [job] = await gw.jobsWithKey(key);
      expect(job!.skipped).toEqual([{ provider: 'gpt', reason: 'unsupported:thinking' }]);
      expect(job!.attempts.map((a) => a.provider)).toEqual(['claude']);
    });
  });
}
