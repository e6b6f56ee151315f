/**
 * autocannon as the load generator, in its own process, so the server under test and the load share the cores as they
 * would on separate machines' worth of work.
 */
import { resolve } from 'node:path';
import { BENCH_DIR, runWorker } from './child.ts';
import type { RunSummary } from './stats.ts';

const WORKER = resolve(BENCH_DIR, 'workers', 'autocannon-run.ts');

export interface AutocannonOptions {
  readonly url: string;
  readonly connections: number;
  readonly seconds: number;
  readonly method?: 'GET' | 'POST';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Replace `[<id>]` in headers/body with a fresh id per request (fresh idempotency keys). */
  readonly idReplacement?: boolean;
  /** Stop after this many requests. */
  readonly amount?: number;
}

interface AutocannonJson {
  requests: { total: number; average: number; sent: number };
  latency: { p50: number; p90: number; p99: number; max: number; average: number };
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
}

/** Runs autocannon (in its own process) and summarizes it (only 2xx answers count as done). */
export async function runAutocannon(o: AutocannonOptions): Promise<RunSummary & { non2xx: number; answered2xx: number; cutOff: number }> {
  const options = {
    url: o.url,
    connections: o.connections,
    method: o.method ?? 'GET',
    headers: o.headers ?? {},
    body: o.body,
    idReplacement: o.idReplacement ?? false,
    ...(o.amount ? { amount: o.amount } : { duration: o.seconds }),
  };
  const j = await runWorker<AutocannonJson>(WORKER, ['--options', JSON.stringify(options)]);
  return {
    ops: j['2xx'],
    errors: j.errors + j.timeouts + j.non2xx,
    non2xx: j.non2xx,
    answered2xx: j['2xx'],
    // Sent but never answered: in flight when the run stopped (or timed out).
    cutOff: Math.max(0, j.requests.sent - j.requests.total),
    rps: Math.round((j['2xx'] / j.duration) * 10) / 10,
    p50: j.latency.p50,
    p90: j.latency.p90,
    p99: j.latency.p99,
    max: j.latency.max,
    seconds: j.duration,
  };
}
