/**
 * LangChain's `ChatOpenAI` with `useResponsesApi: true` (`@langchain/openai`
 * 1.5.8, the last line on Node 20) against the gateway's `/v1/responses` over a
 * real socket, on SQLite and PostgreSQL: a tool loop (the model calls a
 * tool, the tool's result goes back, the model answers), one key and so one
 * job per HTTP request, and a replay of a step causing no provider call.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { startGateway, TOKEN, type Gateway } from './gateway-server.ts';

const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`LangChain ChatOpenAI (useResponsesApi) through the gateway (${db.name})`, () => {
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
      key = `lc-${db.name}-${Date.now()}-${++seq}`;
    });
    /** One key per HTTP request: `keys` lists them in order. */
    const model = (keys: string[]) =>
      new ChatOpenAI({
        model: 'gpt',
        apiKey: TOKEN,
        useResponsesApi: true,
        maxRetries: 1,
        configuration: {
          baseURL: `${gw.origin}/v1`,
          fetch: async (url: string | URL | Request, init?: RequestInit) => {
            const headers = new Headers(init?.headers);
            const k = `${key}-req${keys.length + 1}`;
            keys.push(k);
            headers.set('Idempotency-Key', k);
            return fetch(url, { ...init, headers });
          },
        },
      });

    it('a tool loop: the tool call, its result back as function_call_output, the answer; one job per request', async () => {
      gw.openaiFake.script([{ toolCalls: [{ id: 'call_lc', name: 'get_weather', arguments: { city: 'Kyiv' } }] }, { reply: 'Snowy in Kyiv.' }]);
      const keys: string[] = [];
      const llm = model(keys).bindTools([weatherTool]);
      const history: BaseMessage[] = [new HumanMessage('Weather in Kyiv?')];
      const first = (await llm.invoke(history)) as AIMessage;
      expect(first.tool_calls).toEqual([expect.objectContaining({ id: 'call_lc', name: 'get_weather', args: { city: 'Kyiv' } })]);
      history.push(first, new ToolMessage({ tool_call_id: 'call_lc', content: 'snowy' }));
      const second = (await llm.invoke(history)) as AIMessage;
      expect(second.text).toBe('Snowy in Kyiv.');
      expect(keys).toHaveLength(2);
      for (const k of keys) expect((await gw.jobsWithKey(k)).map((j) => j.state)).toEqual(['succeeded']);
      const sent = gw.openaiFake.calls[1]!.body as { messages: { role: string; tool_call_id?: string; content: unknown }[] };
      expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(sent.messages[2]).toMatchObject({ tool_call_id: 'call_lc', content: 'snowy' });
      expect(gw.openaiFake.calls).toHaveLength(2);
      // The first request again with its key (a retry of that step): the stored Response, no provider call.
      const again = new ChatOpenAI({
        model: 'gpt', apiKey: TOKEN, useResponsesApi: true, maxRetries: 1,
        configuration: { baseURL: `${gw.origin}/v1`, defaultHeaders: { 'Idempotency-Key': keys[0]! } },
      }).bindTools([weatherTool]);
      const replayed = (await again.invoke([new HumanMessage('Weather in Kyiv?')])) as AIMessage;
      expect(replayed.tool_calls).toEqual(first.tool_calls);
      expect(gw.openaiFake.calls).toHaveLength(2);
    });
  });
}
