/**
 * CONTRACT §5: "A certification, or a failed verification, takes effect on
 * the next routing decision of every running process." The runtime of one
 * process routes; a second store instance on the same database (and, in the
 * last case, a separate `onejob verify` process) certifies or revokes; the
 * very next decision of the first process follows, with no refresh, timer
 * or sleep in between.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import type { JobWithAttempts } from '../../src/core/types.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const OWNER = 'alice';
const EXE = 'exe_fresh';
const CASE_INPUT = { messages: [{ role: 'system', content: 'Answer with JSON {"summary": string}.' }, { role: 'user', content: 'Summarize: retries made safe.' }] };
const SCHEMA = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } }, additionalProperties: false };
const CONTRACT = { outputSchema: SCHEMA, samples: 1, cases: [{ name: 'one', input: CASE_INPUT }] };
const CHAIN = ['primary', 'fallback'];

function config(urls: { primary: string; fallback: string }): OnejobConfig {
  return defineConfig({
    apiKeys: {},
    providers: {
      primary: { type: 'openai', baseUrl: `${urls.primary}/v1`, model: 'p-1', timeoutMs: 2000 },
      fallback: { type: 'openai', baseUrl: `${urls.fallback}/v1`, model: 'f-1', timeoutMs: 2000 },
    },
    routes: { summarize: { providers: CHAIN, contract: 'summary' } },
    contracts: { summary: CONTRACT },
  });
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`certification freshness on ${db.name}`, () => {
    let store: JobStore;
    let other: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let runtime: Runtime;
    let cfg: OnejobConfig;
    let n = 0;

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      other = await openStore(url);
      cfg = config({ primary: 'http://127.0.0.1:9', fallback: 'http://127.0.0.1:9' });
      runtime = await createRuntime({ config: cfg, store });
    });
    afterEach(async () => {
      await runtime.close(0);
      await other.close();
      await cleanup();
    });

    const fingerprint = () => runtime.contracts.get('summarize')!.fingerprint;
    const record = (passed: boolean) =>
      other.recordCertification({ provider: 'fallback', model: 'f-1', contractFingerprint: fingerprint(), route: 'summarize', passed, report: {}, verifiedAt: new Date() });

    /** One job whose primary fails definitely: the settle is the routing decision (failover or not), made by `runtime`. */
    async function failPrimary(): Promise<JobWithAttempts> {
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: `k${++n}`, route: 'summarize', input: CASE_INPUT, providers: CHAIN });
      const [claimed] = await store.claimWork({ leaseOwner: EXE, leaseMs: 60_000, limit: 1, eligible: runtime.eligible });
      expect(claimed).toMatchObject({ job: { id: job.id }, attempt: { provider: 'primary' } });
      const a = claimed!.attempt;
      const settled = await store.settleAttempt({
        ownerId: OWNER, attemptId: a.id, fence: { leaseOwner: EXE, leaseToken: a.leaseToken! },
        outcome: { state: 'failed', error: { code: 'http_503', message: 'overloaded' } }, eligible: runtime.eligible('summarize'),
      });
      return settled.job;
    }

    it('a certification recorded by another store instance is used by the very next failover; a failed re-verification stops the next one', async () => {
      const before = await failPrimary();
      expect(before.state).toBe('failed');
      expect(before.skipped).toEqual([{ provider: 'fallback', reason: 'not_certified' }]);

      await record(true);
      const certified = await failPrimary();
      expect(certified.state).toBe('running');
      expect(certified.attempts.map((a) => [a.provider, a.kind])).toEqual([['primary', 'first'], ['fallback', 'failover']]);
      await store.cancelJob(OWNER, certified.id); // its unclaimed failover must not be the next claim

      await record(false);
      const revoked = await failPrimary();
      expect(revoked.state).toBe('failed');
      expect(revoked.attempts.map((a) => a.provider)).toEqual(['primary']);
      expect(revoked.skipped).toEqual([{ provider: 'fallback', reason: 'certification_failed: verification did not pass' }]);
    });

    it('manual attempts follow at once too: certified → 201, revoked → provider_not_certified', async () => {
      const open = async (key: string) => (await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'summarize', input: CASE_INPUT, providers: CHAIN })).job.id;
      const start = (jobId: string) => store.startAttempt({ ownerId: OWNER, jobId, kind: 'manual', provider: 'fallback', hedgeAfterMs: null, eligible: runtime.eligible('summarize') });
      const first = await open('manual-1');
      await expect(start(first)).rejects.toMatchObject({ code: 'provider_not_certified' });
      await record(true);
      expect((await start(first)).provider).toBe('fallback');
      await record(false);
      await expect(start(await open('manual-2'))).rejects.toMatchObject({ code: 'provider_not_certified', details: { reason: 'certification_failed: verification did not pass' } });
    });
  });
}

describe('certification freshness across processes', () => {
  let dir: string;
  let primary: FakeProvider;
  let fallback: FakeProvider;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-fresh-'));
    [primary, fallback] = await Promise.all([startFakeProvider(), startFakeProvider()]);
    fallback.setDefault({ reply: { summary: 'short' } });
  });
  afterEach(async () => {
    await Promise.all([primary.close(), fallback.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('`onejob verify` in a separate process: the running runtime fails over to the provider on its very next decision', async () => {
    const cfg = config({ primary: primary.url, fallback: fallback.url });
    const file = join(dir, 'onejob.config.json');
    const dbUrl = `sqlite:${join(dir, 'onejob.db')}`;
    writeFileSync(file, JSON.stringify({ database: dbUrl, providers: cfg.providers, routes: { summarize: { providers: CHAIN, contract: 'summary' } }, contracts: { summary: CONTRACT } }));
    const store = await openStore(dbUrl);
    await store.migrate();
    const runtime = await createRuntime({ config: { ...cfg, databaseUrl: dbUrl }, store });
    try {
      expect(runtime.eligible('summarize')('fallback', 'failover')).toBe('not_certified');
      const bin = resolve(import.meta.dirname, '../../bin/onejob');
      const run = await new Promise<{ code: number; out: string }>((done) =>
        execFile(bin, ['verify', '--config', file, '--route', 'summarize', '--provider', 'fallback'], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' }, timeout: 60_000 }, (e, out, err) =>
          done({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, out: out + err })),
      );
      expect(run.code, run.out).toBe(0);

      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'p1', route: 'summarize', input: CASE_INPUT, providers: CHAIN });
      const [claimed] = await store.claimWork({ leaseOwner: EXE, leaseMs: 60_000, limit: 1, eligible: runtime.eligible });
      const settled = await store.settleAttempt({
        ownerId: OWNER, attemptId: claimed!.attempt.id, fence: { leaseOwner: EXE, leaseToken: claimed!.attempt.leaseToken! },
        outcome: { state: 'failed', error: { code: 'http_503', message: 'overloaded' } }, eligible: runtime.eligible('summarize'),
      });
      expect(settled.job.id).toBe(job.id);
      expect(settled.failover?.provider).toBe('fallback');
    } finally {
      await runtime.close(0);
      await store.close();
    }
  });
});
