/**
 * `node --import tsx bench/trace-chat.ts [--n 200]`: where the time of one
 * `POST /v1/chat/completions` goes, step by step, on PostgreSQL and SQLite.
 *
 * In one process: the app (`buildApp`), an executor (`Runtime`), the fake
 * provider, and a client sending one request at a time over a kept-alive
 * connection. The store is wrapped in a Proxy that timestamps every call,
 * each provider's `call` is timestamped, and on PostgreSQL every
 * `pg.Client#query` is counted (round trips). Requests are strictly
 * sequential, so every event inside a request's window belongs to it (the
 * executor's background loops included: they are part of the cost).
 *
 * Prints, per database, the median offset (from the client sending) at which
 * each step starts and ends, its median duration, and the median count per
 * request. Nothing here changes the product; it only observes it.
 */
import { performance } from 'node:perf_hooks';
import { mkdirSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { Pool } from 'undici';
import { defineConfig } from '../src/config/config.ts';
import { buildApp } from '../src/http/build-app.ts';
import { createRuntime } from '../src/runtime/runtime.ts';
import { openStore } from '../src/store/open-store.ts';
import { startFakeProvider } from '../src/testing/fake-provider-server.ts';
import { BENCH_DIR, argMap } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';

const args = argMap(process.argv.slice(2));
const N = Number(args.n ?? 200);
/** `--stream <ms>`: send `stream: true`, the fake streaming four content chunks this many ms apart; the total is to the first content event. */
const STREAM_DELAY = args.stream === undefined ? null : Number(args.stream);
const WARM = 30;

interface Ev { readonly name: string; readonly s: number; readonly e: number }
let events: Ev[] = [];
const ev = (name: string, s: number, e = performance.now()): void => void events.push({ name, s, e });

// Round trips to PostgreSQL (every pg client, pooled or not).
const origQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown }).query = function (this: unknown, ...a: unknown[]) {
  const s = performance.now();
  const r = origQuery.apply(this, a);
  if (r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(() => ev('pg.query', s), () => ev('pg.query', s));
  return r;
} as never;

function traced<T extends object>(target: T): T {
  return new Proxy(target, {
    get(t, key) {
      const v = Reflect.get(t, key, t) as unknown;
      if (typeof v !== 'function' || typeof key !== 'string') return v;
      return (...a: unknown[]) => {
        const s = performance.now();
        const r = (v as (...x: unknown[]) => unknown).apply(t, a);
        if (r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(() => ev(`store.${key}`, s), () => ev(`store.${key}!`, s));
        return r;
      };
    },
  });
}

const med = (xs: number[]): number => {
  if (xs.length === 0) return Number.NaN;
  const a = [...xs].sort((x, y) => x - y);
  return a[Math.floor(a.length / 2)]!;
};

async function traceOne(label: string, db: string): Promise<void> {
  const fake = await startFakeProvider({ host: '127.0.0.1', port: 0 });
  fake.setDefault(STREAM_DELAY === null ? { reply: 'ok' } : { chunks: ['The', ' quick', ' brown', ' fox'], chunkDelayMs: STREAM_DELAY });
  const config = defineConfig({
    databaseUrl: db,
    apiKeys: { tok_trace: 'trace' },
    providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'fake-model', apiKey: 'k', timeoutMs: 20_000 } },
    routes: { summarize: { providers: ['primary'] } },
  });
  const raw = await openStore(db, { poolSize: 10 });
  await raw.migrate();
  const store = traced(raw);
  const runtime = await createRuntime({ config, store });
  // Each provider's `call` timed through a Proxy of our own (the runtime's providers are tracing Proxies:
  // assigning `call` would land on their target and recurse through them).
  const providers = runtime.providers as Map<string, (typeof runtime.providers extends ReadonlyMap<string, infer P> ? P : never)>;
  for (const [name, p] of providers) {
    providers.set(name, new Proxy(p, {
      get(t, key) {
        if (key === 'call') {
          return async (req: Parameters<typeof t.call>[0]) => {
            const s = performance.now();
            const out = await t.call(req);
            ev('provider.call', s);
            return out;
          };
        }
        if (key === 'stream') {
          return async (req: Parameters<typeof t.stream>[0], onDelta: Parameters<typeof t.stream>[1]) => {
            const s = performance.now();
            let first = true;
            const out = await t.stream(req, (d) => {
              if (first && d.type === 'text' && d.text !== '') {
                first = false;
                ev('provider.first_text', s);
              }
              onDelta(d);
            });
            ev('provider.stream', s);
            return out;
          };
        }
        const v = Reflect.get(t, key, t);
        return typeof v === 'function' ? v.bind(t) : v;
      },
    }));
  }
  const executor = runtime.createExecutor({ pollMs: 1000 });
  await executor.start();
  const app = buildApp({ store, config, executor });
  app.addHook('onRequest', async () => ev('http.onRequest', performance.now()));
  app.addHook('onSend', async (_req, _reply, payload) => {
    ev('http.onSend', performance.now());
    return payload;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const client = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
  const body = JSON.stringify({ model: 'summarize', ...(STREAM_DELAY === null ? {} : { stream: true }), messages: [{ role: 'user', content: 'Summarize: the quick brown fox.' }] });
  const rows: { total: number; evs: Ev[] }[] = [];
  for (let i = 0; i < WARM + N; i++) {
    events = [];
    const t0 = performance.now();
    const res = await client.request({
      method: 'POST', path: '/v1/chat/completions', body,
      headers: { authorization: 'Bearer tok_trace', 'content-type': 'application/json', 'idempotency-key': `trace-${label}-${Date.now()}-${i}` },
    });
    let total: number;
    if (STREAM_DELAY === null) {
      await res.body.text();
      total = performance.now() - t0;
    } else {
      // To the first SSE event with content; the rest of the stream read out after.
      total = Number.NaN;
      for await (const chunk of res.body) {
        if (Number.isNaN(total) && /"content":"[^"]/.test(String(chunk))) {
          total = performance.now() - t0;
          ev('client.first_content', t0 + total);
        }
      }
    }
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    if (i >= WARM) rows.push({ total, evs: events.map((e) => ({ ...e, s: e.s - t0, e: e.e - t0 })) });
    await new Promise((r) => setTimeout(r, 5)); // let the background settle out of this request's window
  }
  await client.close();
  await app.close();
  await executor.stop();
  await runtime.close?.(100);
  await raw.close().catch(() => {});
  await fake.close();

  const names = [...new Set(rows.flatMap((r) => r.evs.map((e) => e.name)))];
  const out: string[] = [`\n## ${label}: ${N} sequential requests, median total ${med(rows.map((r) => r.total)).toFixed(2)} ms (client send → ${STREAM_DELAY === null ? 'body read' : `first content, chunks ${STREAM_DELAY} ms apart`})\n`];
  out.push('| step | per request | first starts at (ms) | first ends at (ms) | last ends at (ms) | median duration (ms, each) |', '| --- | ---: | ---: | ---: | ---: | ---: |');
  const order = names
    .map((n) => ({ n, start: med(rows.map((r) => r.evs.find((e) => e.name === n)?.s ?? Number.NaN).filter(Number.isFinite)) }))
    .sort((a, b) => a.start - b.start);
  for (const { n, start } of order) {
    const perReq = rows.map((r) => r.evs.filter((e) => e.name === n));
    const end = med(perReq.filter((x) => x.length > 0).map((x) => x[x.length - 1]!.e));
    const firstEnd = med(perReq.filter((x) => x.length > 0).map((x) => x[0]!.e));
    const dur = med(perReq.flat().map((e) => e.e - e.s));
    out.push(`| ${n} | ${med(perReq.map((x) => x.length))} | ${start.toFixed(2)} | ${firstEnd.toFixed(2)} | ${end.toFixed(2)} | ${dur.toFixed(2)} |`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

const pgUrl = await recreateDatabase('onejob_bench_trace');
mkdirSync(resolve(BENCH_DIR, '.scratch'), { recursive: true });
const sqlitePath = resolve(BENCH_DIR, '.scratch', 'trace.db');
for (const s of ['', '-wal', '-shm']) rmSync(sqlitePath + s, { force: true });
try {
  await traceOne('PostgreSQL', pgUrl);
  await traceOne('SQLite', `sqlite:${sqlitePath}`);
} finally {
  await dropDatabase('onejob_bench_trace');
  for (const s of ['', '-wal', '-shm']) rmSync(sqlitePath + s, { force: true });
}
process.exit(0);
