/**
 * Findings: what a contract check says about one output or one prompt.
 *
 * Every check of this module (runtime {@link checkOutput}, `verify`) reports
 * findings with a stable `code` from {@link FindingCode} and a one-line
 * human `message`. A failing output becomes a `failed` attempt with error
 * code `contract_violation` and its findings as details
 * ({@link contractViolationError}).
 */
import type { RecordedError } from '../core/types.ts';

/** Every finding code. */
export const FindingCode = {
  /** The output is not JSON text although the contract has an `outputSchema`. */
  OutputNotJson: 'output_not_json',
  /** The output is JSON wrapped in prose or a markdown fence. */
  ProseAroundJson: 'prose_around_json',
  /** The parsed output does not match `outputSchema`. */
  SchemaMismatch: 'schema_mismatch',
  /** A top-level key the schema does not allow (`additionalProperties: false`). */
  ExtraTopLevelKey: 'extra_top_level_key',
  /** A business check returned a problem (or threw). */
  BusinessCheckFailed: 'business_check_failed',
  /** A case's `expect` did not hold. */
  ExpectationFailed: 'expectation_failed',
  /** Samples of one case at the same temperature disagree. */
  UnstableOutput: 'unstable_output',
  /** The provider call failed or was ambiguous: no output to check. */
  ProviderFailed: 'provider_failed',
  /** The chat template raised or could not be parsed. */
  TemplateError: 'template_error',
  /** The rendered prompt lost the system message. */
  SystemDropped: 'system_dropped',
  /** The rendered prompt lost a message or reordered the conversation. */
  RoleOrder: 'role_order',
  /** Prompt tokens plus `max_tokens` exceed the provider's context window. */
  ContextOverflow: 'context_overflow',
} as const;
export type FindingCode = (typeof FindingCode)[keyof typeof FindingCode];

/**
 * One problem found by a check.
 *
 * @example { code: 'extra_top_level_key', message: 'top-level key "confidence" is not allowed by the schema', path: '/confidence' }
 */
export interface Finding {
  /** What kind of problem; business checks may use their own codes, default `business_check_failed`. */
  readonly code: FindingCode | (string & {});
  /** One line a person understands. */
  readonly message: string;
  /** JSON Pointer into the output, when the problem has a place. */
  readonly path?: string;
  /** The business check (its export name) that reported it. */
  readonly check?: string;
}

/**
 * The error recorded on an attempt whose output broke the contract.
 *
 * @example store.settleAttempt({ …, outcome: { state: 'failed', error: contractViolationError('summary', findings) } })
 */
export function contractViolationError(contractName: string, findings: readonly Finding[]): RecordedError {
  const first = findings[0]?.message ?? 'the output broke the contract';
  const more = findings.length > 1 ? ` (and ${findings.length - 1} more)` : '';
  return { code: 'contract_violation', message: `contract ${contractName}: ${first}${more}`, details: { contract: contractName, findings } };
}

/** The findings as one short line: the first message, and how many more. */
export function summarizeFindings(findings: readonly Finding[]): string {
  if (findings.length === 0) return '';
  const first = findings[0]!.message;
  return findings.length > 1 ? `${first} (+${findings.length - 1} more)` : first;
}
