/**
 * The Vercel AI SDK's Responses API model (`ai` 5 with `@ai-sdk/openai` 2,
 * `openai.responses(...)`, which runs on Node 20) against the gateway's
 * `/v1/responses` over a real socket, on SQLite and PostgreSQL: a
 * multi-step tool loop with `generateText` (one key, so one job, per step;
 * the function_call and its output travel as Responses items) and
 * `streamText`.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from './gateway-server.ts';

const weatherInput = jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false });

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the Vercel AI SDK's Responses model through the gateway (${db.name})`, () => {
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
      key = `ai-resp-${db.name}-${Date.now()}-${++seq}`;
    });
    /** One key per HTTP request (each step is its own intent); the SDK's retries of that request would keep it. */
    const stepKeyed = () => {
      let step = 0;
      return createOpenAI({
        baseURL: `${gw.origin}/v1`,
        apiKey: TOKEN,
        fetch: async (url, init) => {
          const headers = new Headers(init?.headers);
          headers.set('Idempotency-Key', `${key}-step${++step}`);
          return fetch(url, { ...init, headers });
        },
      });
    };

    it('generateText with an executed tool: two steps, two Responses jobs, the tool result reaching the provider as a tool message', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_w', name: 'get_weather', arguments: { city: 'Lima' } }] }, { reply: 'Mild in Lima.' }]);
      const r = await generateText({
        model: stepKeyed().responses('gpt'),
        prompt: 'Weather in Lima?',
        tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: weatherInput, execute: async ({ city }) => `mild in ${city}` }) },
        stopWhen: stepCountIs(3),
      });
      expect(r.text).toBe('Mild in Lima.');
      expect(r.steps).toHaveLength(2);
      expect(r.steps[0]!.toolCalls).toEqual([expect.objectContaining({ toolCallId: 'call_w', toolName: 'get_weather', input: { city: 'Lima' } })]);
      const [one] = await gw.jobsWithKey(`${key}-step1`);
      const [two] = await gw.jobsWithKey(`${key}-step2`);
      expect(one!.state).toBe('succeeded');
      expect(two!.state).toBe('succeeded');
      const sent = gw.openaiFake.calls[1]!.body as { messages: { role: string; tool_call_id?: string; content: unknown }[] };
      expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(sent.messages[2]).toMatchObject({ tool_call_id: 'call_w' });
      expect(JSON.stringify(sent.messages[2]!.content)).toContain('mild in Lima');
      expect(gw.openaiFake.calls).toHaveLength(2);
    });

    it('streamText: the text streamed through Responses events', async () => {
      gw.openaiFake.script([{ reply: 'one two three', chunks: ['one', ' two', ' three'] }]);
      const r = streamText({ model: stepKeyed().responses('gpt'), prompt: 'count' });
      const parts: string[] = [];
      for await (const t of r.textStream) parts.push(t);
      expect(parts.join('')).toBe('one two three');
      expect(parts.length).toBeGreaterThan(1);
      expect(await r.finishReason).toBe('stop');
      const [job] = await gw.jobsWithKey(`${key}-step1`);
      expect(job!.state).toBe('succeeded');
    });
  });
}
