/**
 * `"limits"` in the config file (CONTRACT §16, docs/limits.md): a default
 * and per-owner entries, each `spendUsd` (`day`, `month`: UTC windows),
 * `concurrency` and `requestsPerMinute`, `null` meaning unlimited. Validated
 * by the config schema (`LIMITS_SCHEMA`); merged per owner by
 * `core/limits.ts` (`limitsOf`).
 */
import { limitsOf, worstCaseMicros, type LimitsConfig, type SpendPolicy } from '../core/limits.ts';
import type { OnejobConfig } from './config.ts';
import { pricingOf } from './pricing.ts';

/** A spend limit in USD: up to a billion, to the micro-dollar. */
const USD = { type: ['number', 'null'], minimum: 0, maximum: 1_000_000_000 } as const;

/** One entry (the default's, or an owner's). */
const ENTRY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    spendUsd: { type: ['object', 'null'], additionalProperties: false, properties: { day: USD, month: USD } },
    concurrency: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000 },
    requestsPerMinute: { type: ['integer', 'null'], minimum: 1, maximum: 100_000_000 },
  },
} as const;

/** The JSON Schema of `"limits"`. */
export const LIMITS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    default: ENTRY_SCHEMA,
    owners: { type: 'object', propertyNames: { minLength: 1 }, additionalProperties: ENTRY_SCHEMA },
  },
} as const;

/** The JSON Schema of a provider's `maxOutputTokens` (the output cap of a request that names none; default 4096). */
export const MAX_OUTPUT_TOKENS_SCHEMA = { type: 'integer', minimum: 1, maximum: 100_000_000 } as const;

/** `"limits"` as given, copied (absent: no limits). */
export function limitsConfigOf(given: LimitsConfig | undefined): LimitsConfig {
  return { default: given?.default ?? {}, owners: { ...(given?.owners ?? {}) } };
}

/**
 * The store's spend policy of a config: each owner's limits, and each
 * attempt's worst case at its provider's pricing (a provider that is not
 * configured here is an MCP tool's: `free`).
 */
export function spendPolicyOf(config: OnejobConfig): SpendPolicy {
  const pricing = pricingOf(config);
  return {
    limitsOf: (owner) => limitsOf(config.limits, owner),
    worstCase: (provider, input) => {
      const p = config.providers[provider];
      if (p === undefined || !Object.hasOwn(config.providers, provider)) return 'free';
      const prices = pricing(provider);
      if (prices === null) return 'unpriced';
      const max = typeof p.maxOutputTokens === 'number' ? p.maxOutputTokens : null;
      return worstCaseMicros(input, prices, max);
    },
  };
}
