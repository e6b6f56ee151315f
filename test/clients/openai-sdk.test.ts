/**
 * The official `openai` SDK against the gateway over a real socket
 * (non-streaming), its retries on and an Idempotency-Key on every call, on
 * SQLite and PostgreSQL: tool calls come back (`tool_calls`,
 * `finish_reason: "tool_calls"`), the tool result round trip, the job's
 * `result.tool_calls`, failover from an OpenAI provider to an Anthropic one
 * with the tools translated, and `unsupported:<member>` skips.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from './gateway-server.ts';

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  },
];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the openai SDK through the gateway, tools (${db.name})`, () => {
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
      key = `oai-${db.name}-${Date.now()}-${++seq}`;
    });
    const client = () => new OpenAI({ apiKey: TOKEN, baseURL: `${gw.origin}/v1`, maxRetries: 3, timeout: 15_000 });
    const withKey = (k: string) => ({ headers: { 'Idempotency-Key': k } });

    it('a tool call comes back with tool_calls and finish_reason tool_calls; the job result carries them; the tool result round trip', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Paris' } }] }, { reply: 'Sunny in Paris.' }]);
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
      const first = await client().chat.completions.create({ model: 'gpt', messages, tools, tool_choice: 'auto' }, withKey(key));
      const choice = first.choices[0]!;
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBeNull();
      expect(choice.message.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
      expect((gw.openaiFake.calls[0]!.body as { tools: unknown }).tools).toEqual(tools);
      const [job] = await gw.jobsWithKey(key);
      expect(job!.result).toMatchObject({ content: '', finish_reason: 'tool_calls', tool_calls: choice.message.tool_calls });

      const second = await client().chat.completions.create(
        { model: 'gpt', tools, messages: [...messages, choice.message as OpenAI.Chat.ChatCompletionAssistantMessageParam, { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }] },
        withKey(`${key}-2`),
      );
      expect(second.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'Sunny in Paris.', refusal: null });
      expect(second.choices[0]!.message.tool_calls).toBeUndefined();
      expect(second.choices[0]!.finish_reason).toBe('stop');
      const sent = gw.openaiFake.calls[1]!.body as { messages: { role: string; tool_call_id?: string; tool_calls?: unknown }[] };
      expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(sent.messages[1]!.tool_calls).toEqual(choice.message.tool_calls);
      expect(sent.messages[2]!.tool_call_id).toBe('call_1');
      // The same key again: the stored completion, tool calls included, no provider call.
      const replay = await client().chat.completions.create({ model: 'gpt', messages, tools, tool_choice: 'auto' }, withKey(key));
      expect(replay).toEqual(first);
      expect(gw.openaiFake.calls).toHaveLength(2);
    });

    it('a refusal comes back as message.refusal', async () => {
      gw.openaiFake.script([{ refusal: 'I cannot help with that.' }]);
      const c = await client().chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: 'something bad' }] }, withKey(key));
      expect(c.choices[0]!.message.refusal).toBe('I cannot help with that.');
    });

    it('an OpenAI request failing over to an anthropic provider: tools, tool choice and the system prompt are translated, the tool call comes back in OpenAI shape', async () => {
      gw.openaiFake.script([{ status: 400, error: { message: 'no' } }]);
      gw.anthropicFake.script([{ toolCalls: [{ id: 'toolu_9', name: 'get_weather', arguments: { city: 'Rome' } }] }]);
      const c = await client().chat.completions.create(
        { model: 'gpt-then-claude', messages: [{ role: 'system', content: 'Use tools.' }, { role: 'user', content: 'Rome?' }], tools, tool_choice: 'required', stop: ['END'] },
        withKey(key),
      );
      expect((c as unknown as { provider: string }).provider).toBe('claude');
      expect(c.choices[0]!.finish_reason).toBe('tool_calls');
      expect(c.choices[0]!.message.tool_calls).toEqual([{ id: 'toolu_9', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }]);
      const sent = gw.anthropicFake.calls[0]!.body as Record<string, unknown>;
      expect(sent.tools).toEqual([{ name: 'get_weather', description: 'The weather in a city', input_schema: tools[0]!.type === 'function' ? tools[0]!.function.parameters : null }]);
      expect(sent.tool_choice).toEqual({ type: 'any' });
      expect(sent.system).toBe('Use tools.');
      expect(sent.stop_sequences).toEqual(['END']);
      const [job] = await gw.jobsWithKey(key);
      expect(job!.attempts.map((a) => [a.provider, a.state])).toEqual([
        ['gpt', 'failed'],
        ['claude', 'succeeded'],
      ]);
    });

    it('a member the anthropic provider cannot express (logprobs) skips it with unsupported:logprobs; the openai one answers', async () => {
      gw.openaiFake.script([{ reply: 'ok' }]);
      const c = await client().chat.completions.create({ model: 'claude-then-gpt', messages: [{ role: 'user', content: 'x' }], logprobs: true }, withKey(key));
      expect((c as unknown as { provider: string }).provider).toBe('gpt');
      expect(gw.anthropicFake.calls).toHaveLength(0);
      const [job] = await gw.jobsWithKey(key);
      expect(job!.skipped).toEqual([{ provider: 'claude', reason: 'unsupported:logprobs' }]);
    });

    it('a route whose only provider cannot express the request fails the job (502), naming the skip', async () => {
      const e = await client()
        .chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'x' }], seed: 7 }, withKey(key))
        .then(
          () => null,
          (err: unknown) => err as InstanceType<typeof OpenAI.APIError>,
        );
      expect(e).toBeInstanceOf(OpenAI.APIError);
      expect(e!.status).toBe(502);
      expect(e!.code).toBe('job_failed');
      const [job] = await gw.jobsWithKey(key);
      expect(job!.state).toBe('failed');
      expect(job!.skipped).toEqual([{ provider: 'claude', reason: 'unsupported:seed' }]);
      expect(gw.anthropicFake.calls).toHaveLength(0);
    });
  });
}
