/**
 * `unsupported:<member>` in every routing decision (CONTRACT §7), on SQLite
 * and PostgreSQL, through the runtime's gates and the real store (no
 * executor, so the decisions are the test's): the first attempt, the
 * failover, a hedge and a manual start naming the provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { OnejobError } from '../../src/core/errors.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const config = defineConfig({
  apiKeys: { tok_unsupported_0123456789: 'alice' },
  providers: {
    gpt: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm1' },
    claude: { type: 'anthropic', baseUrl: 'http://127.0.0.1:9', model: 'm2' },
  },
  routes: {
    'claude-then-gpt': { providers: ['claude', 'gpt'] },
    'gpt-then-claude': { providers: ['gpt', 'claude'], hedgeAfterMs: 0 },
  },
});
const messages = [{ role: 'user', content: 'x' }];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`unsupported:<member> skips (${db.name})`, () => {
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
    const create = async (route: string, input: unknown) =>
      (await store.createJob({ ownerId: 'alice', idempotencyKey: `k-${db.name}-${++seq}`, route, input, providers: config.routes[route]!.providers })).job;
    const claim = async (jobId: string) => {
      const claimed = await store.claimWork({ leaseOwner: 'test', leaseMs: 60_000, limit: 100, eligible: runtime.eligible });
      return claimed.find((c) => c.job.id === jobId);
    };

    it('the first attempt skips the provider that cannot express a member, recorded in skipped', async () => {
      const job = await create('claude-then-gpt', { messages, logprobs: true });
      const c = await claim(job.id);
      expect(c?.attempt.provider).toBe('gpt');
      expect((await store.getJob('alice', job.id))!.skipped).toEqual([{ provider: 'claude', reason: 'unsupported:logprobs' }]);
    });

    it('a manual start naming that provider is refused: 409 provider_not_certified with the reason; nothing is created', async () => {
      const job = await create('claude-then-gpt', { messages, n: 3 });
      const e = await store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'manual', provider: 'claude', hedgeAfterMs: null, eligible: runtime.eligible(job.route) }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(OnejobError);
      expect((e as OnejobError).code).toBe('provider_not_certified');
      expect((e as OnejobError).spec.status).toBe(409);
      expect((e as OnejobError).details).toMatchObject({ provider: 'claude', reason: 'unsupported:n' });
      expect((await store.getJob('alice', job.id))!.attempts).toHaveLength(0);
      // A provider that can express it may be started by hand.
      const a = await store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'manual', provider: 'gpt', hedgeAfterMs: null, eligible: runtime.eligible(job.route) });
      expect(a.provider).toBe('gpt');
    });

    it('failover and hedge skip it too: the job fails once no provider can express the request', async () => {
      const hedged = await create('gpt-then-claude', { messages, seed: 1 });
      const first = await claim(hedged.id);
      expect(first?.attempt.provider).toBe('gpt');
      expect(await store.markRunning({ ownerId: 'alice', attemptId: first!.attempt.id, leaseOwner: 'test', leaseToken: first!.attempt.leaseToken!, timeoutMs: 60_000 })).toBe(true);
      // The hedge (allowed at once, hedgeAfterMs 0) has nowhere to go: claude cannot express `seed`.
      const hedge = await store.startAttempt({ ownerId: 'alice', jobId: hedged.id, kind: 'hedge', hedgeAfterMs: 0, eligible: runtime.eligible(hedged.route) }).catch((err: unknown) => err);
      expect(hedge).toBeInstanceOf(OnejobError);
      expect((hedge as OnejobError).code).toBe('chain_exhausted');
      expect((hedge as OnejobError).details).toMatchObject({ skipped: [{ provider: 'claude', reason: 'unsupported:seed' }] });

      const settled = await store.settleAttempt({
        ownerId: 'alice',
        attemptId: first!.attempt.id,
        outcome: { state: 'failed', error: { code: 'provider_error', message: 'boom' } },
        eligible: runtime.eligible(hedged.route),
      });
      expect(settled.failover).toBeNull();
      expect(settled.job.state).toBe('failed');
      expect(settled.job.skipped).toEqual([{ provider: 'claude', reason: 'unsupported:seed' }]);
      expect(settled.job.error?.code).toBe('providers_exhausted');
    });
  });
}
