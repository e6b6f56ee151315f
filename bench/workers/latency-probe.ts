/**
 * One connection, one request at a time, timed in microseconds (autocannon
 * reports whole milliseconds, too coarse for sub-millisecond added latency).
 * `--kind direct|portkey|onejob` picks the request shape; prints `RESULT`
 * with p50/p90/p99 in ms.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const url = args.url!;
const n = Number(args.n ?? 2000);
const warm = Number(args.warmup ?? 200);
const headers: Record<string, string> = { 'content-type': 'application/json', ...(args.headers ? (JSON.parse(args.headers) as Record<string, string>) : {}) };
const body = args.body!;
const fresh = args['fresh-key'] === 'true';
const pool = new Pool(url, { connections: 1, pipelining: 1 });
const lat: number[] = [];
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
  if (i >= warm) lat.push(ms);
}
await pool.close();
emitResult({
  ...summarize(lat, (performance.now() - t0) / 1000, errors),
  p50us: Math.round(summarize(lat, 1).p50 * 1000),
  // Every request (warm-up included) was answered: the parity check has no slack here.
  answered2xx: warm + n - errors,
  cutOff: 0,
});
