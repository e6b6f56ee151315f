/**
 * The OpenAI Agents SDK for JavaScript (`@openai/agents` 0.14.3, the last
 * line on `openai` 6 and so on Node 20; 0.15 needs `openai` 7 and Node 22)
 * running an agent with a function tool against the gateway's
 * `/v1/responses`, on SQLite and PostgreSQL: the model calls the tool, the
 * SDK runs it and sends its output back, the model answers; one key and so
 * one job per HTTP request.
 */
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from './gateway-server.ts';

setTracingDisabled(true);

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the OpenAI Agents SDK through the gateway (${db.name})`, () => {
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
      key = `agents-${db.name}-${Date.now()}-${++seq}`;
    });

    it('an agent with a function tool: two model calls, two Responses jobs, the tool output reaching the provider', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_ag', name: 'get_weather', arguments: { city: 'Bern' } }] }, { reply: 'Rainy in Bern.' }]);
      const keys: string[] = [];
      const client = new OpenAI({
        apiKey: TOKEN,
        baseURL: `${gw.origin}/v1`,
        maxRetries: 1,
        fetch: async (url, init) => {
          const headers = new Headers(init?.headers);
          const k = `${key}-req${keys.length + 1}`;
          keys.push(k);
          headers.set('Idempotency-Key', k);
          return fetch(url, { ...init, headers });
        },
      });
      let ran = 0;
      const agent = new Agent({
        name: 'weather',
        instructions: 'Use the tool.',
        model: new OpenAIResponsesModel(client as never, 'gpt'),
        tools: [
          tool({
            name: 'get_weather',
            description: 'The weather in a city',
            parameters: z.object({ city: z.string() }),
            execute: async ({ city }) => {
              ran += 1;
              return `rainy in ${city}`;
            },
          }),
        ],
      });
      const result = await run(agent, 'Weather in Bern?');
      expect(result.finalOutput).toBe('Rainy in Bern.');
      expect(ran).toBe(1);
      expect(keys).toHaveLength(2);
      for (const k of keys) expect((await gw.jobsWithKey(k)).map((j) => j.state)).toEqual(['succeeded']);
      const sent = gw.openaiFake.calls[1]!.body as { messages: { role: string; tool_call_id?: string; content: unknown }[] };
      expect(sent.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
      expect(sent.messages[3]).toMatchObject({ tool_call_id: 'call_ag' });
      expect(JSON.stringify(sent.messages[3]!.content)).toContain('rainy in Bern');
      expect(gw.openaiFake.calls).toHaveLength(2);
    });
  });
}
