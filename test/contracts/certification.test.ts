/**
 * Certifications in the database (SQLite and PostgreSQL): `onejob verify`
 * records them; the gate reads them; editing the contract or the model voids them.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { certificationGate } from '../../src/contracts/certification-gate.ts';
import { compileContract } from '../../src/contracts/compile-contract.ts';
import { runVerifyCommand } from '../../src/contracts/verify-command.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { TEST_DATABASES, createTestStore } from '../support/databases.ts';
import { FIXTURES, GOOD, openaiConfig, summaryContract } from './support.ts';

let good: FakeProvider;
let bad: FakeProvider;
beforeAll(async () => {
  good = await startFakeProvider();
  bad = await startFakeProvider();
});
afterAll(async () => {
  await good.close();
  await bad.close();
});
afterEach(() => {
  good.reset();
  bad.reset();
});

function configFor(contract: Record<string, unknown>, models: { primary?: string; fallback?: string } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-verify-'));
  copyFileSync(join(FIXTURES, 'summary-checks.ts'), join(dir, 'summary-checks.ts'));
  return {
    dir,
    config: {
      configPath: join(dir, 'onejob.config.json'),
      providers: {
        primary: openaiConfig(good, { model: models.primary ?? 'gpt-4o-mini' }),
        fallback: openaiConfig(bad, { model: models.fallback ?? 'gpt-4.1-mini' }),
      },
      routes: { summarize: { providers: ['primary', 'fallback'], hedgeAfterMs: null, contract: 'summary' } },
      contracts: { summary: contract },
    } as never,
  };
}

function capture() {
  let text = '';
  return { stdout: { write: (s: string) => (text += s) }, text: () => text };
}

describe.each(TEST_DATABASES)('certifications on $name', (db) => {
  it.skipIf(db.skip !== null)('a passing provider is certified, a failing one is not; the gate follows; an edit voids', async () => {
    const { store, cleanup } = await createTestStore(db);
    try {
      good.setDefault({ reply: GOOD });
      bad.setDefault({ reply: { ...GOOD, confidence: 0.4 } });
      const { config, dir } = configFor(summaryContract());
      const out = capture();
      const code = await runVerifyCommand({ config, store, stdout: out.stdout });
      expect(code).toBe(1);
      expect(out.text()).toMatch(/summarize\s+primary\s+gpt-4o-mini\s+french summary\s+PASS/);
      expect(out.text()).toMatch(/summarize\s+fallback\s+gpt-4\.1-mini\s+french summary\s+FAIL\s+sample 1: top-level key "confidence"/);
      expect(out.text()).toMatch(/^CERTIFIED\s+primary/m);
      expect(out.text()).toMatch(/^NOT CERTIFIED\s+fallback .*: 1 of 1 cases failed$/m);

      const certs = await store.listCertifications();
      expect(certs.map((c) => [c.provider, c.model, c.passed, c.route])).toEqual([
        ['fallback', 'gpt-4.1-mini', false, 'summarize'],
        ['primary', 'gpt-4o-mini', true, 'summarize'],
      ]);
      expect((certs[1]!.report as { cases: unknown[] }).cases).toHaveLength(1);

      const contract = await compileContract('summary', summaryContract(), { baseDir: dir });
      expect(certs[0]!.contractFingerprint).toBe(contract.fingerprint);
      const gate = (fp: string, models = { primary: 'gpt-4o-mini', fallback: 'gpt-4.1-mini' }) =>
        certificationGate({ certifications: certs, chain: ['primary', 'fallback'], contractFingerprint: fp, models });
      expect(gate(contract.fingerprint)('primary', 'failover')).toBeNull();
      expect(gate(contract.fingerprint)('fallback', 'failover')).toBe('certification_failed: verification did not pass');

      // Now the fallback is fixed and verified alone: certified; the latest verdict replaces the old one.
      bad.setDefault({ reply: GOOD });
      const json = capture();
      expect(await runVerifyCommand({ config, store, provider: 'fallback', json: true, stdout: json.stdout })).toBe(0);
      expect(JSON.parse(json.text())).toMatchObject({ passed: true, reports: [{ provider: 'fallback', passed: true }] });
      const after = await store.listCertifications();
      expect(after.filter((c) => c.provider === 'fallback').map((c) => c.passed)).toEqual([true]);
      const fresh = certificationGate({ certifications: after, chain: ['primary', 'fallback'], contractFingerprint: contract.fingerprint, models: { primary: 'gpt-4o-mini', fallback: 'gpt-4.1-mini' } });
      expect(fresh('fallback', 'failover')).toBeNull();
      expect(fresh('fallback', 'manual')).toBeNull();

      // Editing the contract (a new case) or the checks' code gives a new fingerprint: void.
      const edited = await compileContract('summary', summaryContract({ samples: 5 }), { baseDir: dir });
      expect(edited.fingerprint).not.toBe(contract.fingerprint);
      const g2 = certificationGate({ certifications: after, chain: ['primary', 'fallback'], contractFingerprint: edited.fingerprint, models: { primary: 'gpt-4o-mini', fallback: 'gpt-4.1-mini' } });
      expect(g2('fallback', 'failover')).toBe('certification_void: contract changed');
      expect(g2('primary', 'first')).toBeNull(); // the operator's primary always gets the first attempt
      expect(g2('primary', 'manual')).toBe('certification_void: contract changed');

      writeFileSync(join(dir, 'summary-checks.ts'), '\nexport const alwaysOk = () => [];\n');
      const newChecks = await compileContract('summary', summaryContract(), { baseDir: dir });
      expect(newChecks.fingerprint).not.toBe(contract.fingerprint);

      // Changing the model voids too.
      const g3 = certificationGate({ certifications: after, chain: ['primary', 'fallback'], contractFingerprint: contract.fingerprint, models: { primary: 'gpt-4o-mini', fallback: 'gpt-4.1' } });
      expect(g3('fallback', 'failover')).toBe('certification_void: model changed');
      expect(g3('unknown-provider', 'failover')).toBe('not_certified');
    } finally {
      await cleanup();
    }
  });
});

describe('runVerifyCommand input errors', () => {
  it('names the unknown route or provider', async () => {
    const { config } = configFor(summaryContract());
    const out = capture();
    const store = { recordCertification: async () => undefined };
    await expect(runVerifyCommand({ config, store, route: 'nope', stdout: out.stdout })).rejects.toMatchObject({ code: 'route_unknown' });
    await expect(runVerifyCommand({ config, store, provider: 'nope', stdout: out.stdout })).rejects.toMatchObject({ code: 'provider_unknown' });
  });
});

describe('certificationGate', () => {
  it('lets every provider through when the route has no contract', () => {
    const gate = certificationGate({ certifications: [], chain: ['a', 'b'], contractFingerprint: null, models: { a: 'm', b: 'm' } });
    expect(gate('b', 'failover')).toBeNull();
  });
  it('refuses an uncertified provider for failover, hedges and manual attempts, but not the primary first attempt', () => {
    const gate = certificationGate({ certifications: [], chain: ['a', 'b'], contractFingerprint: 'sha256:x', models: { a: 'm', b: 'm' } });
    expect(gate('a', 'first')).toBeNull();
    expect(gate('b', 'first')).toBe('not_certified');
    expect(gate('b', 'failover')).toBe('not_certified');
    expect(gate('b', 'hedge')).toBe('not_certified');
    expect(gate('b', 'manual')).toBe('not_certified');
  });
});
