/**
 * The chat series' figures per round (issue 26): each ratio taken within one
 * round (both sides measured minutes apart at most), then its median, min,
 * max and spread across rounds, so one noisy minute does not decide a ratio
 * and the reader sees how far the rounds disagree. Also the CPU per request
 * of every side (`bench/lib/cpu.ts`) and its ratio to Portkey's.
 */
import type { CpuUse } from './cpu.ts';
import { median, round, type RunSummary } from './stats.ts';

/** One side's CPU in one round of the chat series. */
export interface ChatCpu extends CpuUse {
  readonly round: number;
  readonly requests: number;
  readonly perRequest: { processMs: number; databaseMs: number; totalMs: number } | null;
  /** The 1-minute load average when the run ended. */
  readonly loadAverage1m: number;
}

/** A ratio's values per round and their spread. */
export interface Spread {
  readonly rounds: (number | null)[];
  readonly median: number | null;
  readonly min: number | null;
  readonly max: number | null;
  /** (max − min) ÷ median. */
  readonly spread: number | null;
}

function spreadOf(values: (number | null)[]): Spread {
  const xs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (xs.length === 0) return { rounds: values, median: null, min: null, max: null, spread: null };
  const m = median(xs);
  const min = Math.min(...xs);
  const max = Math.max(...xs);
  return { rounds: values, median: round(m, 3), min: round(min, 3), max: round(max, 3), spread: m === 0 ? null : round((max - min) / m, 3) };
}

const div = (a: number | undefined | null, b: number | undefined | null): number | null =>
  a === undefined || a === null || b === undefined || b === null || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : round(a / b, 3);

/** Per-round ratios of the chat series, their spread, and the CPU-per-request ratios (medians over rounds). */
export function chatSpread(samples: Record<string, RunSummary[]>, cpu: Record<string, ChatCpu[]>): {
  ratios: Record<string, number | null>;
  spread: Record<string, Spread>;
  cpuPerRequestMs: Record<string, { processMs: number | null; databaseMs: number | null; totalMs: number | null }>;
} {
  const rounds = Math.max(0, ...['chat_onejob', 'chat_portkey', 'chat_onejob_c1'].map((k) => samples[k]?.length ?? 0));
  const at = (name: string, r: number): RunSummary | undefined => samples[name]?.[r];
  const cpuAt = (name: string, r: number): ChatCpu['perRequest'] | undefined => cpu[name]?.find((c) => c.round === r)?.perRequest ?? undefined;
  const perRound = (f: (r: number) => number | null): (number | null)[] => Array.from({ length: rounds }, (_, r) => f(r));
  const added = (side: string, r: number): number | null => {
    const s = at(side, r);
    const d = at('chat_direct_c1', r);
    return s && d ? s.p50 - d.p50 : null;
  };
  const spread: Record<string, Spread> = {};
  for (const suffix of ['', '_sqlite']) {
    spread[`chat_rps_vs_portkey${suffix}`] = spreadOf(perRound((r) => div(at(`chat_onejob${suffix}`, r)?.rps, at('chat_portkey', r)?.rps)));
    spread[`chat_added_p50_vs_portkey${suffix}`] = spreadOf(perRound((r) => div(added(`chat_onejob${suffix}_c1`, r), added('chat_portkey_c1', r))));
    spread[`chat_cpu_per_request_vs_portkey${suffix}`] = spreadOf(perRound((r) => div(cpuAt(`chat_onejob${suffix}`, r)?.totalMs, cpuAt('chat_portkey', r)?.totalMs)));
    spread[`chat_process_cpu_per_request_vs_portkey${suffix}`] = spreadOf(perRound((r) => div(cpuAt(`chat_onejob${suffix}`, r)?.processMs, cpuAt('chat_portkey', r)?.processMs)));
  }
  const cpuPerRequestMs: Record<string, { processMs: number | null; databaseMs: number | null; totalMs: number | null }> = {};
  for (const [name, runs] of Object.entries(cpu)) {
    const m = (k: 'processMs' | 'databaseMs' | 'totalMs'): number | null => {
      const xs = runs.map((c) => c.perRequest?.[k]).filter((v): v is number => v !== undefined);
      return xs.length ? round(median(xs), 4) : null;
    };
    cpuPerRequestMs[name] = { processMs: m('processMs'), databaseMs: m('databaseMs'), totalMs: m('totalMs') };
  }
  return {
    ratios: {
      chat_cpu_per_request_vs_portkey: spread.chat_cpu_per_request_vs_portkey!.median,
      chat_cpu_per_request_vs_portkey_sqlite: spread.chat_cpu_per_request_vs_portkey_sqlite!.median,
      chat_process_cpu_per_request_vs_portkey: spread.chat_process_cpu_per_request_vs_portkey!.median,
    },
    spread,
    cpuPerRequestMs,
  };
}
