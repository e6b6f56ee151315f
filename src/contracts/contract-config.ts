/**
 * Contract configuration (CONTRACT §4, §5): the shape of one entry of the
 * config file's `contracts`, its JSON Schema, and its validation.
 *
 * The config loader keeps `contracts` opaque and calls
 * {@link validateContractConfigs} to get every problem as `path: reason`
 * (the same form as its own errors). {@link parseContractConfig} returns the
 * normalized contract with its defaults filled in.
 *
 * @example
 * {
 *   "outputSchema": { "type": "object", "required": ["summary"], "properties": { "summary": { "type": "string" } }, "additionalProperties": false },
 *   "checks": "./contracts/summary-checks.ts",
 *   "cases": [{ "name": "short article", "input": { "messages": [{ "role": "user", "content": "Summarize: …" }] }, "expect": { "subset": { "lang": "en" } } }],
 *   "samples": 3
 * }
 */
import { describeAjvError } from '../config/describe-ajv-error.ts';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { OnejobError } from '../core/errors.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

/** Default number of samples per case. */
export const DEFAULT_SAMPLES = 3;
/** Default temperature of verification calls. */
export const DEFAULT_TEMPERATURE = 0;
/** Largest accepted `samples`. */
export const MAX_SAMPLES = 20;

/** How extra top-level keys of an object output are treated. */
export const ExtraKeysMode = {
  /** Reject keys only when the schema's root says `additionalProperties: false` (default). */
  Schema: 'schema',
  /** Reject any top-level key not listed in the schema's root `properties`, whatever the schema says. */
  Forbid: 'forbid',
} as const;
export type ExtraKeysMode = (typeof ExtraKeysMode)[keyof typeof ExtraKeysMode];

/** What "stable" means for the samples of one case. */
export const StabilityMode = {
  /** Every sample's output is the same value (canonical JSON, or the same text). Default. */
  Exact: 'exact',
  /** Every sample has the same shape: the same keys and JSON types, recursively; values may differ. */
  Shape: 'shape',
  /** Samples are not compared. */
  Off: 'off',
} as const;
export type StabilityMode = (typeof StabilityMode)[keyof typeof StabilityMode];

/** What a case's output must also satisfy, beyond the schema and business checks. */
export interface CaseExpectation {
  /** The parsed output contains this value: objects key by key (recursively), anything else equal. */
  readonly subset?: unknown;
  /** The parsed output (or the text) equals this value exactly. */
  readonly equals?: unknown;
  /** The raw text contains this substring. */
  readonly contains?: string;
}

/** One verification case. */
export interface ContractCase {
  /** A short name for the table; default `case <n>`. */
  readonly name?: string;
  /** An OpenAI-style chat request body without `model` (`messages`, optional `max_tokens`, …). */
  readonly input: { readonly messages: readonly Record<string, unknown>[]; readonly [extra: string]: unknown };
  readonly expect?: CaseExpectation;
}

/** One contract as written in the config file. */
export interface ContractConfig {
  /** Free text for people; not part of the fingerprint. */
  readonly description?: string;
  /** JSON Schema (draft-07, Ajv) the parsed output must match. Absent: the output is text. */
  readonly outputSchema?: Record<string, unknown>;
  /** A module path (relative to the config file) whose exported functions are business checks. */
  readonly checks?: string;
  /** At least one case. */
  readonly cases: readonly ContractCase[];
  /** Calls per case during verification. Default 3. */
  readonly samples?: number;
  /** Temperature of verification calls (overrides the cases'). Default 0. */
  readonly temperature?: number;
  /** Default `schema`. */
  readonly extraTopLevelKeys?: ExtraKeysMode;
  /** Default `exact`. */
  readonly stability?: StabilityMode;
}

/** A contract with every default filled in. */
export interface NormalizedContractConfig {
  readonly description: string | null;
  readonly outputSchema: Record<string, unknown> | null;
  readonly checks: string | null;
  readonly cases: readonly ContractCase[];
  readonly samples: number;
  readonly temperature: number;
  readonly extraTopLevelKeys: ExtraKeysMode;
  readonly stability: StabilityMode;
}

/** The JSON Schema of one contract entry. */
export const CONTRACT_CONFIG_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['cases'],
  properties: {
    description: { type: 'string' },
    outputSchema: { type: 'object' },
    checks: { type: 'string', minLength: 1 },
    cases: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['input'],
        properties: {
          name: { type: 'string', minLength: 1 },
          input: {
            type: 'object',
            required: ['messages'],
            properties: {
              model: false,
              messages: {
                type: 'array',
                minItems: 1,
                items: {
                  type: 'object',
                  required: ['role', 'content'],
                  properties: { role: { type: 'string', minLength: 1 }, content: { type: ['string', 'array', 'null'] } },
                },
              },
              max_tokens: { type: 'integer', minimum: 1 },
              max_completion_tokens: { type: 'integer', minimum: 1 },
              temperature: { type: 'number', minimum: 0, maximum: 2 },
            },
          },
          expect: {
            type: 'object',
            additionalProperties: false,
            minProperties: 1,
            properties: { subset: {}, equals: {}, contains: { type: 'string' } },
          },
        },
      },
    },
    samples: { type: 'integer', minimum: 1, maximum: MAX_SAMPLES },
    temperature: { type: 'number', minimum: 0, maximum: 2 },
    extraTopLevelKeys: { enum: Object.values(ExtraKeysMode) },
    stability: { enum: Object.values(StabilityMode) },
  },
} as const;

let validateEntry: ReturnType<Ajv['compile']> | undefined;
function entryValidator(): ReturnType<Ajv['compile']> {
  validateEntry ??= new Ajv({ allErrors: true, strict: true, allowUnionTypes: true }).compile(CONTRACT_CONFIG_SCHEMA);
  return validateEntry;
}

/**
 * A fresh Ajv instance for output schemas: draft-07, every error, formats,
 * and lenient about unknown keywords (`description`, `x-…`) that real schemas carry.
 */
export function createOutputSchemaAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true });
  addFormats(ajv);
  return ajv;
}


/**
 * Every problem of one contract entry, as `path: reason` (empty when valid):
 * its shape, and whether `outputSchema` compiles.
 *
 * @example validateContractConfig({ cases: [] }, '/contracts/summary') // ['/contracts/summary/cases: must NOT have fewer than 1 items']
 */
export function validateContractConfig(raw: unknown, path = ''): string[] {
  const validate = entryValidator();
  if (!validate(raw)) return (validate.errors ?? []).map((e) => describeAjvError(e, path, { 'false schema': 'must not be set (the provider supplies the model)' }));
  const c = raw as ContractConfig;
  const problems: string[] = [];
  if (c.outputSchema !== undefined) {
    try {
      createOutputSchemaAjv().compile(c.outputSchema);
    } catch (e) {
      problems.push(`${path}/outputSchema: is not a valid JSON Schema (${(e as Error).message})`);
    }
  }
  return problems;
}

/**
 * Every problem of the config file's `contracts` object, as `path: reason`
 * with paths like `/contracts/<name>/cases/0/input`. This is what the config
 * loader calls.
 *
 * @example const problems = validateContractConfigs(file.contracts ?? {}); if (problems.length) throw …
 */
export function validateContractConfigs(contracts: unknown): string[] {
  if (typeof contracts !== 'object' || contracts === null || Array.isArray(contracts)) return ['/contracts: must be an object'];
  return Object.entries(contracts).flatMap(([name, raw]) => validateContractConfig(raw, `/contracts/${escapePointer(name)}`));
}

/**
 * Validates one contract entry and fills in its defaults.
 *
 * @throws OnejobError `config_invalid` listing every problem.
 * @example const contract = parseContractConfig('summary', config.contracts.summary);
 */
export function parseContractConfig(name: string, raw: unknown): NormalizedContractConfig {
  const problems = validateContractConfig(raw, `/contracts/${escapePointer(name)}`);
  if (problems.length > 0) throw new OnejobError('config_invalid', `contract ${name}: ${problems.join('; ')}`, { details: { problems } });
  const c = raw as ContractConfig;
  return {
    description: c.description ?? null,
    outputSchema: c.outputSchema ?? null,
    checks: c.checks ?? null,
    cases: c.cases,
    samples: c.samples ?? DEFAULT_SAMPLES,
    temperature: c.temperature ?? DEFAULT_TEMPERATURE,
    extraTopLevelKeys: c.extraTopLevelKeys ?? 'schema',
    stability: c.stability ?? 'exact',
  };
}

function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}
