/**
 * Small statistics helpers for the benchmark: percentiles over raw latency
 * samples, and a compact summary every measurement reports.
 */

/** One measured run: throughput and latency percentiles in milliseconds. */
export interface RunSummary {
  /** Completed operations. */
  readonly ops: number;
  /** Operations that failed (non-2xx, thrown). */
  readonly errors: number;
  /** Operations per second over the run. */
  readonly rps: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  /** Wall time of the run in seconds. */
  readonly seconds: number;
}

/** The `q`-quantile (0..1) of sorted samples, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

/** Summarizes latency samples (ms) of `ops` operations over `seconds`. */
export function summarize(latenciesMs: readonly number[], seconds: number, errors = 0): RunSummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return {
    ops: sorted.length,
    errors,
    rps: round(sorted.length / seconds, 1),
    p50: round(quantile(sorted, 0.5), 3),
    p90: round(quantile(sorted, 0.9), 3),
    p99: round(quantile(sorted, 0.99), 3),
    max: round(sorted[sorted.length - 1] ?? Number.NaN, 3),
    seconds: round(seconds, 3),
  };
}

/** The median of numbers (NaN when empty). */
export function median(values: readonly number[]): number {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function round(n: number, digits = 3): number {
  if (!Number.isFinite(n)) return n;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** A fixed-size reservoir: keeps a uniform sample of at most `size` values (latency samples of long runs). */
export class Reservoir {
  readonly #size: number;
  readonly values: number[] = [];
  #seen = 0;
  constructor(size = 200_000) {
    this.#size = size;
  }
  add(v: number): void {
    this.#seen++;
    if (this.values.length < this.#size) this.values.push(v);
    else {
      const j = Math.floor(Math.random() * this.#seen);
      if (j < this.#size) this.values[j] = v;
    }
  }
  get seen(): number {
    return this.#seen;
  }
}
