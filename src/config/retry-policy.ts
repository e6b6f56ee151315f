/**
 * A provider's `retry` setting (CONTRACT §11): `"retry": {"attempts": N,
 * "maxWaitMs": M}`. A definite failure that certainly did not execute (a 429
 * or 503 with `Retry-After`, a connection refused before anything was sent)
 * starts a new attempt on the same provider after the wait it asked for
 * (at most `maxWaitMs`), up to `attempts` attempts on that provider, before
 * the job fails over. Without it (the default) the job fails over at once.
 * The rule itself is `core/job-rules.ts` (`retryDelayMs`, `decideAfterSettle`).
 */
import type { OnejobConfig } from './config.ts';
import type { RetryPolicy } from '../core/job-rules.ts';

/** The default `maxWaitMs` of a `retry` that names none. */
export const DEFAULT_RETRY_MAX_WAIT_MS = 10_000;

/** The JSON Schema of a provider's `retry` member. */
export const RETRY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['attempts'],
  properties: {
    attempts: { type: 'integer', minimum: 1, maximum: 20 },
    maxWaitMs: { type: 'integer', minimum: 0, maximum: 600_000 },
  },
} as const;

/**
 * The retry lookup of a config: provider name → its policy, or null when it
 * declares none (a definite failure then fails over at once).
 *
 * @example retryPolicyOf(config)('primary') // { attempts: 2, maxWaitMs: 10000 } or null
 */
export function retryPolicyOf(config: OnejobConfig): (provider: string) => RetryPolicy | null {
  const table = new Map<string, RetryPolicy>();
  for (const [name, p] of Object.entries(config.providers)) {
    const retry = p.retry as Partial<RetryPolicy> | undefined;
    if (retry && typeof retry.attempts === 'number') {
      table.set(name, { attempts: retry.attempts, maxWaitMs: retry.maxWaitMs ?? DEFAULT_RETRY_MAX_WAIT_MS });
    }
  }
  return (provider) => table.get(provider) ?? null;
}
