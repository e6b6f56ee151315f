/**
 * Time to first token of a resumed stream and of a duplicate (CONTRACT §13),
 * one client at a time. Each round streams a fresh job from `--a` (the
 * process whose executor runs it), then, by `--mode`:
 *
 * - `resume`: drops the stream after `--take` content events, waits
 *   `--gap-ms`, and resumes with `Last-Event-ID` (same key and body) on
 *   `--target`: timed from sending the resume to its first event with
 *   content;
 * - `duplicate`: after `--take` content events, sends the same request
 *   (same key, no Last-Event-ID) to `--target` while the first goes on:
 *   timed from sending it to its first event with content.
 *
 * Every round is checked: what the client assembled (the first connection's
 * text + the resume's, or the duplicate's whole text) must be the fake's
 * reply, no SSE id twice; a round that is not counts as an error. Also
 * reports `fresh`, the first stream's own time to first token (the same
 * rounds), as the baseline.
 *
 * Prints `RESULT` with the summary (p50/p90/p99 in ms) of the timed
 * requests, `fresh` and the parity inputs.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { summarize } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const n = Number(args.n ?? 30);
const warm = Number(args.warmup ?? 5);
const take = Number(args.take ?? 3);
const gapMs = Number(args['gap-ms'] ?? 0);
const mode = args.mode === 'duplicate' ? 'duplicate' : 'resume';
const expected = args.expect ?? '';
const body = args.body!;
const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream', ...(args.headers ? (JSON.parse(args.headers) as Record<string, string>) : {}) };
const pools = new Map<string, Pool>();
const poolOf = (url: string): Pool => {
  let p = pools.get(url);
  if (!p) pools.set(url, (p = new Pool(url, { connections: 2, pipelining: 1 })));
  return p;
};
const tag = `${process.pid}-${Date.now().toString(36)}`;

interface Event {
  readonly id: string | null;
  readonly text: string;
  readonly done: boolean;
  readonly error: boolean;
}

function parse(block: string): Event | null {
  const lines = block.split(/\r?\n/);
  const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
  if (data === '') return null;
  const id = lines.find((l) => l.startsWith('id:'))?.slice(3).trim() ?? null;
  const error = lines.some((l) => l.startsWith('event: error'));
  if (data === '[DONE]') return { id, text: '', done: true, error };
  try {
    const c = (JSON.parse(data) as { choices?: { delta?: { content?: unknown } }[] }).choices?.[0]?.delta?.content;
    return { id, text: typeof c === 'string' ? c : '', done: false, error };
  } catch {
    return { id, text: '', done: false, error: true };
  }
}

/** One streamed request; `onEvent` returns false to drop the connection. Resolves with the time of the first content event. */
async function stream(url: string, h: Record<string, string>, onEvent: (e: Event) => boolean): Promise<{ status: number; firstMs: number }> {
  const s = performance.now();
  let first = Number.NaN;
  const controller = new AbortController();
  const res = await poolOf(url).request({ method: 'POST', path: '/v1/chat/completions', headers: h, body, signal: controller.signal });
  let buf = '';
  try {
    for await (const piece of res.body) {
      buf += (piece as Buffer).toString('utf8');
      let cut: number;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const e = parse(buf.slice(0, cut));
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        if (e === null) continue;
        if (Number.isNaN(first) && e.text !== '') first = performance.now() - s;
        if (!onEvent(e)) {
          controller.abort();
          return { status: res.statusCode, firstMs: first };
        }
      }
    }
  } catch (e) {
    if (!controller.signal.aborted) throw e;
  }
  return { status: res.statusCode, firstMs: first };
}

const timed: number[] = [];
const fresh: number[] = [];
let errors = 0;
let answered = 0;
let firstError: string | undefined;
const t0 = performance.now();
for (let i = 0; i < warm + n; i++) {
  const h = { ...headers, 'idempotency-key': `resume-${tag}-${i}` };
  const got: Event[] = [];
  const again: Event[] = [];
  let problem: string | null = null;
  let ms = Number.NaN;
  let freshMs = Number.NaN;
  try {
    let content = 0;
    let duplicate: Promise<{ status: number; firstMs: number }> | null = null;
    const first = stream(args.a!, h, (e) => {
      got.push(e);
      if (e.text !== '') content++;
      if (content < take) return true;
      if (mode === 'resume') return false;
      duplicate ??= stream(args.target!, h, (d) => (again.push(d), true));
      return true;
    });
    freshMs = (await first).firstMs;
    if (mode === 'resume') {
      if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      const lastId = got.at(-1)?.id;
      if (!lastId) throw new Error('no id on the first stream');
      const r = await stream(args.target!, { ...h, 'last-event-id': lastId }, (e) => (again.push(e), true));
      ms = r.firstMs;
      const text = [...got, ...again].map((e) => e.text).join('');
      const ids = [...got, ...again].map((e) => e.id);
      if (r.status !== 200 || text !== expected || new Set(ids).size !== ids.length || !again.at(-1)?.done || again.some((e) => e.error)) problem = `resume: status ${r.status}, text ${JSON.stringify(text)}, ${ids.length} ids`;
    } else {
      if (duplicate === null) throw new Error(`the first stream ended before ${take} content events`);
      const r = await (duplicate as Promise<{ status: number; firstMs: number }>);
      ms = r.firstMs;
      const text = again.map((e) => e.text).join('');
      if (r.status !== 200 || text !== expected || !again.at(-1)?.done || again.some((e) => e.error)) problem = `duplicate: status ${r.status}, text ${JSON.stringify(text)}`;
    }
  } catch (e) {
    problem = String(e);
  }
  if (problem === null && Number.isFinite(ms)) answered++;
  else {
    errors++;
    firstError ??= problem ?? 'no content';
  }
  if (i >= warm && problem === null && Number.isFinite(ms)) {
    timed.push(ms);
    fresh.push(freshMs);
  }
}
for (const p of pools.values()) await p.close();
const seconds = (performance.now() - t0) / 1000;
const f = summarize(fresh, seconds);
emitResult({
  ...summarize(timed, seconds, errors),
  fresh: { p50: f.p50, p99: f.p99 },
  answered2xx: answered,
  cutOff: 0,
  ...(firstError === undefined ? {} : { firstError }),
});
