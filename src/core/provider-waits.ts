/**
 * When this process waited on a provider, per job: the intervals
 * (`performance.now()` milliseconds) from sending a provider request to its
 * complete answer. Written by the HTTP providers, read by the HTTP layer's
 * `Server-Timing` hook to split a request's time into "onejob" and
 * "provider" without the executor or the routes passing anything along.
 *
 * Process-wide on purpose: the executor that calls the provider and the
 * route that answers the client share nothing else but the job id. Entries
 * are kept for {@link PROVIDER_WAIT_TTL_MS} and at most
 * {@link PROVIDER_WAIT_MAX_JOBS} jobs (oldest dropped first), so a job whose
 * answer nobody waits for costs a few bytes for a while, not forever. An
 * attempt run by another process is not here; readers then know nothing of
 * the provider's share and say so.
 */

/** How long a job's provider intervals are kept. */
export const PROVIDER_WAIT_TTL_MS = 10 * 60_000;
/** How many jobs' intervals are kept at most. */
export const PROVIDER_WAIT_MAX_JOBS = 20_000;

interface Entry {
  readonly intervals: [number, number][];
  recordedAt: number;
}

const waits = new Map<string, Entry>();

/**
 * Records that this process waited on a provider for `jobId` from `startMs`
 * to `endMs` (`performance.now()` values).
 *
 * @example const t0 = performance.now(); await call(); recordProviderWait(jobId, t0, performance.now());
 */
export function recordProviderWait(jobId: string, startMs: number, endMs: number): void {
  const now = performance.now();
  const entry = waits.get(jobId);
  if (entry === undefined) waits.set(jobId, { intervals: [[startMs, endMs]], recordedAt: now });
  else {
    entry.intervals.push([startMs, endMs]);
    entry.recordedAt = now;
    // Keep insertion order ≈ age order for the eviction below.
    waits.delete(jobId);
    waits.set(jobId, entry);
  }
  for (const [id, e] of waits) {
    if (waits.size <= PROVIDER_WAIT_MAX_JOBS && now - e.recordedAt <= PROVIDER_WAIT_TTL_MS) break;
    waits.delete(id);
  }
}

/**
 * How many milliseconds of the window [`fromMs`, `toMs`] this process spent
 * waiting on a provider for `jobId` (overlapping attempts, e.g. a hedge,
 * counted once), or null when it has no record of a provider call for it.
 *
 * @example providerWaitWithin(jobId, requestStart, performance.now()) // 412.3
 */
export function providerWaitWithin(jobId: string, fromMs: number, toMs: number): number | null {
  const entry = waits.get(jobId);
  if (entry === undefined) return null;
  const clipped = entry.intervals
    .map(([a, b]): [number, number] => [Math.max(a, fromMs), Math.min(b, toMs)])
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let total = 0;
  let end = -Infinity;
  for (const [a, b] of clipped) {
    if (b <= end) continue;
    total += b - Math.max(a, end);
    end = b;
  }
  return total;
}
