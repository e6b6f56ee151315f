/** Shared set-up of the contract tests: a summary contract and providers pointed at a fake provider server. */
import { join } from 'node:path';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { FakeProvider } from '../../src/testing/fake-provider-server.ts';

export const FIXTURES = join(import.meta.dirname, 'fixtures');
export const TEMPLATES = join(import.meta.dirname, '..', 'fixtures', 'chat-templates');

/** A contract: JSON `{ summary, lang }`, no extra keys, French asked by the system prompt, business checks. */
export function summaryContract(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    outputSchema: {
      type: 'object',
      required: ['summary', 'lang'],
      properties: { summary: { type: 'string' }, lang: { enum: ['fr', 'en'] } },
      additionalProperties: false,
    },
    checks: './summary-checks.ts',
    cases: [
      {
        name: 'french summary',
        input: {
          messages: [
            { role: 'system', content: 'Summarize the text in French. Reply with JSON {"summary": string, "lang": "fr"} only.' },
            { role: 'user', content: 'The cat sat on the mat all afternoon.' },
          ],
          max_tokens: 200,
        },
        expect: { subset: { lang: 'fr' } },
      },
    ],
    samples: 3,
    ...overrides,
  };
}

export const GOOD = { summary: 'Le chat est resté sur le tapis.', lang: 'fr' };

/** Provider config entries pointed at the fake. */
export function openaiConfig(fake: FakeProvider, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: null, model: 'gpt-4o-mini', timeoutMs: 5000, ...extra };
}
export function anthropicConfig(fake: FakeProvider, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'anthropic', baseUrl: fake.url, apiKey: 'test-key', model: 'claude-test', timeoutMs: 5000, ...extra };
}

export function providerOf(name: string, config: Record<string, unknown>): Provider {
  return createProvider(name, config as never);
}
