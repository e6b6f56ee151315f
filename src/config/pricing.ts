/**
 * Provider pricing (CONTRACT §8): `"pricing": {"inputPerMTok", "outputPerMTok"}`
 * in USD per million tokens, on any provider of the config file. Validated by
 * the config schema (`PRICING_SCHEMA`); prices are read to six decimals so a cost is
 * computed exactly in integer micro-dollars; further decimals are rounded to the sixth (see `core/usage.ts`).
 */
import type { OnejobConfig } from './config.ts';
import type { Pricing } from '../core/usage.ts';

/** The JSON Schema of a provider's `pricing` member. */
export const PRICING_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['inputPerMTok', 'outputPerMTok'],
  properties: {
    inputPerMTok: { type: 'number', minimum: 0, maximum: 1_000_000 },
    outputPerMTok: { type: 'number', minimum: 0, maximum: 1_000_000 },
  },
} as const;

/**
 * The pricing lookup of a config: provider name → its prices, or null when
 * the provider declares none (its attempts then have `cost_usd: null`).
 *
 * @example pricingOf(config)('primary') // { inputPerMTok: 0.15, outputPerMTok: 0.6 } or null
 */
export function pricingOf(config: OnejobConfig): (provider: string) => Pricing | null {
  const table = new Map<string, Pricing>();
  for (const [name, p] of Object.entries(config.providers)) {
    const pricing = p.pricing as Partial<Pricing> | undefined;
    if (pricing && typeof pricing.inputPerMTok === 'number' && typeof pricing.outputPerMTok === 'number') {
      table.set(name, { inputPerMTok: pricing.inputPerMTok, outputPerMTok: pricing.outputPerMTok });
    }
  }
  return (provider) => table.get(provider) ?? null;
}
