/**
 * End to end: `verify` records certifications, and the executor's failover
 * (through the runtime's gate) sends zero automatic requests to a provider
 * that failed verification; a changed contract voids a certification.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import { runVerifyCommand } from '../../src/contracts/verify-command.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const CASE_INPUT = { messages: [{ role: 'system', content: 'Answer with JSON {"summary": string}.' }, { role: 'user', content: 'Summarize: retries made safe.' }] };
const SCHEMA = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } }, additionalProperties: false };

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`certification gate on ${db.name}`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let primary: FakeProvider;
    let chatty: FakeProvider;
    let good: FakeProvider;
    let runtime: Runtime | undefined;

    beforeEach(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [primary, chatty, good] = await Promise.all([startFakeProvider(), startFakeProvider(), startFakeProvider()]);
      chatty.setDefault({ reply: 'Sure! {"summary": "short"}' });
      good.setDefault({ reply: { summary: 'short' } });
      primary.setDefault({ reply: { summary: 'from primary' } });
    });
    afterEach(async () => {
      await runtime?.close(100);
      runtime = undefined;
      await Promise.all([primary.close(), chatty.close(), good.close()]);
      await cleanup();
    });

    function config(contractDescription = 'v1'): OnejobConfig {
      return defineConfig({
        apiKeys: {},
        providers: {
          primary: { type: 'openai', baseUrl: `${primary.url}/v1`, model: 'p-1', timeoutMs: 2000 },
          chatty: { type: 'openai', baseUrl: `${chatty.url}/v1`, model: 'c-1', timeoutMs: 2000 },
          good: { type: 'anthropic', baseUrl: good.url, model: 'g-1', timeoutMs: 2000 },
        },
        routes: { summarize: { providers: ['primary', 'chatty', 'good'], contract: 'summary' } },
        contracts: { summary: { outputSchema: SCHEMA, samples: 2, cases: [{ name: contractDescription, input: CASE_INPUT }] } },
      });
    }

    /** The job once it reaches `state` (re-read every 25 ms, at most 5 s). */
    async function settledAs(jobId: string, state: string) {
      let job = await store.getJob(OWNER, jobId);
      for (let i = 0; i < 200 && job?.state !== state; i++) {
        await new Promise((r) => setTimeout(r, 25));
        job = await store.getJob(OWNER, jobId);
      }
      return job;
    }

    async function verify(cfg: OnejobConfig): Promise<number> {
      let out = '';
      const code = await runVerifyCommand({ config: cfg, store, stdout: { write: (t: string) => (out += t) } });
      expect(out).toContain('summarize');
      return code;
    }

    it('failover skips a provider that failed verification (zero calls) and records why on the job', async () => {
      const cfg = config();
      expect(await verify(cfg)).toBe(1); // chatty fails: prose around the JSON
      const callsAfterVerify = chatty.calls.length;
      expect(callsAfterVerify).toBeGreaterThan(0);

      primary.setDefault({ status: 503 });
      runtime = await createRuntime({ config: cfg, store });
      await runtime.createExecutor({ pollMs: 100 }).start();
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'k', route: 'summarize', input: CASE_INPUT, providers: cfg.routes.summarize!.providers });
      const done = await settledAs(job.id, 'succeeded');
      expect(done).toMatchObject({ state: 'succeeded', result: { content: { summary: 'short' }, provider: 'good' } });
      expect(done!.attempts.map((a) => [a.provider, a.state])).toEqual([
        ['primary', 'failed'],
        ['good', 'succeeded'],
      ]);
      expect(done!.skipped).toEqual([{ provider: 'chatty', reason: 'certification_failed: verification did not pass' }]);
      expect(chatty.calls.length).toBe(callsAfterVerify);
    });

    it('editing the contract voids the certifications: failover then has nowhere to go', async () => {
      expect(await verify(config('v1'))).toBe(1);
      const edited = config('v2');
      primary.setDefault({ status: 503 });
      runtime = await createRuntime({ config: edited, store });
      expect(runtime.eligible('summarize')('good', 'failover')).toBe('certification_void: contract changed');
      await runtime.createExecutor({ pollMs: 100 }).start();
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'k2', route: 'summarize', input: CASE_INPUT, providers: edited.routes.summarize!.providers });
      const done = await settledAs(job.id, 'failed');
      expect(done?.state).toBe('failed');
      expect(done?.error?.code).toBe('providers_exhausted');
      expect(done!.skipped.map((s) => s.provider).sort()).toEqual(['chatty', 'good']);
      expect(good.calls.filter((c) => c.jobId === job.id)).toHaveLength(0);
    });

    it('a run-time output that breaks the contract is a contract_violation, never a success', async () => {
      expect(await verify(config())).toBe(1);
      primary.setDefault({ reply: '{"summary": "x", "confidence": 0.9}' });
      const cfg = config();
      runtime = await createRuntime({ config: cfg, store });
      await runtime.createExecutor({ pollMs: 100 }).start();
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'k3', route: 'summarize', input: CASE_INPUT, providers: cfg.routes.summarize!.providers });
      const done = await settledAs(job.id, 'succeeded');
      expect(done!.attempts[0]).toMatchObject({ provider: 'primary', state: 'failed', error: { code: 'contract_violation' } });
      expect(done).toMatchObject({ state: 'succeeded', result: { provider: 'good', content: { summary: 'short' } } });
    });
  });
}
