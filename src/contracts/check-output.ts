/**
 * {@link checkOutput}: the runtime contract check of one successful attempt,
 * run by the executor before the completion compare-and-swap (CONTRACT §5).
 *
 * Steps, each adding findings: parse the text as JSON (when the contract has
 * an `outputSchema`; prose or a markdown fence around the JSON is a finding,
 * never silently stripped), match the schema, reject extra top-level keys
 * (when the schema says `additionalProperties: false`, or the contract says
 * `extraTopLevelKeys: "forbid"`), then, on a well-formed output only, run
 * the business checks. Pure and
 * synchronous: no I/O.
 */
import type { ErrorObject } from 'ajv';
import type { NormalizedCompletion } from '../providers/provider.ts';
import type { CompiledContract } from './compile-contract.ts';
import { FindingCode, type Finding } from './finding.ts';

/** The verdict of {@link checkOutput}. */
export type CheckOutputResult =
  /** `value` is the parsed JSON (contract with an outputSchema) or the text: the job's `result.content`. */
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly findings: Finding[] };

/**
 * Checks one completion against its route's contract.
 *
 * @param input the job's input (handed to business checks).
 * @example
 * const verdict = checkOutput(contract, job.input, outcome.completion);
 * if (!verdict.ok) settle failed with contractViolationError(contract.name, verdict.findings);
 * else settle succeeded with { ...outcome.completion, content: verdict.value };
 */
export function checkOutput(contract: CompiledContract, input: unknown, completion: Pick<NormalizedCompletion, 'content' | 'finish_reason'>): CheckOutputResult {
  const text = completion.content;
  let value: unknown = text;
  if (contract.validate !== null) {
    const parsed = parseJsonOutput(text);
    if (!parsed.ok) {
      const truncated = completion.finish_reason === 'length' ? ' (the provider stopped at max_tokens: finish_reason "length")' : '';
      return { ok: false, findings: [{ ...parsed.finding, message: parsed.finding.message + truncated }] };
    }
    value = parsed.value;
  }
  // Business checks read the output as the schema describes it: they run only on a well-formed one.
  const shape = checkShape(contract, value);
  const findings = shape.length > 0 ? shape : runBusinessChecks(contract, input, value, text);
  return findings.length === 0 ? { ok: true, value } : { ok: false, findings };
}

/** The text parsed as JSON, or a finding saying how it is not JSON. */
export function parseJsonOutput(text: string): { ok: true; value: unknown } | { ok: false; finding: Finding } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    const trimmed = text.trim();
    if (/^```/.test(trimmed)) {
      return { ok: false, finding: { code: FindingCode.ProseAroundJson, message: 'the JSON is wrapped in a markdown code fence' } };
    }
    const embedded = findEmbeddedJson(text);
    if (embedded !== null) {
      const before = text.slice(0, embedded.start).trim();
      const after = text.slice(embedded.end).trim();
      const where = before && after ? 'before and after' : before ? 'before' : 'after';
      const sample = clip(before || after, 40);
      return { ok: false, finding: { code: FindingCode.ProseAroundJson, message: `valid JSON wrapped in prose (text ${where} it: ${JSON.stringify(sample)})` } };
    }
    const why = (e as Error).message.replace(/^JSON\.parse: /, '');
    return { ok: false, finding: { code: FindingCode.OutputNotJson, message: `output is not JSON (${why}): ${JSON.stringify(clip(trimmed, 60))}` } };
  }
}

/** Schema and extra-key findings for a parsed value. */
export function checkShape(contract: CompiledContract, value: unknown): Finding[] {
  const findings: Finding[] = [];
  const keys = contract.topLevelKeys;
  const extra: string[] = [];
  if (keys !== null && isRecord(value)) {
    for (const k of Object.keys(value)) {
      if (!keys.names.has(k) && !keys.patterns.some((p) => p.test(k))) extra.push(k);
    }
    for (const k of extra) {
      findings.push({ code: FindingCode.ExtraTopLevelKey, message: `top-level key ${JSON.stringify(k)} is not allowed by the schema`, path: `/${escapePointer(k)}` });
    }
  }
  if (contract.validate !== null && !contract.validate(value)) {
    for (const e of contract.validate.errors ?? []) {
      // Root extra keys are already reported above, by name.
      if (e.keyword === 'additionalProperties' && e.instancePath === '' && extra.length > 0) continue;
      findings.push(schemaFinding(e));
    }
  }
  return findings;
}

/** Runs every business check; a throw or a returned problem becomes a finding. */
export function runBusinessChecks(contract: CompiledContract, input: unknown, value: unknown, text: string): Finding[] {
  const findings: Finding[] = [];
  for (const { name, fn } of contract.checks) {
    let result: unknown;
    try {
      result = fn(input, value, { contract: contract.name, text });
    } catch (e) {
      findings.push({ code: FindingCode.BusinessCheckFailed, check: name, message: `business check ${name} threw: ${(e as Error)?.message ?? String(e)}` });
      continue;
    }
    if (result instanceof Promise || (isRecord(result) && typeof result.then === 'function')) {
      findings.push({ code: FindingCode.BusinessCheckFailed, check: name, message: `business check ${name} returned a promise; checks must be synchronous` });
      continue;
    }
    findings.push(...normalizeCheckResult(name, result));
  }
  return findings;
}

function normalizeCheckResult(check: string, result: unknown): Finding[] {
  if (result === undefined || result === null || result === true) return [];
  if (result === false) return [{ code: FindingCode.BusinessCheckFailed, check, message: `business check ${check} failed` }];
  const items = Array.isArray(result) ? (result as unknown[]) : [result];
  return items.map((item): Finding => {
    if (typeof item === 'string') return { code: FindingCode.BusinessCheckFailed, check, message: `${check}: ${item}` };
    if (isRecord(item) && typeof item.message === 'string') {
      return {
        code: typeof item.code === 'string' ? item.code : FindingCode.BusinessCheckFailed,
        message: `${check}: ${item.message}`,
        check,
        ...(typeof item.path === 'string' ? { path: item.path } : {}),
      };
    }
    return { code: FindingCode.BusinessCheckFailed, check, message: `${check}: returned ${clip(JSON.stringify(item) ?? String(item), 60)}` };
  });
}

function schemaFinding(e: ErrorObject): Finding {
  const at = e.instancePath === '' ? 'the output' : e.instancePath;
  let message = `${at} ${e.message ?? 'is invalid'}`;
  if (e.keyword === 'type') message = `${at} must be ${(e.params as { type: string }).type}`;
  if (e.keyword === 'required') message = `${at} is missing required key ${JSON.stringify((e.params as { missingProperty: string }).missingProperty)}`;
  if (e.keyword === 'enum') message = `${at} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  if (e.keyword === 'additionalProperties') message = `${at} has key ${JSON.stringify((e.params as { additionalProperty: string }).additionalProperty)} the schema does not allow`;
  return { code: FindingCode.SchemaMismatch, message, path: e.instancePath || '/' };
}

/** The first `{…}` or `[…]` span of `text` that parses as JSON, or null. */
function findEmbeddedJson(text: string): { start: number; end: number } | null {
  if (text.length > 20_000) return null; // a diagnosis only; not worth quadratic work on huge outputs
  for (let start = 0; start < text.length; start++) {
    const open = text[start];
    if (open !== '{' && open !== '[') continue;
    const close = open === '{' ? '}' : ']';
    for (let end = text.lastIndexOf(close); end > start; end = text.lastIndexOf(close, end - 1)) {
      try {
        JSON.parse(text.slice(start, end + 1));
        return { start, end: end + 1 };
      } catch {
        // try a shorter span
      }
    }
  }
  return null;
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, n - 1) + '…';
}

function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
