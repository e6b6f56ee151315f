/**
 * Bad input against the API processes, directly (not through the load
 * balancer, so every answer is onejob's own): fast-check generated requests
 * over every endpoint (bodies, headers, paths, query strings) and raw sockets
 * for broken HTTP (truncated bodies, invalid UTF-8, huge headers, bad
 * framing, slow clients).
 *
 * Paths are mutated in the spelling families of CONTRACT §3 (percent-encoded
 * letters and digits, `//`, `/./`, `/x/../`, upper case, a trailing slash,
 * `;params`, `%2F`) and sent exactly as written.
 *
 * Asserts: no 5xx answer, no 2xx to a request without a valid credential
 * (outside the open operations routes), no crash (same pids, /healthz
 * answers), no change to stored jobs of other owners and no job from a
 * rejected request (from the event log), and RSS that does not keep growing
 * across rounds.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import pg from 'pg';
import { request as httpRequest } from 'node:http';
import { rssBytes, sleep, type ManagedProcess } from './cluster.ts';
import { createApiTokenAuthenticator } from '../src/http/api-token-auth.ts';
import { routedPathOf } from '../src/http/build-app.ts';

/** Options of {@link runFuzz}. */
export interface FuzzOptions {
  readonly apiUrls: readonly string[];
  readonly apis: readonly ManagedProcess[];
  readonly databaseUrl: string;
  /** Generated requests per round (per API process). */
  readonly requestsPerRound: number;
  readonly rounds: number;
  readonly seed: number;
  readonly log: (line: string) => void;
}

/** One finding of the fuzzer. */
export interface FuzzFinding {
  readonly kind: 'server_error' | 'unauthenticated_success' | 'crash' | 'stored_change' | 'memory_growth' | 'unresponsive';
  readonly message: string;
  readonly excerpt: readonly unknown[];
}

/** What {@link runFuzz} did and found. */
export interface FuzzReport {
  readonly requests: number;
  readonly rawCases: number;
  readonly findings: readonly FuzzFinding[];
  readonly rssMiB: Readonly<Record<string, readonly number[]>>;
  readonly statuses: Readonly<Record<string, number>>;
}

const TOKEN = 'tok_mallory';
const OWNER = 'mallory';

interface FuzzRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string | undefined;
}

/** The server's own reading of a bearer credential: what counts as the valid token. */
const authenticate = createApiTokenAuthenticator({ [TOKEN]: OWNER });

/** Routes that answer without a token (CONTRACT §3 operations, the API document, the dashboard). */
function isOpenPath(path: string): boolean {
  const routed = routedPathOf(path);
  return ['/healthz', '/readyz', '/metrics', '/openapi.json'].includes(routed) || routed === '/ui' || routed.startsWith('/ui/');
}

/** Whether a request carries a credential the server must accept (Bearer, or x-api-key on /v1/messages only). */
export function hasValidCredential(r: { readonly path: string; readonly headers: Readonly<Record<string, string>> }): boolean {
  if (r.headers.authorization !== undefined) return authenticate(r.headers.authorization) !== null;
  return r.headers['x-api-key'] === TOKEN && routedPathOf(r.path) === '/v1/messages';
}

const hex = (c: string): string => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`;

/** The spelling families of CONTRACT §3, each a rewrite of a `/v1/…` path. */
const SPELLINGS: readonly ((path: string) => string)[] = [
  (p) => p.replace(/^\/v1/, '/%761'),
  (p) => p.replace(/^\/v1/, '/v%31'),
  (p) => p.replace(/^\/v1/, '/%56%31'),
  (p) => p.replace(/^\/v1\/([a-z])/, (_m, c: string) => `/v1/${hex(c)}`),
  (p) => p.replace(/\/([a-z])([a-z]*)$/, (_m, c: string, rest: string) => `/${hex(c).toUpperCase()}${rest}`),
  (p) => `/${p}`,
  (p) => p.replace(/^\/v1\//, '/v1//'),
  (p) => `/.${p}`,
  (p) => p.replace(/^\/v1\//, '/v1/./'),
  (p) => p.replace(/^\/v1\//, '/v1/%2e/'),
  (p) => `/x/..${p}`,
  (p) => p.replace(/^\/v1\//, '/v1/x/../'),
  (p) => p.replace(/^\/v1\//, '/v1/x/%2E%2E/'),
  (p) => p.replace(/^\/v1/, '/V1'),
  (p) => p.replace(/^[^?]*/, (x) => x.toUpperCase()),
  (p) => p.replace(/^([^?]*)/, '$1/'),
  (p) => p.replace(/^([^?]*)/, '$1;jsessionid=1'),
  (p) => p.replace(/^\/v1/, '/v1;x=1'),
  (p) => p.replace(/^\/v1\//, '/v1%2F'),
  (p) => p.replace(/^\/v1\//, '/v1%2f'),
  (p) => `/%2F${p.slice(1)}`,
  (p) => p.replace(/^\/v1\//, '/v1\\'),
];

const weird = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('', ' ', '..', '%', '%00', '%ff', '../../etc/passwd', 'job_', 'att_', 'null', 'undefined', '0', '-1', '1e309', 'NaN', '__proto__', 'constructor', '\u0000', '💥', 'a'.repeat(5000)),
);

function requestArbitrary(ids: { mine: string[]; theirs: string[]; attempts: string[] }): fc.Arbitrary<FuzzRequest> {
  const id = fc.oneof(
    fc.constantFrom(...(ids.mine.length > 0 ? ids.mine : ['job_x'])),
    fc.constantFrom(...(ids.theirs.length > 0 ? ids.theirs : ['job_y'])),
    fc.constantFrom(...(ids.attempts.length > 0 ? ids.attempts : ['att_z'])),
    weird.map((s) => encodeURIComponent(s)),
  );
  const json = fc.jsonValue({ maxDepth: 4 });
  const message = fc.record({ role: fc.oneof(fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer'), fc.string()), content: fc.oneof(fc.string(), json) }, { requiredKeys: [] });
  const createBody = fc.record({
    route: fc.oneof(fc.constantFrom('plain', 'hedged', 'nope'), fc.string(), json),
    input: fc.oneof(json, fc.record({ messages: fc.array(message, { maxLength: 3 }) })),
    metadata: fc.oneof(fc.object(), json),
    extra: json,
  }, { requiredKeys: [] });
  const resolveBody = fc.record({ state: fc.oneof(fc.constantFrom('succeeded', 'failed', 'cancelled', 'unknown', 'running'), fc.string(), json), result: json, error: json }, { requiredKeys: [] });
  const chatBody = fc.record({
    model: fc.oneof(fc.constantFrom('plain', 'route:hedged', 'route:', 'gpt-4o'), fc.string(), json),
    messages: fc.oneof(fc.array(message, { maxLength: 4 }), json),
    stream: fc.oneof(fc.boolean(), json), temperature: fc.oneof(fc.double(), json), max_tokens: fc.oneof(fc.integer(), json),
  }, { requiredKeys: [] });
  const body = (specific: fc.Arbitrary<unknown>): fc.Arbitrary<string | undefined> => fc.oneof(
    { weight: 5, arbitrary: specific.map((b) => JSON.stringify(b)) },
    { weight: 2, arbitrary: json.map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: fc.string() },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom('{', '{"route":', 'null', '[]', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}', '{"a":1,"a":2}', '1'.repeat(400), '{"route":"plain","input":' + '['.repeat(5000) + ']'.repeat(5000) + '}') },
  );
  const query = fc.dictionary(fc.constantFrom('wait', 'limit', 'state', 'cursor', 'x', 'wait[]'), weird, { maxKeys: 3 }).map((q) => {
    const s = Object.entries(q).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
    return s === '' ? '' : `?${s}`;
  });
  const endpoint: fc.Arbitrary<[string, string, string | undefined]> = fc.oneof(
    fc.tuple(fc.constant('POST'), fc.constant('/v1/jobs'), body(createBody)),
    fc.tuple(fc.constant('GET'), fc.tuple(id, query).map(([i, q]) => `/v1/jobs/${i}${q}`), fc.constant(undefined)),
    fc.tuple(fc.constant('GET'), query.map((q) => `/v1/jobs${q}`), fc.constant(undefined)),
    fc.tuple(fc.constant('GET'), id.map((i) => `/v1/jobs/${i}/attempts`), fc.constant(undefined)),
    fc.tuple(fc.constant('POST'), id.map((i) => `/v1/jobs/${i}/attempts`), body(fc.record({ provider: fc.oneof(fc.constantFrom('p1', 'p2', 'p3'), json) }, { requiredKeys: [] }))),
    fc.tuple(fc.constant('POST'), id.map((i) => `/v1/attempts/${i}/resolve`), body(resolveBody)),
    fc.tuple(fc.constant('POST'), id.map((i) => `/v1/jobs/${i}/cancel`), body(json)),
    fc.tuple(fc.constant('POST'), fc.constant('/v1/chat/completions'), body(chatBody)),
    fc.tuple(fc.constant('POST'), fc.constant('/v1/messages'), body(fc.record({ model: fc.constantFrom('plain', 'hedged'), max_tokens: fc.integer({ min: 1, max: 64 }), messages: fc.array(message, { minLength: 1, maxLength: 2 }) }))),
    fc.tuple(fc.constant('GET'), fc.constantFrom('/v1/events', '/v1/usage', '/v1/certifications', '/v1/models'), fc.constant(undefined)),
    fc.tuple(fc.constantFrom('GET', 'POST'), fc.constantFrom('/healthz', '/readyz', '/metrics', '/openapi.json', '/v1', '/v1/', '//v1/jobs', '/v1/jobs/', '/V1/JOBS'), body(json)),
    fc.tuple(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), weird.map((s) => `/${encodeURIComponent(s)}`), body(json)),
  );
  const headerValue = fc.oneof(weird, fc.string({ minLength: 1, maxLength: 300 }));
  return fc.record({
    endpoint,
    otherMethod: fc.option(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), { freq: 8 }),
    auth: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${TOKEN}`) }, { weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: headerValue }, { weight: 2, arbitrary: fc.constantFrom('Bearer ', 'bearer tok_mallory', `Bearer ${TOKEN} `, 'Basic dG9rOg==', `Bearer ${TOKEN}x`, `Bearer ${TOKEN.toUpperCase()}`, `Bearer  ${TOKEN.slice(0, -1)}`) }),
    apiKey: fc.option(fc.constantFrom(TOKEN, `${TOKEN}x`, ''), { freq: 6 }),
    // A path spelled another way (CONTRACT §3): sent exactly as written.
    spelling: fc.option(fc.constantFrom(...SPELLINGS), { freq: 2 }),
    key: fc.oneof({ weight: 5, arbitrary: fc.string({ minLength: 1, maxLength: 20 }).map((s) => `fz-${s}`) }, { weight: 1, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: headerValue }),
    contentType: fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: fc.constantFrom('text/plain', 'application/json; charset=latin1', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json, text/plain', 'APPLICATION/JSON', '*/*') }, { weight: 1, arbitrary: headerValue }),
    extra: fc.dictionary(fc.constantFrom('x-forwarded-for', 'accept', 'accept-encoding', 'content-encoding', 'onejob-job-id', 'x-request-id', 'expect', 'range'), headerValue, { maxKeys: 2 }),
  }).map(({ endpoint: [method, plainPath, b], otherMethod, auth, apiKey, spelling, key, contentType, extra }) => {
    const headers: Record<string, string> = { ...extra };
    const path = spelling !== null && plainPath.startsWith('/v1') ? spelling(plainPath) : plainPath;
    // x-api-key alone on some requests (the credential of /v1/messages only).
    if (auth !== undefined && !(apiKey !== null && auth !== `Bearer ${TOKEN}`)) headers.authorization = auth;
    if (apiKey !== null) headers['x-api-key'] = apiKey;
    if (key !== undefined) headers['idempotency-key'] = key;
    if (contentType !== undefined && b !== undefined) headers['content-type'] = contentType;
    return { method: otherMethod ?? method, path, headers, body: b };
  });
}

/** Raw-socket cases: broken HTTP that a client library would not send. */
function rawCases(): { name: string; chunks: (Buffer | string)[]; pauseMs?: number; endAfter?: boolean }[] {
  const auth = `Authorization: Bearer ${TOKEN}\r\n`;
  const head = (path: string, extra = ''): string => `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n${extra}`;
  const bad = Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1]);
  const body = (b: Buffer | string): Buffer => Buffer.isBuffer(b) ? b : Buffer.from(b);
  const withLen = (path: string, b: Buffer, extra = ''): Buffer => Buffer.concat([Buffer.from(`${head(path, `Idempotency-Key: fz-raw-${Math.random().toString(36).slice(2)}\r\n${extra}`)}Content-Length: ${b.length}\r\nConnection: close\r\n\r\n`), b]);
  return [
    { name: 'truncated body, then close', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-trunc\r\n')}Content-Length: 200\r\n\r\n{"route":"plain","input":{"mess`], endAfter: true },
    { name: 'truncated body, client stalls', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-trunc2\r\n')}Content-Length: 200\r\n\r\n{"route":"pl`], pauseMs: 3000, endAfter: true },
    { name: 'invalid UTF-8 in the body', chunks: [withLen('/v1/jobs', Buffer.concat([body('{"route":"plain","input":"'), bad, body('"}')]))] },
    { name: 'invalid UTF-8 in a resolve result', chunks: [withLen('/v1/attempts/att_x/resolve', Buffer.concat([body('{"state":"succeeded","result":"'), bad, body('"}')]))] },
    { name: 'invalid UTF-8 in the chat body', chunks: [withLen('/v1/chat/completions', Buffer.concat([body('{"model":"plain","messages":[{"role":"user","content":"'), bad, body('"}]}')]))] },
    { name: 'invalid UTF-8 in Idempotency-Key', chunks: [Buffer.concat([body(`${head('/v1/jobs')}Idempotency-Key: `), bad, body('\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}')])] },
    { name: 'invalid UTF-8 in the path', chunks: [Buffer.concat([body('GET /v1/jobs/'), bad, body(` HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\n\r\n`)])] },
    { name: 'huge header (100 KiB)', chunks: [`GET /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}X-Big: ${'a'.repeat(100 * 1024)}\r\nConnection: close\r\n\r\n`] },
    { name: 'huge Idempotency-Key (20 KiB)', chunks: [withLen('/v1/jobs', body('{"route":"plain","input":1}'), `X-Pad: ${'b'.repeat(10)}\r\nIdempotency-Key: ${'k'.repeat(20 * 1024)}\r\n`)] },
    { name: '3000 headers', chunks: [`GET /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}${Array.from({ length: 3000 }, (_, i) => `X-H${i}: v\r\n`).join('')}Connection: close\r\n\r\n`] },
    { name: 'body larger than the limit (declared 50 MB, 2 MiB sent)', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-big\r\n')}Content-Length: 50000000\r\n\r\n`, 'x'.repeat(2 * 1024 * 1024)], endAfter: true },
    { name: 'bad chunk size', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-chunk\r\n')}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`] },
    { name: 'Content-Length and Transfer-Encoding', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-smuggle\r\n')}Content-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`] },
    { name: 'two Content-Length headers', chunks: [`${head('/v1/jobs', 'Idempotency-Key: fz-cl2\r\n')}Content-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}x`] },
    { name: 'garbage request line', chunks: ['\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003 garbage\r\n\r\n'] },
    { name: 'HTTP/1.0 without Host', chunks: [`GET /v1/jobs HTTP/1.0\r\n${auth}\r\n`] },
    { name: 'pipelined requests', chunks: [`GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/jobs?limit=1 HTTP/1.1\r\nHost: x\r\n${auth}\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`] },
    { name: 'gzip content-encoding with a plain body', chunks: [withLen('/v1/jobs', body('{"route":"plain","input":1}'), 'Content-Encoding: gzip\r\n')] },
    { name: 'NUL in a header value', chunks: [`GET /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}X-N: a\u0000b\r\nConnection: close\r\n\r\n`] },
  ];
}

/**
 * One request over node:http on a fresh connection; resolves with the status.
 * Rejects with `ERR_INVALID_*` when node refuses to send the request (bad header characters).
 */
function send(url: string, r: FuzzRequest, timeoutMs: number): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    // The path as written (a URL would normalise dot segments away): what `curl --path-as-is` sends.
    const req = httpRequest({ host: hostname, port: Number(port), path: r.path, method: r.method, headers: r.headers, agent: false, timeout: timeoutMs }, (res) => {
      // An event stream (a feed) answers with its head: that is all the fuzzer needs.
      if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        res.destroy();
        resolve(res.statusCode ?? 0);
        return;
      }
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer in ${timeoutMs} ms`), { code: 'FUZZ_TIMEOUT' })));
    req.on('error', reject);
    if (r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD') req.end(r.body);
    else req.end();
  });
}

/** Sends raw bytes; resolves with every status line seen (or none). */
function rawExchange(url: string, chunks: readonly (Buffer | string)[], pauseMs = 0, endAfter = false): Promise<number[]> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let text = '';
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve([...text.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1])));
    };
    const timer = setTimeout(done, 8000 + pauseMs);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    socket.on('error', done);
    socket.on('close', done);
    socket.on('connect', async () => {
      for (const c of chunks) {
        if (socket.destroyed) break;
        socket.write(c);
      }
      if (pauseMs > 0) await sleep(pauseMs);
      if (endAfter && !socket.destroyed) socket.end();
    });
  });
}

/** A slow client: sends a request head one byte at a time; returns whether /healthz stayed fast meanwhile. */
async function slowClients(url: string, sockets: number, durationMs: number): Promise<{ worstHealthMs: number }> {
  const { hostname, port } = new URL(url);
  const head = `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nIdempotency-Key: fz-slow\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"route":`;
  const open = Array.from({ length: sockets }, () => {
    const s = connect(Number(port), hostname);
    s.on('error', () => undefined);
    let i = 0;
    const t = setInterval(() => {
      if (s.destroyed || i >= head.length) return;
      s.write(head[i++]!);
    }, 150);
    return { s, t };
  });
  let worst = 0;
  const end = Date.now() + durationMs;
  while (Date.now() < end) {
    const t0 = Date.now();
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) });
      await res.body?.cancel();
    } catch {
      worst = Math.max(worst, 5000);
    }
    worst = Math.max(worst, Date.now() - t0);
    await sleep(300);
  }
  for (const { s, t } of open) {
    clearInterval(t);
    s.destroy();
  }
  return { worstHealthMs: worst };
}

/** Runs the fuzzer against every API process. */
export async function runFuzz(o: FuzzOptions): Promise<FuzzReport> {
  const findings: FuzzFinding[] = [];
  const statuses: Record<string, number> = {};
  const rss: Record<string, number[]> = {};
  const pids = o.apis.map((p) => p.pid);
  const db = new pg.Client({ connectionString: o.databaseUrl });
  await db.connect();
  let requests = 0;
  let raw = 0;
  /** Server errors already reported (method, path, status): one finding each, at most 20. */
  const seen = new Set<string>();
  const keysAnswered = new Map<string, number[]>();
  /** 2xx answers to requests without a valid credential (each one a finding, at most 20). */
  const unauthenticated: string[] = [];

  try {
    const { rows: [mark] } = await db.query<{ max: number | null; now: Date }>('SELECT max(id)::int AS max, now() AS now FROM job_events');
    const startEvent = mark?.max ?? 0;
    const startTime = mark!.now;
    const ids = {
      mine: [] as string[],
      theirs: (await db.query<{ id: string }>(`SELECT id FROM jobs WHERE owner_id <> $1 ORDER BY random() LIMIT 20`, [OWNER])).rows.map((r) => r.id),
      attempts: (await db.query<{ id: string }>(`SELECT id FROM attempts WHERE owner_id <> $1 ORDER BY random() LIMIT 20`, [OWNER])).rows.map((r) => r.id),
    };
    const sample = (): void => {
      for (const [i, p] of o.apis.entries()) {
        const v = rssBytes(p.pid);
        if (v !== null) (rss[p.name] ??= []).push(Math.round(v / 1024 / 1024));
        void i;
      }
    };
    sample();

    for (let round = 0; round < o.rounds; round++) {
      const mine = (await db.query<{ id: string }>(`SELECT id FROM jobs WHERE owner_id = $1 ORDER BY random() LIMIT 20`, [OWNER])).rows.map((r) => r.id);
      const myAttempts = (await db.query<{ id: string }>(`SELECT id FROM attempts WHERE owner_id = $1 ORDER BY random() LIMIT 20`, [OWNER])).rows.map((r) => r.id);
      ids.mine = mine;
      const arb = requestArbitrary({ mine, theirs: ids.theirs, attempts: [...ids.attempts, ...myAttempts] });
      for (const [ai, url] of o.apiUrls.entries()) {
        const reqs = fc.sample(arb, { numRuns: o.requestsPerRound, seed: o.seed + round * 101 + ai });
        let next = 0;
        const worker = async (): Promise<void> => {
          while (next < reqs.length) {
            const r = reqs[next++]!;
            let status: number;
            const started = Date.now();
            const watch = setTimeout(() => o.log(`still waiting after 20 s: ${r.method} ${r.path.slice(0, 120)} ${JSON.stringify(r.headers).slice(0, 300)} body ${String(r.body).slice(0, 100)}`), 20_000);
            try {
              status = await send(url, r, 15_000);
              clearTimeout(watch);
              const key = r.headers['idempotency-key'];
              if (key !== undefined) keysAnswered.set(key, [...(keysAnswered.get(key) ?? []), status]);
            } catch (e) {
              clearTimeout(watch);
              const err = e as Error & { code?: string };
              // undici refuses to send some headers (invalid characters): not a server answer.
              if (err.code?.startsWith('ERR_INVALID_') === true || err.code === 'ERR_HTTP_INVALID_HEADER_VALUE' || err.code === 'ERR_UNESCAPED_CHARACTERS') {
                statuses.refused_by_client = (statuses.refused_by_client ?? 0) + 1;
                continue;
              }
              statuses[`error_${err.code ?? err.name}`] = (statuses[`error_${err.code ?? err.name}`] ?? 0) + 1;
              if (Date.now() - started > 3000) o.log(`fuzz request gave up after ${Date.now() - started} ms (${err.name}: ${err.message}): ${r.method} ${r.path.slice(0, 120)} ${JSON.stringify(r.headers).slice(0, 200)}`);
              // A key sent without an answer may or may not have created its job.
              const key = r.headers['idempotency-key'];
              if (key !== undefined) keysAnswered.set(key, [...(keysAnswered.get(key) ?? []), 0]);
              continue;
            }
            requests++;
            if (Date.now() - started > 3000) o.log(`slow fuzz answer (${Date.now() - started} ms, ${status}): ${r.method} ${r.path.slice(0, 120)} ${JSON.stringify(r.headers).slice(0, 200)}`);
            statuses[String(status)] = (statuses[String(status)] ?? 0) + 1;
            const shape = `${r.method} ${r.path.replace(/\?.*$/, '')} ${status}`;
            if (status >= 200 && status < 300 && !hasValidCredential(r) && !isOpenPath(r.path) && unauthenticated.length < 20) {
              unauthenticated.push(shape);
              findings.push({ kind: 'unauthenticated_success', message: `${r.method} ${r.path.slice(0, 200)} answered ${status} without a valid credential`, excerpt: [{ method: r.method, path: r.path.slice(0, 300), headers: r.headers, body: r.body?.slice(0, 500) }] });
            }
            if (status >= 500 && !(status === 503 && r.path.startsWith('/readyz')) && !seen.has(shape) && seen.size < 20) {
              seen.add(shape);
              findings.push({ kind: 'server_error', message: `${r.method} ${r.path.slice(0, 200)} answered ${status}`, excerpt: [{ method: r.method, path: r.path.slice(0, 300), headers: r.headers, body: r.body?.slice(0, 500) }] });
            }
          }
        };
        await Promise.all(Array.from({ length: 8 }, worker));
      }
      for (const url of o.apiUrls) {
        for (const c of rawCases()) {
          raw++;
          const started = Date.now();
          const got = await rawExchange(url, c.chunks, c.pauseMs, c.endAfter);
          if (Date.now() - started > 3000 + (c.pauseMs ?? 0)) o.log(`slow raw case "${c.name}": ${Date.now() - started} ms, statuses ${got.join(',')}`);
          for (const s of got) statuses[`raw_${s}`] = (statuses[`raw_${s}`] ?? 0) + 1;
          if (got.some((s) => s >= 500)) findings.push({ kind: 'server_error', message: `raw case "${c.name}" answered ${got.join(', ')}`, excerpt: [{ case: c.name, first: String(c.chunks[0]).slice(0, 300) }] });
        }
      }
      if (round === 0) {
        const { worstHealthMs } = await slowClients(o.apiUrls[0]!, 50, 4000);
        if (worstHealthMs > 2000) findings.push({ kind: 'unresponsive', message: `with 50 slow clients, /healthz took ${worstHealthMs} ms`, excerpt: [] });
      }
      sample();
      o.log(`fuzz round ${round + 1}/${o.rounds}: ${requests} requests, ${raw} raw cases, RSS ${Object.entries(rss).map(([n, v]) => `${n} ${v[v.length - 1]} MiB`).join(', ')}`);
    }
    await sleep(500);

    // No crash: the same processes, still answering.
    for (const [i, p] of o.apis.entries()) {
      if (!p.running || p.pid !== pids[i]) findings.push({ kind: 'crash', message: `${p.name} (pid ${pids[i]}) is gone after fuzzing`, excerpt: [] });
      else {
        const ok = await fetch(`${o.apiUrls[i]}/healthz`, { signal: AbortSignal.timeout(3000) }).then((r) => r.ok, () => false);
        if (!ok) findings.push({ kind: 'crash', message: `${p.name} no longer answers /healthz after fuzzing`, excerpt: [] });
      }
    }
    // No change to other owners' stored jobs through the API, and nothing created by a rejected request.
    const { rows: events } = await db.query<{ id: number; owner_id: string; job_id: string; type: string; data: Record<string, unknown> }>(
      'SELECT id::int AS id, owner_id, job_id, type, data FROM job_events WHERE id > $1 ORDER BY id', [startEvent]);
    for (const ev of events) {
      if (ev.owner_id === OWNER) continue;
      const byApi = ev.type === 'job.cancelled' || ev.data.actor === 'api' || (ev.type === 'attempt.started' && ev.data.kind === 'manual');
      if (byApi) findings.push({ kind: 'stored_change', message: `during fuzzing (owner ${OWNER} only), job ${ev.job_id} of ${ev.owner_id} got ${ev.type} by the API (event ${ev.id})`, excerpt: [ev] });
    }
    const { rows: created } = await db.query<{ id: string; owner_id: string; idempotency_key: string }>(
      'SELECT id, owner_id, idempotency_key FROM jobs WHERE created_at >= $1', [startTime]);
    for (const j of created) {
      if (j.owner_id !== OWNER) {
        findings.push({ kind: 'stored_change', message: `job ${j.id} of ${j.owner_id} was created during fuzzing (only ${OWNER} was used)`, excerpt: [j] });
        continue;
      }
      const answers = keysAnswered.get(j.idempotency_key);
      if (answers !== undefined && answers.every((s) => s >= 400 && s < 500)) {
        findings.push({ kind: 'stored_change', message: `job ${j.id} exists for key ${JSON.stringify(j.idempotency_key)} although every request with that key was rejected (${answers.join(', ')})`, excerpt: [j] });
      }
    }
    // Memory: the last sample may not exceed the post-warm-up one by much.
    for (const [name, v] of Object.entries(rss)) {
      if (v.length < 3) continue;
      const warm = v[1]!;
      const last = v[v.length - 1]!;
      if (last > warm * 1.5 && last - warm > 100) findings.push({ kind: 'memory_growth', message: `${name} RSS grew from ${warm} MiB (after round 1) to ${last} MiB`, excerpt: [{ samples: v }] });
    }
  } finally {
    await db.end();
  }
  return { requests, rawCases: raw, findings, rssMiB: rss, statuses };
}
