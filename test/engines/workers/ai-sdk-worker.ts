/**
 * One run of an AI SDK agent loop (test/engines/ai-sdk.test.ts), as its own
 * process: `generateText` with a tool and `stopWhen: stepCountIs(5)` through
 * onejob's gateway. `MODE=onejob` wraps the model with `onejobStepKeys({
 * identity: RUN_ID })`; `MODE=intent-fetch` (the control) gives the provider
 * `fetch: intentFetch()` only, whose keys live in one process. Writes one
 * JSON line per event on stdout: `step` (each finished step), `result`.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, stepCountIs, tool, wrapLanguageModel } from 'ai';
import { onejobStepKeys } from '../../../src/ai-sdk/index.ts';
import { intentFetch } from '../../../src/client/index.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`ai-sdk-worker: ${name} is not set`);
  return value;
};
const emit = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};

const mode = env('MODE');
const provider = createOpenAICompatible({ name: 'onejob', baseURL: `${env('ONEJOB_URL')}/v1`, apiKey: env('ONEJOB_TOKEN'), fetch: intentFetch() });
const model = mode === 'onejob' ? wrapLanguageModel({ model: provider('gpt'), middleware: onejobStepKeys({ identity: env('RUN_ID') }) }) : provider('gpt');

const result = await generateText({
  model,
  prompt: 'Weather in Paris and in Rome?',
  tools: {
    get_weather: tool({
      description: 'The weather in a city',
      inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }),
      execute: async ({ city }) => `weather-of-${city}: ${city === 'Paris' ? 'sunny' : 'rainy'}`,
    }),
  },
  stopWhen: stepCountIs(5),
  maxRetries: 5,
  onStepFinish: (step) => emit({ event: 'step', toolCalls: step.toolCalls.map((c) => c.toolName), text: step.text }),
});
emit({ event: 'result', text: result.text, steps: result.steps.length });
