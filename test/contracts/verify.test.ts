/**
 * verify against providers that misbehave the realistic ways, over real HTTP
 * (the fake provider server speaking the OpenAI and Anthropic protocols).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { compileContract, type CompiledContract } from '../../src/contracts/compile-contract.ts';
import { formatVerifyTable, verifyProvider, type VerifyReport } from '../../src/contracts/verify.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { FIXTURES, GOOD, TEMPLATES, anthropicConfig, openaiConfig, providerOf, summaryContract } from './support.ts';

let fake: FakeProvider;
let contract: CompiledContract;

beforeAll(async () => {
  fake = await startFakeProvider();
  contract = await compileContract('summary', summaryContract(), { baseDir: FIXTURES });
});
afterAll(() => fake.close());
afterEach(() => fake.reset());

async function verify(config: Record<string, unknown>, c: CompiledContract = contract): Promise<VerifyReport> {
  const provider = providerOf('candidate', config);
  try {
    return await verifyProvider({ route: 'summarize', providerName: 'candidate', provider, providerConfig: config, contract: c, baseDir: TEMPLATES });
  } finally {
    await provider.close();
  }
}

function onlyCase(report: VerifyReport) {
  expect(report.cases).toHaveLength(1);
  return report.cases[0]!;
}

describe('verifyProvider', () => {
  it('passes a provider that answers the contract, every sample, at temperature 0', async () => {
    fake.setDefault({ reply: GOOD });
    const report = await verify(openaiConfig(fake));
    expect(report.passed).toBe(true);
    const c = onlyCase(report);
    expect(c).toMatchObject({ passed: true, reason: null });
    expect(c.samples).toHaveLength(3);
    expect(c.prompt).toMatchObject({ method: 'gpt-tokenizer', exact: true, maxTokens: 200, contextWindow: 128000 });
    expect(fake.calls).toHaveLength(3);
    for (const call of fake.calls) expect(call.body).toMatchObject({ temperature: 0, model: 'gpt-4o-mini' });
    expect(formatVerifyTable([report])).toMatch(/candidate\s+gpt-4o-mini\s+french summary\s+PASS\s+3\/3 samples ok/);
  });

  it('passes over the Anthropic protocol; token count is an estimate when count_tokens is not reachable', async () => {
    fake.setDefault({ reply: GOOD });
    const report = await verify(anthropicConfig(fake, { contextWindow: 200000 }));
    expect(report.passed).toBe(true);
    expect(onlyCase(report).prompt).toMatchObject({ method: 'estimate', exact: false });
    expect(onlyCase(report).prompt.detail).toMatch(/count_tokens answered 404/);
  });

  it('fails a provider that invents a top-level key', async () => {
    fake.setDefault({ reply: { ...GOOD, confidence: 0.9 } });
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.passed).toBe(false);
    expect(c.reason).toMatch(/^sample 1: top-level key "confidence" is not allowed by the schema/);
    expect(c.samples[0]!.findings.map((f) => f.code)).toEqual(['extra_top_level_key']);
  });

  it('fails a provider that wraps valid JSON in prose', async () => {
    fake.setDefault({ reply: `Sure! Here is the summary:\n${JSON.stringify(GOOD)}\nHope this helps.` });
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.reason).toMatch(/valid JSON wrapped in prose \(text before and after it/);
    expect(c.samples[0]!.findings[0]!.code).toBe('prose_around_json');
  });

  it('fails a provider that returns the wrong types', async () => {
    fake.setDefault({ reply: { summary: ['Le chat'], lang: 'fr' } });
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.reason).toMatch(/\/summary must be string/);
    expect(c.samples[0]!.findings[0]).toMatchObject({ code: 'schema_mismatch', path: '/summary' });
  });

  it('fails a provider that ignores the system prompt: the business check and the expectation both say so', async () => {
    fake.setDefault({ reply: { summary: 'The cat stayed on the mat.', lang: 'en' } });
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.passed).toBe(false);
    const codes = c.samples[0]!.findings.map((f) => f.code);
    expect(codes).toContain('business_check_failed');
    expect(c.reason).toMatch(/answersInRequestedLanguage: lang is "en", but the system prompt asks for French/);

    const noChecks = await compileContract('summary', summaryContract({ checks: undefined }), { baseDir: FIXTURES });
    const c2 = onlyCase(await verify(openaiConfig(fake), noChecks));
    expect(c2.reason).toMatch(/expected \/lang to be "fr", got "en"/);
    expect(c2.samples[0]!.findings[0]!.code).toBe('expectation_failed');
  });

  it('fails a provider whose output varies between samples at temperature 0', async () => {
    fake.script([{ reply: GOOD }, { reply: GOOD }, { reply: { ...GOOD, summary: 'Un chat sur un tapis.' } }]);
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.samples.every((s) => s.ok)).toBe(true);
    expect(c.passed).toBe(false);
    expect(c.findings[0]!.code).toBe('unstable_output');
    expect(c.reason).toMatch(/outputs differ between samples at temperature 0: sample 1 and sample 3/);
  });

  it('fails a provider whose context window is too small for the prompt, without calling it', async () => {
    fake.setDefault({ reply: GOOD });
    const c = onlyCase(await verify(openaiConfig(fake, { contextWindow: 150 })));
    expect(c.passed).toBe(false);
    expect(c.reason).toMatch(/^prompt: prompt \d+ tokens \+ max_tokens 200 = \d+ exceeds the context window of 150/);
    expect(c.samples).toHaveLength(0);
    expect(fake.calls).toHaveLength(0);
  });

  it('fails an open model whose chat template refuses the system role (Gemma-style fixture)', async () => {
    fake.setDefault({ reply: GOOD });
    const c = onlyCase(await verify(openaiConfig(fake, { model: 'gemma-local', tokenizerConfigPath: 'gemma-no-system/tokenizer_config.json' })));
    expect(c.reason).toBe('prompt: chat template raised: System role not supported');
    expect(fake.calls).toHaveLength(0);
  });

  it('passes an open model through a ChatML template, and through a template that folds the system prompt into the first turn', async () => {
    fake.setDefault({ reply: GOOD });
    for (const dir of ['chatml', 'llama2-folded-system']) {
      const report = await verify(openaiConfig(fake, { model: 'local-model', tokenizerConfigPath: `${dir}/tokenizer_config.json`, contextWindow: 4096 }));
      expect(report.passed, dir).toBe(true);
      expect(onlyCase(report).prompt).toMatchObject({ method: 'chat-template', exact: false });
    }
  });

  it('reports a provider error as a failed sample, with the provider error code', async () => {
    fake.setDefault({ status: 401 });
    const c = onlyCase(await verify(openaiConfig(fake)));
    expect(c.passed).toBe(false);
    expect(c.samples[0]!.findings[0]!.code).toBe('provider_failed');
    expect(c.reason).toMatch(/provider call failed: provider_rejected/);
  });
});
