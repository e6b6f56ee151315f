/**
 * When the client retries, and how long it waits: the rules of
 * docs/client.md, as small pure functions plus an abortable sleep.
 */

/** How a call may be repeated. */
export type CallSafety =
  /**
   * Repeating it cannot do the work twice: a read, or a write carrying an
   * Idempotency-Key (the server answers a repeat with the same job). Retried
   * on network errors, 429, 503 and other 5xx.
   */
  | 'idempotent'
  /**
   * Repeating it might do it twice (start an attempt, resolve one). Retried
   * only where the server promises it did nothing: 429 and 503.
   */
  | 'unsafe';

/** Retry options of the client. */
export interface RetryOptions {
  /** Retries after the first try. Default 4. */
  readonly maxRetries?: number;
  /** The first backoff; it doubles each retry (with full jitter). Default 250 ms. */
  readonly baseDelayMs?: number;
  /** The longest backoff. Default 8000 ms. */
  readonly maxDelayMs?: number;
  /** A `Retry-After` longer than this is not waited for: the call fails with the answer instead. Default 60 000 ms. */
  readonly maxRetryAfterMs?: number;
}

/** {@link RetryOptions} with every default filled in. */
export type RetryPolicy = Required<RetryOptions>;

/** The defaults of {@link RetryOptions}. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 4, baseDelayMs: 250, maxDelayMs: 8000, maxRetryAfterMs: 60_000 };

/** {@link RetryOptions} with defaults, checked. */
export function retryPolicy(options: RetryOptions = {}): RetryPolicy {
  const policy = { ...DEFAULT_RETRY_POLICY, ...options };
  for (const [name, value] of Object.entries(policy)) {
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`retry.${name} must be a finite number ≥ 0 (got ${String(value)})`);
  }
  return policy;
}

/**
 * A `Retry-After` (delta seconds or an HTTP date) or `retry-after-ms` in
 * milliseconds, or null when absent or unreadable. `retry-after-ms` wins.
 *
 * @example retryAfterMs(new Headers({ 'retry-after': '2' })) // 2000
 */
export function retryAfterMs(headers: Headers, now: number = Date.now()): number | null {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  const value = headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * Whether an answer with `status` may be retried for a call of `safety`.
 * `x-should-retry: false` (the server's "retrying cannot help") always wins.
 */
export function isRetryableStatus(status: number, safety: CallSafety, headers: Headers): boolean {
  if (headers.get('x-should-retry') === 'false') return false;
  if (status === 429 || status === 503) return true;
  return safety === 'idempotent' && status >= 500;
}

/** The backoff before retry number `retry` (1, 2, …): full jitter up to base·2^(retry−1), capped. */
export function backoffMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
