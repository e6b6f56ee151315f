/**
 * {@link verifyProvider}: runs a contract's cases against one provider over
 * its real wire protocol (CONTRACT §5) and reports, case by case, whether the
 * provider may be certified; {@link formatVerifyTable} renders reports for a
 * person.
 *
 * For each case: render the prompt for the provider ({@link renderPrompt}); a
 * prompt that fails (template error, system dropped, role order, context
 * overflow) fails the case without calling the provider. Otherwise the case
 * is sent `samples` times at the contract's temperature, and each output must
 * pass {@link checkOutput} (JSON, schema, extra keys, business checks) and the
 * case's `expect`; finally the samples must agree (`stability`).
 */
import { randomUUID } from 'node:crypto';
import { canonicalJson } from '../core/fingerprint.ts';
import { systemClock, type Clock } from '../core/clock.ts';
import { asChatRequest } from '../providers/chat-request.ts';
import type { ChatRequest, Provider } from '../providers/provider.ts';
import { checkOutput } from './check-output.ts';
import type { CompiledContract } from './compile-contract.ts';
import type { CaseExpectation, ContractCase } from './contract-config.ts';
import { FindingCode, summarizeFindings, type Finding } from './finding.ts';
import { promptTargetFromConfig, renderPrompt, type PromptRender } from './prompt-render.ts';

/** One call of one case. */
export interface SampleReport {
  /** 1, 2, … */
  readonly sample: number;
  readonly ok: boolean;
  /** The provider's raw text, or null when the call failed. */
  readonly text: string | null;
  /** The checked value (parsed JSON or the text) when the output passed the contract checks. */
  readonly value?: unknown;
  readonly finishReason: string | null;
  readonly latencyMs: number;
  readonly findings: readonly Finding[];
}

/** One case on one provider. */
export interface CaseReport {
  /** 0-based index in the contract's `cases`. */
  readonly index: number;
  readonly name: string;
  readonly passed: boolean;
  /** Why it failed, in one line (null when it passed). */
  readonly reason: string | null;
  readonly prompt: PromptRender;
  readonly samples: readonly SampleReport[];
  /** Case-level findings: the prompt's and stability's (samples carry their own). */
  readonly findings: readonly Finding[];
}

/** The verification of one provider against one contract. */
export interface VerifyReport {
  /** The route it was run for, or null. */
  readonly route: string | null;
  readonly provider: string;
  readonly providerType: string;
  /** The configured model: with `provider` and `contractFingerprint`, the certification's key. */
  readonly model: string;
  readonly contract: string;
  readonly contractFingerprint: string;
  readonly samples: number;
  readonly temperature: number;
  /** Every case passed. */
  readonly passed: boolean;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly cases: readonly CaseReport[];
}

/** Parameters of {@link verifyProvider}. */
export interface VerifyProviderParams {
  /** The route being verified (recorded on the report), or null. */
  readonly route?: string | null;
  readonly providerName: string;
  /** The provider to call (its `call` never throws). */
  readonly provider: Provider;
  /** The provider's config entry: `type`, `model`, `contextWindow`, `chatTemplate`, `tokenizerConfigPath`, … */
  readonly providerConfig: Readonly<Record<string, unknown>>;
  readonly contract: CompiledContract;
  /** Calls per case; default the contract's `samples`. */
  readonly samples?: number;
  /** Resolves a relative `tokenizerConfigPath`; default `process.cwd()`. */
  readonly baseDir?: string;
  readonly clock?: Clock;
}

/**
 * Verifies one provider against one contract. Never throws for a provider's
 * misbehaviour: that is a failed case in the report.
 *
 * @example
 * const report = await verifyProvider({ route: 'summarize', providerName: 'fallback', provider, providerConfig: config.providers.fallback, contract });
 * if (report.passed) await store.recordCertification(certificationOf(report));
 */
export async function verifyProvider(params: VerifyProviderParams): Promise<VerifyReport> {
  const clock = params.clock ?? systemClock;
  const { contract, provider } = params;
  const samples = params.samples ?? contract.config.samples;
  const startedAt = clock.now().toISOString();
  const target = promptTargetFromConfig({ ...params.providerConfig, model: provider.model, type: provider.type });
  const cases: CaseReport[] = [];
  for (const [index, c] of contract.config.cases.entries()) {
    cases.push(await verifyCase(params, c, index, samples, target));
  }
  return {
    route: params.route ?? null,
    provider: params.providerName,
    providerType: provider.type,
    model: provider.model,
    contract: contract.name,
    contractFingerprint: contract.fingerprint,
    samples,
    temperature: contract.config.temperature,
    passed: cases.every((c) => c.passed),
    startedAt,
    finishedAt: clock.now().toISOString(),
    cases,
  };
}

async function verifyCase(
  params: VerifyProviderParams, c: ContractCase, index: number, samples: number, target: ReturnType<typeof promptTargetFromConfig>,
): Promise<CaseReport> {
  const name = c.name ?? `case ${index + 1}`;
  const caseInput = { ...c.input, temperature: params.contract.config.temperature };
  const input = asChatRequest(caseInput);
  const prompt = await renderPrompt(target, input, { baseDir: params.baseDir ?? process.cwd() });
  if (!prompt.ok) {
    return { index, name, passed: false, reason: `prompt: ${summarizeFindings(prompt.findings)}`, prompt, samples: [], findings: prompt.findings };
  }
  const reports: SampleReport[] = [];
  for (let n = 1; n <= samples; n++) reports.push(await runSample(params, input, c.expect, n));
  const findings = params.contract.config.stability === 'off' ? [] : stabilityFindings(reports, params.contract.config.stability, params.contract.config.temperature);
  const firstBad = reports.find((s) => !s.ok);
  const reason = firstBad
    ? `sample ${firstBad.sample}: ${summarizeFindings(firstBad.findings)}${countBad(reports)}`
    : findings.length > 0
      ? summarizeFindings(findings)
      : null;
  return { index, name, passed: reason === null, reason, prompt, samples: reports, findings };
}

function countBad(reports: readonly SampleReport[]): string {
  const bad = reports.filter((s) => !s.ok).length;
  return bad > 1 ? ` [${bad}/${reports.length} samples failed]` : '';
}

async function runSample(params: VerifyProviderParams, input: ChatRequest, expect: CaseExpectation | undefined, sample: number): Promise<SampleReport> {
  const started = performance.now();
  const id = randomUUID();
  const outcome = await params.provider.call({
    input,
    jobId: `verify_${id}`,
    attemptId: `verify_${id}`,
    attemptNumber: sample,
    signal: AbortSignal.timeout(params.provider.timeoutMs),
  });
  const latencyMs = Math.round(performance.now() - started);
  if (outcome.kind !== 'success') {
    const finding: Finding = { code: FindingCode.ProviderFailed, message: `provider call ${outcome.kind === 'failure' ? 'failed' : 'was ambiguous'}: ${outcome.error.code}: ${outcome.error.message}` };
    return { sample, ok: false, text: null, finishReason: null, latencyMs, findings: [finding] };
  }
  const { completion } = outcome;
  const verdict = checkOutput(params.contract, input, completion);
  if (!verdict.ok) return { sample, ok: false, text: completion.content, finishReason: completion.finish_reason, latencyMs, findings: verdict.findings };
  const findings = expect === undefined ? [] : expectationFindings(expect, verdict.value, completion.content);
  return { sample, ok: findings.length === 0, text: completion.content, value: verdict.value, finishReason: completion.finish_reason, latencyMs, findings };
}

/** The findings of a case's `expect` against one output. */
export function expectationFindings(expect: CaseExpectation, value: unknown, text: string): Finding[] {
  const out: Finding[] = [];
  if (expect.equals !== undefined && !sameJson(value, expect.equals)) {
    out.push({ code: FindingCode.ExpectationFailed, message: `expected the output to equal ${clip(canonicalJson(expect.equals))}, got ${clip(safeJson(value))}` });
  }
  if (expect.subset !== undefined) {
    const miss = firstSubsetMismatch(expect.subset, value, '');
    if (miss !== null) out.push({ code: FindingCode.ExpectationFailed, message: `expected ${miss.path || 'the output'} to be ${clip(safeJson(miss.expected))}, got ${clip(safeJson(miss.actual))}`, path: miss.path || '/' });
  }
  if (expect.contains !== undefined && !text.includes(expect.contains)) {
    out.push({ code: FindingCode.ExpectationFailed, message: `expected the text to contain ${JSON.stringify(expect.contains)}` });
  }
  return out;
}

function firstSubsetMismatch(expected: unknown, actual: unknown, path: string): { path: string; expected: unknown; actual: unknown } | null {
  if (isRecord(expected)) {
    if (!isRecord(actual)) return { path, expected, actual };
    for (const [k, v] of Object.entries(expected)) {
      const miss = firstSubsetMismatch(v, actual[k], `${path}/${k}`);
      if (miss) return miss;
    }
    return null;
  }
  return sameJson(expected, actual) ? null : { path, expected, actual };
}

/** Stability across samples: `exact` compares canonical JSON, `shape` compares keys and types. */
function stabilityFindings(reports: readonly SampleReport[], mode: 'exact' | 'shape', temperature: number): Finding[] {
  const good = reports.filter((s) => s.ok);
  if (good.length < 2) return [];
  const key = (s: SampleReport) => (mode === 'exact' ? safeJson(s.value) : canonicalJson(shapeOf(s.value)));
  const first = key(good[0]!);
  const differing = good.filter((s) => key(s) !== first);
  if (differing.length === 0) return [];
  const d = differing[0]!;
  const what = mode === 'exact' ? `${clip(safeJson(good[0]!.value))} vs ${clip(safeJson(d.value))}` : 'their keys or types differ';
  return [{
    code: FindingCode.UnstableOutput,
    message: `outputs differ between samples at temperature ${temperature}: sample ${good[0]!.sample} and sample ${d.sample} (${what})`,
  }];
}

function shapeOf(v: unknown): unknown {
  if (Array.isArray(v)) return ['array', ...new Set(v.map((x) => canonicalJson(shapeOf(x))))].sort();
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shapeOf(x)]));
  return v === null ? 'null' : typeof v;
}

/**
 * The reports as a table a person reads at a glance: one row per provider ×
 * case with PASS/FAIL and why, then one verdict line per provider.
 *
 * @example process.stdout.write(formatVerifyTable(reports));
 */
export function formatVerifyTable(reports: readonly VerifyReport[]): string {
  const header = ['ROUTE', 'PROVIDER', 'MODEL', 'CASE', 'RESULT', 'WHY'];
  const rows: string[][] = [];
  for (const r of reports) {
    for (const c of r.cases) {
      const tokens = c.prompt.promptTokens === null ? '' : `, prompt ${c.prompt.exact ? '' : '~'}${c.prompt.promptTokens} tok`;
      const why = c.passed ? `${c.samples.length}/${c.samples.length} samples ok${tokens}` : (c.reason ?? 'failed');
      rows.push([r.route ?? '-', r.provider, r.model, c.name, c.passed ? 'PASS' : 'FAIL', why]);
    }
  }
  const widths = header.slice(0, -1).map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((cell, i) => (i < widths.length ? cell.padEnd(widths[i]!) : cell)).join('  ').trimEnd();
  const out = [line(header), ...rows.map(line), ''];
  for (const r of reports) {
    const failed = r.cases.filter((c) => !c.passed).length;
    const verdict = r.passed
      ? `CERTIFIED      ${r.provider} (${r.model}) for contract ${r.contract} ${shortFp(r.contractFingerprint)}`
      : `NOT CERTIFIED  ${r.provider} (${r.model}) for contract ${r.contract} ${shortFp(r.contractFingerprint)}: ${failed} of ${r.cases.length} cases failed`;
    out.push(verdict);
  }
  return out.join('\n') + '\n';
}

function shortFp(fp: string): string {
  return fp.slice(0, 19);
}

function sameJson(a: unknown, b: unknown): boolean {
  return safeJson(a) === safeJson(b);
}

function safeJson(v: unknown): string {
  try {
    return canonicalJson(v);
  } catch {
    return String(v);
  }
}

function clip(s: string, n = 60): string {
  return s.length <= n ? s : s.slice(0, n - 1) + '…';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
