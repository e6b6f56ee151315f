/**
 * Agent loops through the gateway, on SQLite and PostgreSQL: the real
 * clients (the `openai` SDK by hand, the Vercel AI SDK, LangChain's
 * `ChatOpenAI`, the OpenAI Agents SDK) run a multi-step tool loop over a real
 * socket with `fetch: intentFetch()`. Every step is one HTTP request with its
 * own body, so it must be its own job: one key per step, one job per step,
 * one provider call per step, and a step that the framework resends (after
 * its client-side timeout, or after the gateway's `409 attempt_in_flight`)
 * keeps its key, so it still runs once. The control: one key for the whole
 * loop in `defaultHeaders` is `409 idempotency_key_reused` on step 2.
 *
 * How a resend is provoked: step 2's provider call waits on a gate of the
 * fake provider, and the recording fetch under `intentFetch()` opens it when
 * it sees step 2's request body a second time (the client's retry of that
 * step). So the first try of the step is left waiting, and the step's answer
 * comes only to a resend. Any other step the client resends (a slow machine)
 * must keep its key as well, which the same assertions check.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { DynamicStructuredTool } from '@langchain/core/tools';
import { HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, run, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateText, jsonSchema, stepCountIs, streamText, tool as aiTool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { intentFetch } from '../../src/client/index.ts';
import type { FakeBehaviour } from '../../src/testing/fake-provider-server.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { OWNER, startGateway, TOKEN, type Gateway } from './gateway-server.ts';

setTracingDisabled(true);

const weatherSchema = { type: 'object' as const, properties: { city: { type: 'string' as const } }, required: ['city'], additionalProperties: false as const };
const weatherOf = (city: string): string => (city === 'Paris' ? 'sunny' : 'rainy');
const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherSchema } }];

/** Three steps: a tool call, a second tool call (its provider call waiting on `gate` when given), the answer. */
function threeSteps(gate?: string): FakeBehaviour[] {
  return [
    { toolCalls: [{ id: 'call_paris', name: 'get_weather', arguments: { city: 'Paris' } }] },
    { ...(gate === undefined ? {} : { gate }), toolCalls: [{ id: 'call_rome', name: 'get_weather', arguments: { city: 'Rome' } }] },
    { reply: 'Sunny in Paris, rainy in Rome.' },
  ];
}

/** One HTTP try as it left `intentFetch()`. */
interface Try {
  readonly key: string | null;
  readonly retryCount: string | null;
  readonly body: string;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`agent loops through the gateway: one job per step (${db.name})`, () => {
    let gw: Gateway;
    let tries: Try[];
    beforeAll(async () => {
      // A short wait, so that a slow step answers 409 attempt_in_flight (retryable) and the framework resends it.
      gw = await startGateway(db, { chatMaxWaitMs: 1_500 });
    });
    afterAll(async () => {
      await gw?.close();
    });
    beforeEach(() => {
      gw.reset();
      tries = [];
    });

    /** Step 2's request, in either API: it carries the first tool call (and its result), not the second. */
    const isStep2 = (body: string): boolean => body.includes('call_paris') && !body.includes('call_rome');
    /** The fetch under `intentFetch()`: records every try; step 2's body sent again (the framework's retry) opens its gate. */
    const recording: typeof fetch = async (input, init) => {
      const headers = new Headers(init?.headers);
      const body = typeof init?.body === 'string' ? init.body : '';
      const resend = tries.some((t) => t.body === body);
      tries.push({ key: headers.get('idempotency-key'), retryCount: headers.get('x-stainless-retry-count'), body });
      if (resend && isStep2(body)) gw.openaiFake.release('slow-step');
      return fetch(input, init);
    };
    const baseURL = () => `${gw.origin}/v1`;

    /** The keys of the steps, in order: each try's key, once. */
    const stepKeys = (): (string | null)[] => [...new Set(tries.map((t) => t.key))];

    /**
     * What the contract promises for a loop of `steps` steps: a key on every
     * try, the same key on every try of a step (a body sent again), `steps` keys, exactly one job per key, each succeeded on its one
     * attempt, and one provider call per step, each for its own job, in order.
     */
    async function expectOneJobPerStep(steps: number): Promise<void> {
      // A body sent again (a retry of its step) went with the key it was first sent with.
      const keyOfBody = new Map<string, string | null>();
      for (const t of tries) {
        if (!keyOfBody.has(t.body)) keyOfBody.set(t.body, t.key);
        expect(t.key).toBe(keyOfBody.get(t.body));
      }
      const keys = stepKeys();
      expect(keys).not.toContain(null);
      expect(keys).toHaveLength(steps);
      const all = (await gw.store.listJobs({ ownerId: OWNER, limit: 200 })).jobs;
      const jobs = keys.map((k) => all.filter((j) => j.idempotencyKey === k));
      expect(jobs.map((j) => j.length)).toEqual(keys.map(() => 1));
      expect(jobs.map(([j]) => [j!.state, j!.attempts.length])).toEqual(keys.map(() => ['succeeded', 1]));
      expect(gw.openaiFake.calls.map((c) => c.jobId)).toEqual(jobs.map(([j]) => j!.id));
    }

    /** The tries of step `n` (1-based). */
    const triesOfStep = (n: number): Try[] => tries.filter((t) => t.key === stepKeys()[n - 1]);

    describe('the openai SDK, the loop written by hand (tool_calls → tool message → answer)', () => {
      /** Runs the loop: a request per step until an answer without tool calls. */
      async function loop(openai: OpenAI): Promise<string | null> {
        const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris and in Rome?' }];
        for (let step = 1; step <= 5; step++) {
          const completion = await openai.chat.completions.create({ model: 'gpt', messages, tools });
          const message = completion.choices[0]!.message;
          messages.push(message as OpenAI.Chat.ChatCompletionAssistantMessageParam);
          const calls = message.tool_calls ?? [];
          if (calls.length === 0) return message.content;
          for (const call of calls) {
            if (call.type !== 'function') throw new Error(`unexpected tool call ${call.type}`);
            const { city } = JSON.parse(call.function.arguments) as { city: string };
            messages.push({ role: 'tool', tool_call_id: call.id, content: weatherOf(city) });
          }
        }
        throw new Error('the loop did not end');
      }

      it('with fetch: intentFetch(): one job per step; step 2, retried by the SDK after its client-side timeout, keeps its key and calls the provider once', async () => {
        gw.openaiFake.script(threeSteps('slow-step'));
        const openai = new OpenAI({ apiKey: TOKEN, baseURL: baseURL(), fetch: intentFetch({ fetch: recording }), maxRetries: 4, timeout: 1_000 });
        expect(await loop(openai)).toBe('Sunny in Paris, rainy in Rome.');
        await expectOneJobPerStep(3);
        const step2 = triesOfStep(2);
        expect(step2.length).toBeGreaterThanOrEqual(2);
        expect(step2.map((t) => t.retryCount)).toEqual(step2.map((_, i) => String(i)));
        // The tool results went back: step 3's request carries both tool messages.
        const sent = gw.openaiFake.calls[2]!.body as { messages: { role: string; tool_call_id?: string; content?: unknown }[] };
        expect(sent.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content])).toEqual([
          ['call_paris', 'sunny'],
          ['call_rome', 'rainy'],
        ]);
      });

      it('the control: one key for the whole loop in defaultHeaders is 409 idempotency_key_reused on step 2, with x-should-retry: false, so the SDK does not retry it', async () => {
        gw.openaiFake.script(threeSteps());
        const key = `one-key-for-the-loop-${db.name}-${Date.now()}`;
        const openai = new OpenAI({ apiKey: TOKEN, baseURL: baseURL(), defaultHeaders: { 'Idempotency-Key': key }, fetch: recording, maxRetries: 3 });
        const error = await loop(openai).then(
          () => null,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(OpenAI.APIError);
        const apiError = error as InstanceType<typeof OpenAI.APIError>;
        expect(apiError.status).toBe(409);
        expect(apiError.code).toBe('idempotency_key_reused');
        expect(apiError.headers?.get('x-should-retry')).toBe('false');
        // Step 1 once, step 2 once (not retried); only step 1 reached the provider, and its job is untouched.
        expect(tries.map((t) => t.key)).toEqual([key, key]);
        expect(gw.openaiFake.calls).toHaveLength(1);
        const [job, ...others] = await gw.jobsWithKey(key);
        expect(others).toHaveLength(0);
        expect(job!.state).toBe('succeeded');
        expect((job!.input as { messages: unknown[] }).messages).toHaveLength(1);
      });
    });

    describe('the Vercel AI SDK (ai 5, @ai-sdk/openai-compatible)', () => {
      const onejob = () => createOpenAICompatible({ name: 'onejob', baseURL: baseURL(), apiKey: TOKEN, fetch: intentFetch({ fetch: recording }) });
      const weather = () => ({
        get_weather: aiTool({
          description: 'The weather in a city',
          inputSchema: jsonSchema<{ city: string }>(weatherSchema),
          execute: async ({ city }) => weatherOf(city),
        }),
      });

      it('generateText with tools and stopWhen: stepCountIs(5): one job per step; step 2, too slow for the gateway (409 attempt_in_flight) and resent by the SDK, keeps its key and calls the provider once', async () => {
        gw.openaiFake.script(threeSteps('slow-step'));
        const r = await generateText({ model: onejob()('gpt'), prompt: 'Weather in Paris and in Rome?', tools: weather(), stopWhen: stepCountIs(5), maxRetries: 3 });
        expect(r.text).toBe('Sunny in Paris, rainy in Rome.');
        expect(r.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'tool-calls', 'stop']);
        expect(r.steps.flatMap((s) => s.toolResults.map((t) => t.output))).toEqual(['sunny', 'rainy']);
        await expectOneJobPerStep(3);
        expect(triesOfStep(2).length).toBeGreaterThanOrEqual(2);
      });

      it('streamText with tools and several steps: one job per step, each streamed', async () => {
        gw.openaiFake.script(threeSteps());
        const r = streamText({ model: onejob()('gpt'), prompt: 'Weather in Paris and in Rome?', tools: weather(), stopWhen: stepCountIs(5) });
        expect(await r.text).toBe('Sunny in Paris, rainy in Rome.');
        expect((await r.steps).map((s) => s.finishReason)).toEqual(['tool-calls', 'tool-calls', 'stop']);
        expect(tries.map((t) => (JSON.parse(t.body) as { stream?: boolean }).stream)).toEqual([true, true, true]);
        await expectOneJobPerStep(3);
      });
    });

    describe("LangChain's ChatOpenAI (@langchain/openai) with a bound tool", () => {
      const weather = new DynamicStructuredTool({
        name: 'get_weather',
        description: 'The weather in a city',
        schema: weatherSchema,
        func: async (input: { city: string }) => weatherOf(input.city),
      });

      /** The loop: invoke, run the tool calls, until an answer; returns it and the number of steps. */
      async function loop(useResponsesApi: boolean): Promise<{ answer: string; steps: number }> {
        const model = new ChatOpenAI({
          model: 'gpt',
          apiKey: TOKEN,
          useResponsesApi,
          timeout: 1_000,
          maxRetries: 4,
          configuration: { baseURL: baseURL(), fetch: intentFetch({ fetch: recording }) },
        }).bindTools([weather]);
        const messages: BaseMessage[] = [new HumanMessage('Weather in Paris and in Rome?')];
        for (let steps = 1; steps <= 5; steps++) {
          const ai = await model.invoke(messages);
          messages.push(ai);
          if ((ai.tool_calls ?? []).length === 0) return { answer: ai.text, steps };
          for (const call of ai.tool_calls ?? []) messages.push(await weather.invoke(call));
        }
        throw new Error('the loop did not end');
      }

      for (const useResponsesApi of [false, true]) {
        it(`${useResponsesApi ? 'useResponsesApi: true (/v1/responses)' : 'chat completions'}, several steps: one job per step; step 2, retried by LangChain after its client-side timeout (a new request to the SDK: retry count 0), keeps its key and calls the provider once`, async () => {
          gw.openaiFake.script(threeSteps('slow-step'));
          expect(await loop(useResponsesApi)).toEqual({ answer: 'Sunny in Paris, rainy in Rome.', steps: 3 });
          expect(new Set(tries.map((t) => (JSON.parse(t.body) as { input?: unknown }).input !== undefined))).toEqual(new Set([useResponsesApi]));
          await expectOneJobPerStep(3);
          const step2 = triesOfStep(2);
          expect(step2.length).toBeGreaterThanOrEqual(2);
          // LangChain retries by itself (the openai client under it has maxRetries 0): every try is count 0.
          expect(new Set(step2.map((t) => t.retryCount))).toEqual(new Set(['0']));
        });
      }
    });

    describe('the OpenAI Agents SDK (@openai/agents 0.14.3, the last line on openai 6 / Node 20)', () => {
      // The agents SDK is typed against its own copy of openai 6; the client is the same at run time.
      type AgentsClient = ConstructorParameters<typeof OpenAIResponsesModel>[0];
      for (const api of ['responses', 'chat completions'] as const) {
        it(`an agent with a function tool on the ${api} model: one job per model call; a model call retried after its client-side timeout keeps its key and calls the provider once`, async () => {
          gw.openaiFake.script(threeSteps('slow-step'));
          const client = new OpenAI({ apiKey: TOKEN, baseURL: baseURL(), fetch: intentFetch({ fetch: recording }), maxRetries: 4, timeout: 1_000 }) as unknown as AgentsClient;
          let ran = 0;
          const agent = new Agent({
            name: 'weather',
            instructions: 'Answer with the weather of every city asked about, using the tool.',
            tools: [
              agentTool({
                name: 'get_weather',
                description: 'The weather in a city',
                parameters: weatherSchema,
                execute: async (input) => {
                  ran++;
                  return weatherOf((input as { city: string }).city);
                },
              }),
            ],
            model: api === 'responses' ? new OpenAIResponsesModel(client, 'gpt') : new OpenAIChatCompletionsModel(client, 'gpt'),
          });
          const result = await run(agent, 'Weather in Paris and in Rome?');
          expect(result.finalOutput).toBe('Sunny in Paris, rainy in Rome.');
          expect(ran).toBe(2);
          expect(new Set(tries.map((t) => (JSON.parse(t.body) as { input?: unknown }).input !== undefined))).toEqual(new Set([api === 'responses']));
          await expectOneJobPerStep(3);
          expect(triesOfStep(2).length).toBeGreaterThanOrEqual(2);
        });
      }
    });
  });
}
