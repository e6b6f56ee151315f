/**
 * The Vercel AI SDK (`ai` 5 with `@ai-sdk/openai-compatible` 1) against the
 * gateway's `/v1/chat/completions` over a real socket, non-streaming, with an
 * Idempotency-Key on every call and the SDK's retries on, on SQLite and
 * PostgreSQL: `generateText`, a tool call (and a tool that the SDK executes,
 * the result going back as a second request), and a replay.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from './gateway-server.ts';

const weatherInput = jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false });

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the Vercel AI SDK through the gateway (${db.name})`, () => {
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
      key = `ai-${db.name}-${Date.now()}-${++seq}`;
    });
    const onejob = () => createOpenAICompatible({ name: 'onejob', baseURL: `${gw.origin}/v1`, apiKey: TOKEN });

    it('generateText answers the text; the same key again answers the same text without a provider call', async () => {
      gw.openaiFake.script([{ reply: 'A cat sat on a mat.', usage: { prompt_tokens: 9, completion_tokens: 6 } }]);
      const a = await generateText({ model: onejob()('gpt'), prompt: 'Summarize: the cat sat on the mat.', headers: { 'Idempotency-Key': key }, maxRetries: 2 });
      expect(a.text).toBe('A cat sat on a mat.');
      expect(a.finishReason).toBe('stop');
      expect(a.usage).toMatchObject({ inputTokens: 9, outputTokens: 6 });
      const b = await generateText({ model: onejob()('gpt'), prompt: 'Summarize: the cat sat on the mat.', headers: { 'Idempotency-Key': key }, maxRetries: 2 });
      expect(b.text).toBe(a.text);
      expect(gw.openaiFake.calls).toHaveLength(1);
      expect(await gw.jobsWithKey(key)).toHaveLength(1);
    });

    it('a tool call comes back as the SDK tool call (finishReason tool-calls)', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Paris' } }] }]);
      const r = await generateText({
        model: onejob()('gpt'),
        prompt: 'Weather in Paris?',
        tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: weatherInput }) },
        headers: { 'Idempotency-Key': key },
      });
      expect(r.finishReason).toBe('tool-calls');
      expect(r.toolCalls).toEqual([expect.objectContaining({ toolCallId: 'call_1', toolName: 'get_weather', input: { city: 'Paris' } })]);
      expect((gw.openaiFake.calls[0]!.body as { tools: { function: { name: string } }[] }).tools[0]!.function.name).toBe('get_weather');
    });

    it('an executed tool: its result goes back and the model answers (failover to the anthropic provider translating the tool messages)', async () => {
      // Step 1 on the openai provider; step 2 (its own request and job) fails over to claude, which must see tool_use / tool_result.
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_2', name: 'get_weather', arguments: { city: 'Rome' } }] }, { status: 400, error: { message: 'no' } }]);
      gw.anthropicFake.script([{ reply: 'Sunny in Rome.' }]);
      let step = 0;
      // One key per step (each step is its own intent), set by the provider's fetch.
      const stepKeyed = createOpenAICompatible({
        name: 'onejob',
        baseURL: `${gw.origin}/v1`,
        apiKey: TOKEN,
        fetch: async (url, init) => {
          const headers = new Headers(init?.headers);
          headers.set('Idempotency-Key', `${key}-step${++step}`);
          return fetch(url, { ...init, headers });
        },
      });
      const r = await generateText({
        model: stepKeyed('gpt-then-claude'),
        prompt: 'Weather in Rome?',
        tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: weatherInput, execute: async ({ city }) => `sunny in ${city}` }) },
        stopWhen: stepCountIs(3),
      });
      expect(r.text).toBe('Sunny in Rome.');
      expect(step).toBe(2);
      const sent = gw.anthropicFake.calls[0]!.body as { messages: { role: string; content: unknown }[] };
      const text = JSON.stringify(sent.messages);
      expect(text).toContain('"tool_use"');
      expect(text).toContain('"tool_result"');
      expect(text).toContain('sunny in Rome');
      const [job] = await gw.jobsWithKey(`${key}-step2`);
      expect(job!.attempts.map((a) => a.provider)).toEqual(['gpt', 'claude']);
    });
  });
}
