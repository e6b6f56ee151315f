/**
 * CONTRACT §3 (v3): every `/v1/` route, however its path is spelled, is
 * authenticated exactly like the plain path. The routes are read from the
 * app itself (an `onRoute` hook), so a route added tomorrow is walked the
 * day it is added; each is tried in every spelling below (percent-encoded
 * letters and digits, `//`, `/./`, `/x/../`, upper case, a trailing slash,
 * `;params`, `%2F`), with real path parameters (an existing job and attempt
 * of the owner), in-process (`inject`) and over a real socket with the raw
 * path as written (`node:http`, as `curl --path-as-is` sends it; `fetch`
 * would normalise it). Without a token, with a wrong one, and with a valid
 * token in `x-api-key` where only `/v1/messages` accepts it: never 2xx,
 * nothing written to the database (row counts and the event log), no call
 * to the provider (the fake counts its requests). A read-only token reads
 * (a job, the list, the events feed) and every write is 403
 * `read_only_token`, changing nothing. SQLite and PostgreSQL.
 */
import { request as httpRequest } from 'node:http';
import Database from 'better-sqlite3';
import type { FastifyInstance, RouteOptions } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const ALICE = 'tok_alice_spellings_0123456789';
const READ_ONLY = 'tok_alice_viewer_0123456789';
const WRONG = 'tok_nobody_0123456789';

/** Routes that need no token (CONTRACT §3 operations, `/` redirecting to the dashboard, the API document, the dashboard's files). A new one must be added here on purpose. */
const OPEN_ROUTES = new Set(['/', '/healthz', '/readyz', '/metrics', '/openapi.json', '/ui', '/ui/', '/ui/*']);
/** Routes outside `/v1/` that need the same token (CONTRACT §14: the MCP gateway). Walked like the `/v1/` ones. */
const AUTHENTICATED_OUTSIDE_V1 = new Set(['/mcp']);
/** `/v1/` routes authenticated by a signature instead of a token (CONTRACT §11's task callback): a token, even a valid one, is 401 there. */
const SIGNED_ROUTES = new Set(['/v1/attempts/:id/callback']);

interface Route {
  readonly method: string;
  readonly url: string;
  readonly readOnlyAllowed: boolean;
}

/** A spelling of a path: its name and how it rewrites `/v1/…`. */
interface Spelling {
  readonly name: string;
  readonly spell: (path: string) => string;
}

const hex = (c: string): string => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
/** Rewrites the segments of a path (params already filled in) with `f(segment, index)`. */
const segments = (f: (s: string, i: number) => string) => (path: string): string => path.split('/').map((s, i) => (i === 0 ? s : f(s, i - 1))).join('/');

/** Every spelling: each is either routed to the same handler or answered by the not-found handler; both must authenticate. */
const SPELLINGS: readonly Spelling[] = [
  { name: 'plain', spell: (p) => p },
  { name: '%76 for the v (the issue: /%761/jobs)', spell: (p) => p.replace(/^\/v1/, '/%761') },
  { name: '%31 for the digit', spell: (p) => p.replace(/^\/v1/, '/v%31') },
  { name: 'the whole v1 segment encoded', spell: (p) => p.replace(/^\/v1/, '/%76%31') },
  { name: 'a letter encoded in every later segment', spell: segments((s, i) => (i === 0 || s.startsWith(':') || !/^[a-z]/.test(s) ? s : hex(s[0]!) + s.slice(1))) },
  { name: 'every character of the path encoded', spell: segments((s) => [...s].map(hex).join('')) },
  { name: 'every character encoded, lower-case hex', spell: segments((s) => [...s].map((c) => hex(c).toLowerCase()).join('')) },
  { name: '%56 (an encoded upper-case V)', spell: (p) => p.replace(/^\/v1/, '/%561') },
  { name: 'a leading //', spell: (p) => `/${p}` },
  { name: 'a // inside', spell: (p) => p.replace(/^\/v1\//, '/v1//') },
  { name: 'a leading /./', spell: (p) => `/.${p}` },
  { name: 'a /./ inside', spell: (p) => p.replace(/^\/v1\//, '/v1/./') },
  { name: 'an encoded /%2e/ inside', spell: (p) => p.replace(/^\/v1\//, '/v1/%2e/') },
  { name: 'a leading /x/../', spell: (p) => `/x/..${p}` },
  { name: 'a /x/../ inside', spell: (p) => p.replace(/^\/v1\//, '/v1/x/../') },
  { name: 'an encoded /x/%2e%2e/ inside', spell: (p) => p.replace(/^\/v1\//, '/v1/x/%2e%2e/') },
  { name: 'V1 in upper case', spell: (p) => p.replace(/^\/v1/, '/V1') },
  { name: 'the whole path in upper case', spell: (p) => p.toUpperCase() },
  { name: 'a trailing slash', spell: (p) => `${p}/` },
  { name: 'a ;param on the last segment', spell: (p) => `${p};x=1` },
  { name: 'a ;param on v1', spell: (p) => p.replace(/^\/v1/, '/v1;jsessionid=1') },
  { name: '%2F for the first slash after v1', spell: (p) => p.replace(/^\/v1\//, '/v1%2F') },
  { name: '%2F for every slash after v1', spell: (p) => `/v1${p.slice(3).replaceAll('/', '%2F')}` },
  { name: 'a leading %2F', spell: (p) => `/%2F${p.slice(1)}` },
  { name: 'a backslash after v1', spell: (p) => p.replace(/^\/v1\//, '/v1\\') },
  { name: 'a query string', spell: (p) => `${p}?x=1` },
];

/** An answer over the socket or in-process. */
interface Answer {
  readonly status: number;
  readonly body: string;
  readonly contentType: string;
}

/** One request over a fresh TCP connection with the path exactly as written; an event stream is answered by its head. */
function rawRequest(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 10_000 }, (res) => {
      const contentType = String(res.headers['content-type'] ?? '');
      if (contentType.startsWith('text/event-stream')) {
        res.destroy();
        resolve({ status: res.statusCode ?? 0, body: '', contentType });
        return;
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, contentType }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path}`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** The path of a route with its parameters filled in from real rows. */
function fill(url: string, ids: { job: string; attempt: string }): string {
  return url
    .replace(/^\/v1\/attempts\/:id/, `/v1/attempts/${ids.attempt}`)
    .replace(/:[A-Za-z_]+/g, ids.job)
    .replace(/\*$/, 'index.html');
}

/** A body that would do real work if it were accepted (a create, a resolve, a cancel). */
function bodyFor(method: string, url: string, key: string): { body?: string; headers: Record<string, string> } {
  if (method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS') return { headers: {} };
  const messages = [{ role: 'user', content: 'free tokens' }];
  const bodies: Record<string, unknown> = {
    '/v1/jobs': { route: 'chat', input: { messages } },
    '/v1/chat/completions': { model: 'chat', messages },
    '/v1/messages': { model: 'chat', max_tokens: 16, messages },
    '/v1/responses': { model: 'chat', input: 'free tokens' },
    '/v1/attempts/:id/resolve': { state: 'succeeded', result: { content: 'forged' } },
    '/v1/jobs/:id/attempts': { provider: 'primary' },
  };
  return { body: JSON.stringify(bodies[url] ?? {}), headers: { 'content-type': 'application/json', 'idempotency-key': key } };
}

/** Row counts and the newest event: anything a request could have written. */
interface Footprint {
  readonly jobs: number;
  readonly attempts: number;
  readonly events: number;
  readonly lastEvent: number;
  readonly versions: number;
}

const FOOTPRINT_SQL = `SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM attempts) AS attempts,
  (SELECT count(*) FROM job_events) AS events, (SELECT coalesce(max(id), 0) FROM job_events) AS "lastEvent",
  (SELECT coalesce(sum(version), 0) FROM jobs) AS versions`;

async function footprint(url: string): Promise<Footprint> {
  let row: Record<string, unknown>;
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    try {
      row = db.prepare(FOOTPRINT_SQL).get() as Record<string, unknown>;
    } finally {
      db.close();
    }
  } else {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      row = (await client.query(FOOTPRINT_SQL)).rows[0] as Record<string, unknown>;
    } finally {
      await client.end();
    }
  }
  return { jobs: Number(row.jobs), attempts: Number(row.attempts), events: Number(row.events), lastEvent: Number(row.lastEvent), versions: Number(row.versions) };
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`every route × every spelling of its path (${db.name})`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    let app: FastifyInstance;
    let port: number;
    const routes: Route[] = [];
    let ids: { job: string; attempt: string };
    let seq = 0;

    beforeAll(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      const config = defineConfig({
        apiKeys: { [ALICE]: 'alice', [READ_ONLY]: { owner: 'alice', readOnly: true } },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 } },
        routes: { chat: { providers: ['primary'] } },
      });
      runtime = await createRuntime({ config, store });
      executor = runtime.createExecutor({ pollMs: 100 });
      await executor.start();
      app = buildApp({ store, config, executor, metrics: createMetrics({ processMetrics: false }), chatCompletions: { maxWaitMs: 2_000, retryAfterMs: 100 } });
      // Read from the app itself: every route registered anywhere, with its method(s) and access config.
      app.addHook('onRoute', (route: RouteOptions) => {
        const methods = Array.isArray(route.method) ? route.method : [route.method];
        const access = route.config as { readOnlyAllowed?: boolean } | undefined;
        for (const method of methods) routes.push({ method: String(method), url: route.url, readOnlyAllowed: access?.readOnlyAllowed === true });
      });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      port = address.port;
      // A job of alice's with an attempt leased elsewhere for the whole test: real ids, and nothing runs it meanwhile.
      const created = await store.createJob({
        ownerId: 'alice', idempotencyKey: 'seed', route: 'chat', input: { messages: [{ role: 'user', content: 'seed' }] }, providers: ['primary'],
        firstAttempt: { leaseOwner: 'exe_elsewhere', leaseMs: 600_000 },
      });
      ids = { job: created.job.id, attempt: created.claimed!.attempt.id };
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await fake?.close();
      await cleanup?.();
    });

    const v1Routes = (): Route[] => routes.filter((r) => !OPEN_ROUTES.has(r.url));

    it('reads the routes from the app: every /v1/ route the server has, and only the known open ones outside it', () => {
      const urls = new Set(routes.map((r) => r.url));
      for (const known of ['/v1/jobs', '/v1/jobs/:id', '/v1/jobs/:id/attempts', '/v1/jobs/:id/cancel', '/v1/attempts/:id/resolve', '/v1/chat/completions', '/v1/messages', '/v1/events', '/v1/usage', '/v1/certifications']) {
        expect(urls, known).toContain(known);
      }
      for (const r of v1Routes()) {
        if (AUTHENTICATED_OUTSIDE_V1.has(r.url)) continue;
        expect(r.url, `${r.method} ${r.url} needs a token, so it must be a /v1/ path (or listed as open or authenticated outside /v1/)`).toMatch(/^\/v1(\/|$)/);
      }
      expect(routes.some((r) => r.method === 'POST')).toBe(true);
    });

    /** Sends `method path` with `headers` in-process and over the socket; returns both answers. */
    async function both(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer[]> {
      // As a stream: an event stream answered (wrongly) would never end.
      const injected = await app.inject({ method: method as 'GET', url: path, headers, payload: body, payloadAsStream: true });
      const contentType = String(injected.headers['content-type'] ?? '');
      const stream = injected.stream();
      let text = '';
      if (contentType.startsWith('text/event-stream')) stream.destroy();
      else for await (const chunk of stream) text += String(chunk);
      const fromInject: Answer = { status: injected.statusCode, body: text, contentType };
      return [fromInject, await rawRequest(port, method, path, headers, body)];
    }

    it('without a token, with a wrong one, or with a token where it is not accepted: 401 for every route in every spelling; nothing written, no provider called', async () => {
      const before = await footprint(url);
      const callsBefore = fake.calls.length;
      const credentials: { name: string; headers: Record<string, string> }[] = [
        { name: 'no token', headers: {} },
        { name: 'a wrong bearer token', headers: { authorization: `Bearer ${WRONG}` } },
        { name: 'a wrong x-api-key', headers: { 'x-api-key': WRONG } },
        { name: 'Basic with the right token', headers: { authorization: `Basic ${Buffer.from(`${ALICE}:`).toString('base64')}` } },
      ];
      const failures: string[] = [];
      let tried = 0;
      for (const route of v1Routes()) {
        for (const spelling of SPELLINGS) {
          const path = spelling.spell(fill(route.url, ids));
          for (const credential of credentials) {
            const { body, headers } = bodyFor(route.method, route.url, `spell-${++seq}`);
            for (const [via, answer] of (await both(route.method, path, { ...headers, ...credential.headers }, body)).entries()) {
              tried++;
              // The spellings are written for /v1/ paths: on /mcp (CONTRACT §14, the same token rule) one that turns the path
              // into another (`/v1p`) reaches no route and is 404; every spelling that reaches /mcp is 401 (test/mcp covers them).
              const elsewhere = !route.url.startsWith('/v1/') && spelling.name !== 'plain' && answer.status === 404;
              if (answer.status !== 401 && !elsewhere) failures.push(`${route.method} ${path} (${spelling.name}, ${credential.name}, ${via === 0 ? 'inject' : 'socket'}): ${answer.status} ${answer.body.slice(0, 120)}`);
            }
          }
        }
      }
      expect(failures, failures.slice(0, 20).join('\n')).toEqual([]);
      expect(tried).toBeGreaterThan(1000);
      // Nothing reached the store or the provider (the executor had all this time to run anything created).
      await new Promise((r) => setTimeout(r, 300));
      expect(await footprint(url)).toEqual(before);
      expect(fake.calls.length).toBe(callsBefore);
    });

    it("a valid x-api-key is accepted on /v1/messages only: on any other route, however spelled (even to look like /v1/messages), never 2xx and nothing written", async () => {
      const before = await footprint(url);
      const failures: string[] = [];
      const others = v1Routes().filter((r) => r.url !== '/v1/messages');
      for (const route of others) {
        const plain = fill(route.url, ids);
        const tricks = [...SPELLINGS.map((s) => s.spell(plain)), `/v1/messages/..${plain.slice(3)}`, `/v1/messages/%2e%2e${plain.slice(3)}`, `/v1/messages%2F..${plain.slice(3)}`];
        for (const path of tricks) {
          const { body, headers } = bodyFor(route.method, route.url, `xkey-${++seq}`);
          for (const answer of await both(route.method, path, { ...headers, 'x-api-key': ALICE }, body)) {
            if (answer.status < 300) failures.push(`${route.method} ${path}: ${answer.status} ${answer.body.slice(0, 120)}`);
          }
        }
      }
      expect(failures, failures.slice(0, 20).join('\n')).toEqual([]);
      expect(await footprint(url)).toEqual(before);
    });

    it('CONTRACT §3, the issue’s console example: /v1/jobs and /%761/jobs are 401, and POST /%761/chat/completions is 401 without calling the provider', async () => {
      const before = await footprint(url);
      const callsBefore = fake.calls.length;
      expect((await rawRequest(port, 'GET', '/v1/jobs', {})).status).toBe(401);
      const listed = await rawRequest(port, 'GET', '/%761/jobs', {});
      expect(listed.status).toBe(401);
      expect(JSON.parse(listed.body)).toMatchObject({ code: 'unauthorized' });
      const chat = await rawRequest(port, 'POST', '/%761/chat/completions', { 'idempotency-key': 'x1', 'content-type': 'application/json' },
        JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'free tokens' }] }));
      expect(chat.status).toBe(401);
      expect(JSON.parse(chat.body)).toMatchObject({ code: 'unauthorized' });
      await new Promise((r) => setTimeout(r, 300));
      expect(fake.calls.length).toBe(callsBefore);
      expect(await footprint(url)).toEqual(before);
    });

    it('a read-only token reads a job, the list and the events feed; every write, in every spelling, is 403 read_only_token and changes nothing', async () => {
      const ro = { authorization: `Bearer ${READ_ONLY}` };
      const job = await rawRequest(port, 'GET', `/v1/jobs/${ids.job}`, ro);
      expect(job.status).toBe(200);
      expect(JSON.parse(job.body)).toMatchObject({ id: ids.job });
      const list = await rawRequest(port, 'GET', '/v1/jobs', ro);
      expect(list.status).toBe(200);
      expect(JSON.parse(list.body).data.map((j: { id: string }) => j.id)).toContain(ids.job);
      expect((await rawRequest(port, 'GET', `/v1/jobs/${ids.job}/attempts`, ro)).status).toBe(200);
      const feed = await rawRequest(port, 'GET', '/v1/events', ro);
      expect(feed).toMatchObject({ status: 200, contentType: expect.stringMatching(/^text\/event-stream/) });

      const before = await footprint(url);
      const callsBefore = fake.calls.length;
      const writes = v1Routes().filter((r) => r.method !== 'GET' && r.method !== 'HEAD');
      expect(writes.length).toBeGreaterThanOrEqual(5);
      const failures: string[] = [];
      for (const route of writes) {
        // The spellings the router matches (the others are 401 before any route is known: tested above).
        for (const spelling of SPELLINGS.filter((s) => ['plain', '%76 for the v (the issue: /%761/jobs)', 'a letter encoded in every later segment', 'a query string'].includes(s.name))) {
          const path = spelling.spell(fill(route.url, ids));
          const { body, headers } = bodyFor(route.method, route.url, `ro-${++seq}`);
          for (const answer of await both(route.method, path, { ...headers, ...ro }, body)) {
            const code = answer.contentType.includes('json') ? (JSON.parse(answer.body) as { code?: string }).code : undefined;
            if (SIGNED_ROUTES.has(route.url)) {
              // A token does not replace the signature: 401, never a write.
              if (answer.status !== 401 || code !== 'unauthorized') failures.push(`${route.method} ${path} (${spelling.name}): ${answer.status} ${answer.body.slice(0, 120)}`);
              continue;
            }
            if (route.readOnlyAllowed ? answer.status === 403 : answer.status !== 403 || code !== 'read_only_token') {
              failures.push(`${route.method} ${path} (${spelling.name}): ${answer.status} ${answer.body.slice(0, 120)}`);
            }
          }
        }
      }
      expect(failures, failures.join('\n')).toEqual([]);
      await new Promise((r) => setTimeout(r, 300));
      expect(await footprint(url)).toEqual(before);
      expect(fake.calls.length).toBe(callsBefore);
    });

    it('the spellings are real: with a valid token, the encoded ones reach the same handlers (so the 401s above are authentication, not a missing route), and a chat call reaches the provider', async () => {
      const auth = { authorization: `Bearer ${ALICE}` };
      for (const route of v1Routes().filter((r) => r.method === 'GET')) {
        const plain = fill(route.url, ids);
        const answer = await rawRequest(port, 'GET', plain, auth);
        const expected = answer.status;
        // Answered by the route itself (a job id where a route wants another kind of id may be its own 404), never by the not-found handler.
        expect(answer.body, `GET ${plain}`).not.toMatch(/no route GET/);
        if (route.url.startsWith('/v1/jobs')) expect(expected, `GET ${plain}`).toBe(200);
        for (const name of ['%76 for the v (the issue: /%761/jobs)', '%31 for the digit', 'a letter encoded in every later segment']) {
          const path = SPELLINGS.find((s) => s.name === name)!.spell(plain);
          expect((await rawRequest(port, 'GET', path, auth)).status, `GET ${path}`).toBe(expected);
        }
      }
      fake.script([{ reply: 'paid for' }]);
      const callsBefore = fake.calls.length;
      const chat = await rawRequest(port, 'POST', '/%761/chat/completions', { ...auth, 'idempotency-key': 'paid-1', 'content-type': 'application/json' },
        JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'paid' }] }));
      expect(chat.status, chat.body).toBe(200);
      expect(fake.calls.length).toBe(callsBefore + 1);
    });
  });
}
