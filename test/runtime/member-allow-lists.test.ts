/**
 * A member the provider would drop is a skip, never silence (CONTRACT §15,
 * issue 35), on SQLite and PostgreSQL through the runtime's gates and the
 * real store: `openai-responses` takes an allow-list of members (a member it
 * does not carry, a custom tool, `store: false` skip it with
 * `unsupported:<member>`); an `openai` provider that stores its completions
 * for its lookup is skipped for `store: false`. And over real HTTP (a
 * recording upstream): the members it carries reach it, translated.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const config = defineConfig({
  apiKeys: { tok_allow_list_0123456789: 'alice' },
  providers: {
    resp: { type: 'openai-responses', baseUrl: 'http://127.0.0.1:9/v1', model: 'm1' },
    stored: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm2', lookup: 'stored-completions' },
    plain: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm3' },
  },
  routes: {
    'resp-then-plain': { providers: ['resp', 'plain'] },
    'stored-then-plain': { providers: ['stored', 'plain'] },
  },
});
const messages = [{ role: 'user', content: 'x' }];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`member allow-lists (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let runtime: Runtime;
    let seq = 0;
    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      runtime = await createRuntime({ config, store });
    });
    afterAll(async () => {
      await runtime?.close(100);
      await cleanup?.();
    });
    /** The provider the job's first attempt went to, and what was skipped. */
    const route = async (name: string, input: Record<string, unknown>) => {
      const { job } = await store.createJob({ ownerId: 'alice', idempotencyKey: `k-${db.name}-${++seq}`, route: name, input: { messages, ...input }, providers: config.routes[name]!.providers });
      const claimed = await store.claimWork({ leaseOwner: 'test', leaseMs: 60_000, limit: 100, eligible: runtime.eligible });
      return { provider: claimed.find((c) => c.job.id === job.id)?.attempt.provider, skipped: (await store.getJob('alice', job.id))!.skipped };
    };

    it("openai-responses: store false, a custom tool and a member it does not carry skip it; the members it carries don't", async () => {
      expect(await route('resp-then-plain', { store: false })).toEqual({ provider: 'plain', skipped: [{ provider: 'resp', reason: 'unsupported:store' }] });
      expect(await route('resp-then-plain', { tools: [{ type: 'custom', custom: { name: 'grammar' } }] }))
        .toEqual({ provider: 'plain', skipped: [{ provider: 'resp', reason: 'unsupported:tools.custom' }] });
      expect(await route('resp-then-plain', { web_search_options: {} })).toEqual({ provider: 'plain', skipped: [{ provider: 'resp', reason: 'unsupported:web_search_options' }] });
      expect(await route('resp-then-plain', {
        reasoning_effort: 'low', verbosity: 'low', service_tier: 'auto', prompt_cache_key: 'p', safety_identifier: 's', metadata: { a: 'b' }, store: true,
      })).toEqual({ provider: 'resp', skipped: [] });
    });

    it('a stored-completions provider is skipped for store false (its lookup needs the completion stored); a plain one takes it as given', async () => {
      expect(await route('stored-then-plain', { store: false })).toEqual({ provider: 'plain', skipped: [{ provider: 'stored', reason: 'unsupported:store' }] });
      expect(await route('stored-then-plain', { store: true, metadata: { a: 'b' } })).toEqual({ provider: 'stored', skipped: [] });
    });
  });
}

describe('members an openai-responses provider carries reach the upstream, translated', () => {
  /** A Responses upstream that keeps every create's body and answers it completed at once. */
  let server: Server;
  let url: string;
  const bodies: Record<string, unknown>[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        bodies.push(JSON.parse(text) as Record<string, unknown>);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
          id: 'resp_1', object: 'response', status: 'completed', model: 'gpt-resp',
          output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }],
          usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
        }));
      });
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    await new Promise((ok) => server?.close(ok));
  });

  it('reasoning_effort, verbosity, service_tier, prompt_cache_key, safety_identifier, metadata and allowed_tools are sent; store stays true with the caller\'s metadata kept', async () => {
    const provider = createProvider('resp', { type: 'openai-responses', baseUrl: url, model: 'gpt-resp', timeoutMs: 5_000, follow: 'poll', pollIntervalMs: 20 });
    try {
      const outcome = await provider.call({
        input: {
          messages: [{ role: 'user', content: 'carry everything' }],
          reasoning_effort: 'low', verbosity: 'high', service_tier: 'flex', prompt_cache_key: 'pk-1', safety_identifier: 'user-7', metadata: { order: '42' },
          tools: [{ type: 'function', function: { name: 'a', parameters: { type: 'object' } } }],
          tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'a' } }] } },
        },
        jobId: 'job_allow', attemptId: 'att_allow', attemptNumber: 1, signal: AbortSignal.timeout(5_000),
      } as never);
      expect(outcome.kind).toBe('success');
      expect(bodies.at(-1)).toMatchObject({
        reasoning: { effort: 'low' }, text: { verbosity: 'high' }, service_tier: 'flex', prompt_cache_key: 'pk-1', safety_identifier: 'user-7',
        metadata: { order: '42', onejob_attempt_id: 'att_allow' }, store: true, background: true,
        tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'a' }] },
      });
    } finally {
      await provider.close();
    }
  });
});
