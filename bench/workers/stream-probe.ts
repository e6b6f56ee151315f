/**
 * Time to first token at one connection: one streamed request at a time
 * (`"stream": true` in `--body`), timed with microsecond timers from sending
 * the request to receiving the first SSE event whose
 * `choices[0].delta.content` is a non-empty string, and to the end of the
 * body. With `--fresh-key`, every request carries its own Idempotency-Key.
 *
 * A request counts as answered 2xx when it was answered 200, its stream
 * carried content and ended with `data: [DONE]` and no `event: error`.
 * Prints `RESULT` with the time-to-first-token summary (p50/p90/p99 in ms),
 * `total` (the whole stream) and the parity inputs.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const n = Number(args.n ?? 200);
const warm = Number(args.warmup ?? 30);
const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream', ...(args.headers ? (JSON.parse(args.headers) as Record<string, string>) : {}) };
const body = args.body!;
const fresh = args['fresh-key'] === 'true';
const pool = new Pool(args.url!, { connections: 1, pipelining: 1 });
const ttft: number[] = [];
const total: number[] = [];
let errors = 0;
let answered = 0;
const firstError: string[] = [];
const tag = `${process.pid}-${Date.now().toString(36)}`;

/** Whether one SSE event's data carries content text. */
function hasContent(data: string): boolean {
  if (data === '[DONE]') return false;
  try {
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: unknown } }[] };
    const c = chunk.choices?.[0]?.delta?.content;
    return typeof c === 'string' && c.length > 0;
  } catch {
    return false;
  }
}

const t0 = performance.now();
for (let i = 0; i < warm + n; i++) {
  const h = fresh ? { ...headers, 'idempotency-key': `ttft-${tag}-${i}` } : headers;
  const s = performance.now();
  let first = Number.NaN;
  let buf = '';
  let done = false;
  let errorEvent = false;
  let status = 0;
  try {
    const res = await pool.request({ method: 'POST', path: args.path ?? '/v1/chat/completions', headers: h, body });
    status = res.statusCode;
    for await (const piece of res.body) {
      buf += (piece as Buffer).toString('utf8');
      // Events end with a blank line; look at every complete one.
      let cut: number;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        const lines = event.split(/\r?\n/);
        if (lines.some((l) => l.startsWith('event: error') || l.startsWith('event:error'))) errorEvent = true;
        const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (data === '[DONE]') done = true;
        if (Number.isNaN(first) && data && hasContent(data)) first = performance.now() - s;
      }
    }
  } catch (e) {
    errorEvent = true;
    if (firstError.length === 0) firstError.push(String(e));
  }
  const ms = performance.now() - s;
  const ok = status === 200 && !Number.isNaN(first) && done && !errorEvent;
  if (ok) answered++;
  else {
    errors++;
    if (firstError.length === 0) firstError.push(`status ${status}, first content ${first}, [DONE] ${done}, error event ${errorEvent}: ${buf.slice(0, 200)}`);
  }
  if (i >= warm && ok) {
    ttft.push(first);
    total.push(ms);
  }
}
await pool.close();
const seconds = (performance.now() - t0) / 1000;
const tot = summarize(total, seconds);
emitResult({
  ...summarize(ttft, seconds, errors),
  total: { p50: tot.p50, p99: tot.p99 },
  answered2xx: answered,
  cutOff: 0,
  ...(firstError.length ? { firstError: firstError[0] } : {}),
});
