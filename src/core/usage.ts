/**
 * Usage and cost of an attempt (CONTRACT §8), as pure data and arithmetic.
 *
 * Money is stored and summed as integer **micro-dollars** (1 µ$ = 10⁻⁶ USD):
 * an attempt's cost is computed once, exactly, from the token counts and the
 * provider's decimal prices (no binary floating point on the way), rounded
 * half up to a whole micro-dollar, and stored as an integer. Every total
 * (a job's, `GET /v1/usage`) is a sum of integers, so a million attempts add
 * up to exactly the sum of their stored costs: no float drift. The API shows
 * `cost_usd = micros / 10⁶`. See docs/usage.md.
 */

/** Token counts the provider reported, normalized across protocols (OpenAI names). */
export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
}

/** A provider's prices in USD per million tokens (config `pricing`). */
export interface Pricing {
  readonly inputPerMTok: number;
  readonly outputPerMTok: number;
}

/** What an attempt's end records: its usage (null when none came back) and its cost (null when unpriced). */
export interface MeteredUsage {
  readonly usage: TokenUsage | null;
  readonly costMicros: number | null;
}

/** Decimal places a price is read to (0.000001 USD per MTok). */
export const PRICE_DECIMALS = 6;

/**
 * A non-negative decimal JSON number as an integer count of 10⁻⁶ units, read
 * from its shortest decimal text so `0.15` is exactly 150000 (never
 * 149999.99…).
 *
 * Decimals beyond the sixth are rounded half up.
 *
 * @throws RangeError when the number is negative or not finite.
 * @example toMicroUnits(0.15) // 150000n
 */
export function toMicroUnits(value: number): bigint {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`a price must be a finite non-negative number, got ${value}`);
  // Shortest round-trip decimal text; expand exponent forms (1e-7, 2.5e+21).
  let text = String(value);
  let exp = 0;
  const e = text.indexOf('e');
  if (e >= 0) {
    exp = Number(text.slice(e + 1));
    text = text.slice(0, e);
  }
  const dot = text.indexOf('.');
  const digits = dot < 0 ? text : text.slice(0, dot) + text.slice(dot + 1);
  const decimals = (dot < 0 ? 0 : text.length - dot - 1) - exp;
  if (decimals <= PRICE_DECIMALS) return BigInt(digits) * 10n ** BigInt(PRICE_DECIMALS - decimals);
  // Finer than 10⁻⁶: rounded half up to the sixth decimal.
  const drop = 10n ** BigInt(decimals - PRICE_DECIMALS);
  return (BigInt(digits) + drop / 2n) / drop;
}

/**
 * The cost of `usage` at `pricing`, in whole micro-dollars, rounded half up.
 *
 * tokens × (USD per 10⁶ tokens) is already micro-dollars; with prices in
 * 10⁻⁶ units the product is in 10⁻¹² USD, exact in a bigint, then rounded once.
 *
 * @example costMicros({ promptTokens: 1000, completionTokens: 500, totalTokens: 1500 }, { inputPerMTok: 0.15, outputPerMTok: 0.6 }) // 450
 */
export function costMicros(usage: TokenUsage, pricing: Pricing): number {
  const pico = BigInt(usage.promptTokens) * toMicroUnits(pricing.inputPerMTok) + BigInt(usage.completionTokens) * toMicroUnits(pricing.outputPerMTok);
  const scale = 10n ** BigInt(PRICE_DECIMALS);
  const micros = (pico + scale / 2n) / scale;
  if (micros > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError('cost does not fit in a safe integer of micro-dollars');
  return Number(micros);
}

/**
 * Usage as a provider reported it (`{prompt_tokens, completion_tokens, total_tokens}`)
 * plus the provider's pricing → what the attempt records.
 *
 * @example meterUsage({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }, null) // { usage: {…}, costMicros: null }
 */
export function meterUsage(
  reported: { readonly prompt_tokens: number; readonly completion_tokens: number; readonly total_tokens?: number } | null | undefined,
  pricing: Pricing | null | undefined,
): MeteredUsage {
  if (!reported) return { usage: null, costMicros: null };
  const promptTokens = wholeCount(reported.prompt_tokens);
  const completionTokens = wholeCount(reported.completion_tokens);
  const totalTokens = reported.total_tokens === undefined ? promptTokens + completionTokens : wholeCount(reported.total_tokens);
  const usage = { promptTokens, completionTokens, totalTokens };
  return { usage, costMicros: pricing ? costMicros(usage, pricing) : null };
}

/** Micro-dollars → USD for the API (`null` stays `null`). */
export function microsToUsd(micros: number | null): number | null {
  return micros === null ? null : micros / 1_000_000;
}

function wholeCount(n: number): number {
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}
