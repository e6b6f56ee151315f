/**
 * {@link compileContract}: a contract config made ready to check outputs fast
 * — the output schema compiled once, the business-check module loaded once,
 * and the contract's fingerprint computed.
 *
 * The fingerprint is what certifications are keyed by: the SHA-256 of the
 * canonical JSON of the normalized contract (without `description`) plus the
 * SHA-256 of the business-check module's file. Editing the schema, a case,
 * the samples or the checks' code yields a new fingerprint and voids every
 * certification of the old one.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ValidateFunction } from 'ajv';
import { OnejobError } from '../core/errors.ts';
import { fingerprint } from '../core/fingerprint.ts';
import { createOutputSchemaAjv, parseContractConfig, type NormalizedContractConfig } from './contract-config.ts';
import type { Finding } from './finding.ts';

/** What a business check receives besides the input and the output. */
export interface BusinessCheckContext {
  /** The contract's name. */
  readonly contract: string;
  /** The provider's raw text (before JSON parsing). */
  readonly text: string;
}

/**
 * What a business check returns: nothing, `true` or `[]` for a pass; `false`,
 * a message, a {@link Finding}, or a list of messages/findings for problems.
 */
export type BusinessCheckResult = void | null | undefined | boolean | string | Finding | readonly (string | Finding)[];

/**
 * A business check: an exported function of the contract's `checks` module.
 * Synchronous (it runs on the executor's hot path, before the compare-and-swap).
 *
 * @example export function answersInFrench(input, output) { return output.lang === 'fr' ? [] : 'lang must be "fr" (the system prompt asks for French)'; }
 */
export type BusinessCheck = (input: unknown, output: unknown, context: BusinessCheckContext) => BusinessCheckResult;

/** A contract ready for {@link checkOutput} and verification. */
export interface CompiledContract {
  readonly name: string;
  readonly config: NormalizedContractConfig;
  /** `sha256:<hex>`; see the module header. */
  readonly fingerprint: string;
  /** The compiled output schema, or null when the output is text. */
  readonly validate: ValidateFunction | null;
  /**
   * Top-level keys an object output may have, or null when any is allowed.
   * Derived from the schema root (`properties`, `patternProperties`) and `extraTopLevelKeys`.
   */
  readonly topLevelKeys: { readonly names: ReadonlySet<string>; readonly patterns: readonly RegExp[] } | null;
  /** The business checks, by export name, in the module's export order. */
  readonly checks: readonly { readonly name: string; readonly fn: BusinessCheck }[];
  /** The absolute path of the checks module, or null. */
  readonly checksPath: string | null;
}

/** Options of {@link compileContract}. */
export interface CompileContractOptions {
  /** Directory that a relative `checks` path is resolved against (the config file's directory). */
  readonly baseDir: string;
}

/**
 * Validates a contract config, compiles its schema, loads its business checks
 * and computes its fingerprint. Call once per contract at start-up.
 *
 * @throws OnejobError `config_invalid` for a bad config, a schema that does not
 *   compile, or a checks module that cannot be read or exports no function.
 * @example const summary = await compileContract('summary', config.contracts.summary, { baseDir: dirname(config.configPath) });
 */
export async function compileContract(name: string, config: unknown, options: CompileContractOptions): Promise<CompiledContract> {
  const normalized = parseContractConfig(name, config);
  let validate: ValidateFunction | null = null;
  if (normalized.outputSchema !== null) {
    try {
      validate = createOutputSchemaAjv().compile(normalized.outputSchema);
    } catch (cause) {
      throw new OnejobError('config_invalid', `contract ${name}: outputSchema does not compile (${(cause as Error).message})`, { cause });
    }
  }

  let checksPath: string | null = null;
  let checksHash: string | null = null;
  const checks: { name: string; fn: BusinessCheck }[] = [];
  if (normalized.checks !== null) {
    checksPath = isAbsolute(normalized.checks) ? normalized.checks : resolvePath(options.baseDir, normalized.checks);
    let source: Buffer;
    try {
      source = readFileSync(checksPath);
    } catch (cause) {
      throw new OnejobError('config_invalid', `contract ${name}: cannot read checks module ${checksPath} (${(cause as Error).message})`, { cause });
    }
    checksHash = 'sha256:' + createHash('sha256').update(source).digest('hex');
    let mod: Record<string, unknown>;
    try {
      // The hash in the query string makes an edited module load afresh in a long-lived process.
      mod = (await import(`${pathToFileURL(checksPath).href}?v=${checksHash.slice(7, 19)}`)) as Record<string, unknown>;
    } catch (cause) {
      throw new OnejobError('config_invalid', `contract ${name}: cannot load checks module ${checksPath} (${(cause as Error).message})`, { cause });
    }
    for (const [exportName, value] of Object.entries(mod)) {
      if (typeof value === 'function') checks.push({ name: exportName, fn: value as BusinessCheck });
    }
    if (checks.length === 0) throw new OnejobError('config_invalid', `contract ${name}: checks module ${checksPath} exports no function`);
  }

  const { description: _ignored, ...fingerprinted } = normalized;
  return {
    name,
    config: normalized,
    fingerprint: fingerprint({ contract: fingerprinted, checksModule: checksHash }),
    validate,
    topLevelKeys: topLevelKeys(normalized),
    checks,
    checksPath,
  };
}

function topLevelKeys(c: NormalizedContractConfig): CompiledContract['topLevelKeys'] {
  const schema = c.outputSchema;
  if (schema === null) return null;
  const restricted = c.extraTopLevelKeys === 'forbid' || schema.additionalProperties === false;
  if (!restricted) return null;
  const props = isRecord(schema.properties) ? Object.keys(schema.properties) : [];
  const patterns = isRecord(schema.patternProperties) ? Object.keys(schema.patternProperties).map((p) => new RegExp(p, 'u')) : [];
  return { names: new Set(props), patterns };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
