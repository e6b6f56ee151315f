/**
 * Budgets and limits (CONTRACT §16) as pure rules: an owner's limits after
 * the default and its own entry are merged member by member, an attempt's
 * worst case, and the UTC windows. No I/O: the database enforces what these
 * compute (migrations `0014_spend_limits.sql`, docs/limits.md).
 */
import { costMicros, toMicroUnits, type Pricing } from './usage.ts';

/** One entry of `"limits"` as written (the default's, or an owner's). `null`: unlimited. */
export interface LimitsEntry {
  readonly spendUsd?: { readonly day?: number | null; readonly month?: number | null } | null;
  readonly concurrency?: number | null;
  readonly requestsPerMinute?: number | null;
}

/** The `"limits"` member of the config. */
export interface LimitsConfig {
  readonly default?: LimitsEntry;
  readonly owners?: Readonly<Record<string, LimitsEntry>>;
}

/** One owner's limits in force; `null` is unlimited. Money in integer micro-dollars. */
export interface OwnerLimits {
  readonly spendDayMicros: number | null;
  readonly spendMonthMicros: number | null;
  readonly concurrency: number | null;
  readonly requestsPerMinute: number | null;
}

/** The output cap when neither the request nor the provider names one (CONTRACT §16). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;

/** Input bytes per estimated token: UTF-8 bytes ÷ 3, rounded up. */
export const BYTES_PER_TOKEN = 3;

/** The sliding window of `requestsPerMinute`. */
export const REQUESTS_WINDOW_MS = 60_000;

/** How close a window's end must be for a `budget_exceeded` refusal to carry `Retry-After` (CONTRACT §16). */
export const RETRY_AFTER_WITHIN_MS = 3_600_000;

/** A member named by the owner wins (`null`: unlimited); one it leaves out keeps the default's; neither: unlimited. */
function pick<T>(own: Readonly<Record<string, unknown>> | null | undefined, dflt: Readonly<Record<string, unknown>> | null | undefined, key: string): T | null {
  if (own != null && Object.hasOwn(own, key)) return (own[key] as T | null | undefined) ?? null;
  if (dflt != null && Object.hasOwn(dflt, key)) return (dflt[key] as T | null | undefined) ?? null;
  return null;
}

/**
 * An owner's limits: its entry over the default, member by member
 * (`spendUsd.day` and `spendUsd.month` each a member; an owner's
 * `"spendUsd": null` makes both unlimited).
 *
 * @example limitsOf({ default: { spendUsd: { day: 20 }, concurrency: 32 } }, 'bob') // { spendDayMicros: 20000000, spendMonthMicros: null, concurrency: 32, requestsPerMinute: null }
 */
export function limitsOf(config: LimitsConfig | undefined, owner: string): OwnerLimits {
  const dflt = config?.default;
  const own = config?.owners && Object.hasOwn(config.owners, owner) ? config.owners[owner] : undefined;
  const ownSpend = own && Object.hasOwn(own, 'spendUsd') ? (own.spendUsd === null ? { day: null, month: null } : own.spendUsd) : undefined;
  const usd = (key: 'day' | 'month'): number | null => {
    const v = pick<number>(ownSpend, dflt?.spendUsd, key);
    return v === null ? null : Number(toMicroUnits(v));
  };
  return {
    spendDayMicros: usd('day'),
    spendMonthMicros: usd('month'),
    concurrency: pick<number>(own as Record<string, unknown> | undefined, dflt as Record<string, unknown> | undefined, 'concurrency'),
    requestsPerMinute: pick<number>(own as Record<string, unknown> | undefined, dflt as Record<string, unknown> | undefined, 'requestsPerMinute'),
  };
}

/** Whether a spend limit applies in either window. */
export function hasSpendLimit(l: OwnerLimits): boolean {
  return l.spendDayMicros !== null || l.spendMonthMicros !== null;
}

/**
 * The estimated input tokens: UTF-8 bytes of the rendered input (its JSON
 * text, as onejob stores it) ÷ 3, rounded up. Tokenizers average about 4
 * bytes per token on prose, so this over-counts prose by about a third; it
 * can under-count text of many one-byte tokens (docs/limits.md).
 */
export function estimateInputTokens(input: unknown): number {
  const text = typeof input === 'string' ? input : JSON.stringify(input ?? null);
  return Math.ceil(new TextEncoder().encode(text).length / BYTES_PER_TOKEN);
}

/** The request's own output cap: `max_tokens`, `max_completion_tokens`, `max_output_tokens` (the largest named), else null. */
export function requestOutputCap(input: unknown): number | null {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return null;
  const o = input as Record<string, unknown>;
  let cap: number | null = null;
  for (const key of ['max_tokens', 'max_completion_tokens', 'max_output_tokens']) {
    const v = o[key];
    if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) cap = Math.max(cap ?? 0, v);
  }
  return cap;
}

/**
 * An attempt's worst case in micro-dollars: the provider's pricing applied
 * to the estimated input tokens and to the output cap (the request's, else
 * the provider's `maxOutputTokens`, else 4096).
 *
 * @example worstCaseMicros({ messages: [{ role: 'user', content: 'hi' }] }, { inputPerMTok: 1, outputPerMTok: 2 }, null) // 8205
 */
export function worstCaseMicros(input: unknown, pricing: Pricing, providerMaxOutputTokens: number | null): number {
  const promptTokens = estimateInputTokens(input);
  const completionTokens = requestOutputCap(input) ?? providerMaxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  // Rounded like a real cost: never less than the cost of the same token counts.
  return costMicros({ promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }, pricing);
}

/** The UTC windows an instant falls in, as the database keys them (`YYYY-MM-DD`, `YYYY-MM-01`), and when each ends. */
export interface SpendWindows {
  readonly day: { readonly startsOn: string; readonly resetsAt: Date };
  readonly month: { readonly startsOn: string; readonly resetsAt: Date };
}

/** The day and month (UTC) of `at`. */
export function windowsAt(at: Date): SpendWindows {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  const iso = at.toISOString();
  return {
    day: { startsOn: iso.slice(0, 10), resetsAt: new Date(Date.UTC(y, m, d + 1)) },
    month: { startsOn: `${iso.slice(0, 7)}-01`, resetsAt: new Date(Date.UTC(y, m + 1, 1)) },
  };
}

/** `Retry-After` seconds for a window that ends at `resetsAt`: only when that is within the hour (CONTRACT §16), else null. */
export function retryAfterSeconds(now: Date, resetsAt: Date): number | null {
  const ms = resetsAt.getTime() - now.getTime();
  return ms > 0 && ms <= RETRY_AFTER_WITHIN_MS ? Math.ceil(ms / 1000) : null;
}

/** What the store needs to reserve spend: the owner's spend limits, and an attempt's worst case on a provider. */
export interface SpendPolicy {
  /** The owner's limits; a spend limit in either window makes its attempts reserve. */
  limitsOf(owner: string): OwnerLimits;
  /**
   * The worst case of `input` on `provider` in micro-dollars; `unpriced` for
   * a configured provider without `pricing` (skipped under a spend limit,
   * `unsupported:pricing`); `free` for what has no price by nature (an MCP
   * tool, CONTRACT §16): it reserves nothing.
   */
  worstCase(provider: string, input: unknown): number | 'unpriced' | 'free';
}

/** The reservation an attempt carries into its insert (`attempts.reserve_micros` and the limits it was reserved under). */
export interface SpendReservation {
  readonly micros: number;
  readonly dayLimitMicros: number | null;
  readonly monthLimitMicros: number | null;
}

/** The reservation of an attempt of `owner` on `provider`, or null when nothing is reserved (no spend limit, or no price by nature). */
export function reservationFor(policy: SpendPolicy | undefined, owner: string, provider: string, input: unknown): SpendReservation | null {
  if (!policy) return null;
  const l = policy.limitsOf(owner);
  if (!hasSpendLimit(l)) return null;
  const w = policy.worstCase(provider, input);
  if (typeof w !== 'number') return null;
  return { micros: w, dayLimitMicros: l.spendDayMicros, monthLimitMicros: l.spendMonthMicros };
}

/** The skip reason of a provider that cannot be priced under a spend limit (CONTRACT §16). */
export const UNPRICED_SKIP = 'unsupported:pricing';
