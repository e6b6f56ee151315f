/**
 * Duplicate storm over HTTP, as its own process: `--n` requests sent at once
 * (one connection each) to `POST /v1/jobs` with ONE Idempotency-Key
 * (`--mode same`) or a distinct key each (`--mode distinct`), identical
 * bodies. Prints `RESULT` with statuses, the distinct job ids returned, and
 * latency percentiles.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const url = args.url!;
const n = Number(args.n ?? 1000);
const mode = args.mode ?? 'same';
const path = args.path ?? '/v1/jobs';
const key = `storm-${process.pid}-${Date.now().toString(36)}`;
const body = args.body ?? JSON.stringify({ route: 'summarize', input: { messages: [{ role: 'user', content: 'storm' }] } });

const pool = new Pool(url, { connections: n, pipelining: 1 });
// Open the connections first, so the storm measures requests, not TCP handshakes.
await Promise.all(Array.from({ length: n }, () => pool.request({ method: 'GET', path: '/healthz' }).then((r) => r.body.dump())));

const statuses: Record<string, number> = {};
const ids = new Map<string, number>();
const lat: number[] = [];
let errors = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: n }, async (_, i) => {
    const start = performance.now();
    try {
      const res = await pool.request({
        method: 'POST',
        path,
        headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json', 'idempotency-key': mode === 'same' ? key : `${key}-${i}` },
        body,
      });
      const text = await res.body.text();
      lat.push(performance.now() - start);
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      let id: string | undefined;
      try {
        id = (JSON.parse(text) as { id?: string }).id;
      } catch {
        id = undefined;
      }
      if (id) ids.set(id, (ids.get(id) ?? 0) + 1);
    } catch {
      errors++;
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
await pool.close();
emitResult({ mode, n, key, statuses, distinctIds: ids.size, callersWithId: [...ids.values()].reduce((a, b) => a + b, 0), ...summarize(lat, seconds, errors) });
