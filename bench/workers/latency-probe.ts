/**
 * One connection, one request at a time, timed in microseconds (autocannon
 * reports whole milliseconds, too coarse for sub-millisecond added latency).
 * `--kind direct|portkey|onejob` picks the request shape; prints `RESULT`
 * with p50/p90/p99 in ms and, when the answers carry onejob's
 * `Server-Timing`, the medians of its `onejob` and `provider` parts.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { median, summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const url = args.url!;
const n = Number(args.n ?? 2000);
const warm = Number(args.warmup ?? 200);
const headers: Record<string, string> = { 'content-type': 'application/json', ...(args.headers ? (JSON.parse(args.headers) as Record<string, string>) : {}) };
const body = args.body!;
const fresh = args['fresh-key'] === 'true';
const pool = new Pool(url, { connections: 1, pipelining: 1 });
const lat: number[] = [];
/** `Server-Timing: onejob;dur=…, provider;dur=…` of the measured answers (onejob's chat and create routes send it). */
const ownMs: number[] = [];
const providerMs: number[] = [];
let errors = 0;
const tag = `${process.pid}-${Date.now().toString(36)}`;
const t0 = performance.now();
for (let i = 0; i < warm + n; i++) {
  const h = fresh ? { ...headers, 'idempotency-key': `lat-${tag}-${i}` } : headers;
  const s = performance.now();
  const res = await pool.request({ method: 'POST', path: args.path ?? '/v1/chat/completions', headers: h, body });
  await res.body.dump();
  const ms = performance.now() - s;
  if (res.statusCode >= 300) errors++;
  if (i < warm) continue;
  lat.push(ms);
  const timing = String(res.headers['server-timing'] ?? '');
  const own = /onejob;dur=([\d.]+)/.exec(timing);
  const provider = /provider;dur=([\d.]+)/.exec(timing);
  if (own) ownMs.push(Number(own[1]));
  if (provider) providerMs.push(Number(provider[1]));
}
await pool.close();
emitResult({
  ...summarize(lat, (performance.now() - t0) / 1000, errors),
  p50us: Math.round(summarize(lat, 1).p50 * 1000),
  serverTimingP50Ms: ownMs.length > 0 ? { onejob: median(ownMs), provider: providerMs.length > 0 ? median(providerMs) : null } : null,
  // Every request (warm-up included) was answered: the parity check has no slack here.
  answered2xx: warm + n - errors,
  cutOff: 0,
});
