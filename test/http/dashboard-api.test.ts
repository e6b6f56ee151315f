/**
 * The API the dashboard reads (CONTRACT §8, §10), over a real socket on
 * SQLite and PostgreSQL: usage and cost on attempt and job bodies,
 * `GET /v1/usage`, the search filters of `GET /v1/jobs`, a job's event log,
 * reasons of resolve and cancel, the live feed (SSE), certifications,
 * the usage counters on /metrics, and the static `/ui` route.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { compileContract } from '../../src/contracts/compile-contract.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { registerDashboardRoutes } from '../../src/http/routes/dashboard-routes.ts';
import type { TokenUsage } from '../../src/core/usage.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { ALICE, BOB, startTestServer, type TestServer } from './http-test-app.ts';

const INPUT = { messages: [{ role: 'user', content: 'hi' }] };
const usage = (p: number, c: number): TokenUsage => ({ promptTokens: p, completionTokens: c, totalTokens: p + c });

/** Reads server-sent events from a streaming fetch until `until` says stop (or the time runs out). */
async function readSse(res: Response, until: (messages: { event: string; id?: string; data: any }[]) => boolean, timeoutMs = 10_000) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const messages: { event: string; id?: string; data: any }[] = [];
  let buffer = '';
  const timer = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    while (!until(messages)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const m: { event: string; id?: string; data: any } = { event: 'message', data: null };
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) m.event = line.slice(7);
          else if (line.startsWith('id: ')) m.id = line.slice(4);
          else if (line.startsWith('data: ')) m.data = JSON.parse(line.slice(6));
        }
        if (block.split('\n').some((l) => !l.startsWith(':') && !l.startsWith('retry:'))) messages.push(m);
      }
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => undefined);
  }
  return messages;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`dashboard API on ${db.name}`, () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(db, { waitRecheckMs: 100 });
    });
    afterAll(async () => {
      await server?.close();
    });

    /** A job whose first attempt failed with usage (failover started), the second succeeded with usage. */
    async function pricedJob(key: string, owner = 'alice', token = ALICE) {
      const created = await server.request('POST', '/v1/jobs', { key, token, body: { route: 'summarize', input: INPUT } });
      expect(created.status).toBe(201);
      const first = await server.store.startAttempt({ ownerId: owner, jobId: created.body.id, kind: 'first', hedgeAfterMs: null });
      const failed = await server.store.settleAttempt({
        ownerId: owner, attemptId: first.id, outcome: { state: 'failed', error: { code: 'contract_violation', message: 'x' }, usage: usage(100, 50), costMicros: 45 },
      });
      const second = failed.failover!;
      await server.store.settleAttempt({ ownerId: owner, attemptId: second.id, outcome: { state: 'succeeded', result: { content: 'ok' }, usage: usage(10, 5), costMicros: 1_000_001 } });
      return created.body.id as string;
    }

    it('attempt bodies carry usage and cost_usd; the job body sums every attempt, losers included', async () => {
      const id = await pricedJob('priced-1');
      const job = await server.request('GET', `/v1/jobs/${id}`);
      expect(job.status).toBe(200);
      expect(job.body.attempts.map((a: any) => [a.state, a.usage, a.cost_usd])).toEqual([
        ['failed', { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 }, 0.000045],
        ['succeeded', { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }, 1.000001],
      ]);
      expect(job.body.cost_usd).toBe(1.000046);
      const attempts = await server.request('GET', `/v1/jobs/${id}/attempts`);
      expect(attempts.body.data[1].cost_usd).toBe(1.000001);
      // A job without any priced attempt has a null cost.
      const bare = await server.request('POST', '/v1/jobs', { key: 'bare-1', body: { route: 'summarize', input: INPUT } });
      expect(bare.body).toMatchObject({ cost_usd: null, attempts: [] });
    });

    it('GET /v1/usage sums by route, provider and outcome, within the time range, for the owner only', async () => {
      await new Promise((r) => setTimeout(r, 5));
      const before = new Date().toISOString();
      await new Promise((r) => setTimeout(r, 5));
      await pricedJob('priced-2');
      await pricedJob('bob-priced', 'bob', BOB);
      const res = await server.request('GET', `/v1/usage?since=${encodeURIComponent(before)}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([
        { route: 'summarize', provider: 'p1', outcome: 'failed', attempts: 1, attempts_with_usage: 1, prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, cost_usd: 0.000045 },
        { route: 'summarize', provider: 'p2', outcome: 'succeeded', attempts: 1, attempts_with_usage: 1, prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, cost_usd: 1.000001 },
      ]);
      const all = await server.request('GET', '/v1/usage');
      const failed = all.body.data.find((r: any) => r.outcome === 'failed' && r.provider === 'p1');
      expect(failed).toMatchObject({ attempts: 2, prompt_tokens: 200, cost_usd: 0.00009 });
      const future = await server.request('GET', `/v1/usage?since=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`);
      expect(future.body.data).toEqual([]);
      const until = await server.request('GET', `/v1/usage?until=${encodeURIComponent(before)}`);
      expect(until.body.data.reduce((n: number, r: any) => n + r.attempts, 0)).toBe(2); // priced-1's two attempts only
      const bucketed = await server.request('GET', `/v1/usage?since=${encodeURIComponent(before)}&bucket_seconds=3600`);
      expect(bucketed.body.data).toHaveLength(2);
      for (const r of bucketed.body.data) expect(new Date(r.period_start).getTime() % 3_600_000).toBe(0);
    });

    it('GET /v1/usage refuses bad timestamps and ranges with invalid_request', async () => {
      for (const q of ['since=yesterday', 'until=2025-13-01T00:00:00Z', 'since=2025-01-01', 'bucket_seconds=1', 'foo=1']) {
        const res = await server.request('GET', `/v1/usage?${q}`);
        expect(res.status, q).toBe(400);
        expect(res.body.code, q).toBe('invalid_request');
      }
      const reversed = await server.request('GET', '/v1/usage?since=2025-02-01T00:00:00Z&until=2025-01-01T00:00:00Z');
      expect([reversed.status, reversed.body.code]).toEqual([400, 'invalid_request']);
      expect((await server.request('GET', '/v1/usage', { token: null })).status).toBe(401);
    });

    it('GET /v1/jobs filters by route, provider, time and id or key, pages with a cursor, and lists the jobs in doubt oldest first', async () => {
      const t0 = new Date(Date.now() - 5).toISOString();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await server.request('POST', '/v1/jobs', { key: `search-${i}`, body: { route: i % 2 === 0 ? 'hedged' : 'summarize', input: INPUT } });
        ids.push(r.body.id);
      }
      const byRoute = await server.request('GET', `/v1/jobs?route=hedged&since=${encodeURIComponent(t0)}`);
      expect(byRoute.body.data.map((j: any) => j.id)).toEqual([ids[4], ids[2], ids[0]]);
      const byKey = await server.request('GET', '/v1/jobs?q=search-3');
      expect(byKey.body.data.map((j: any) => j.id)).toEqual([ids[3]]);
      const byPrefix = await server.request('GET', '/v1/jobs?q=search-&limit=2');
      expect(byPrefix.body.data.map((j: any) => j.id)).toEqual([ids[4], ids[3]]);
      const page2 = await server.request('GET', `/v1/jobs?q=search-&limit=2&cursor=${byPrefix.body.next_cursor}`);
      expect(page2.body.data.map((j: any) => j.id)).toEqual([ids[2], ids[1]]);
      const byId = await server.request('GET', `/v1/jobs?q=${ids[1]}`);
      expect(byId.body.data.map((j: any) => j.id)).toEqual([ids[1]]);
      expect((await server.request('GET', `/v1/jobs?q=${ids[1]}`, { token: BOB })).body.data).toEqual([]);

      // Provider: jobs with an attempt on it.
      const a = await server.store.startAttempt({ ownerId: 'alice', jobId: ids[1]!, kind: 'manual', provider: 'p2', hedgeAfterMs: null });
      const byProvider = await server.request('GET', `/v1/jobs?provider=p2&since=${encodeURIComponent(t0)}`);
      expect(byProvider.body.data.map((j: any) => j.id)).toEqual([ids[1]]);

      // In doubt, oldest first: two unknown attempts made by the rescuer's rule (a lease that expired).
      for (const jobId of [ids[0]!, ids[3]!]) {
        const att = await server.store.startAttempt({ ownerId: 'alice', jobId, kind: 'first', hedgeAfterMs: null, lease: { leaseOwner: 'gone', leaseMs: 1 } });
        expect(att.state).toBe('starting');
      }
      await new Promise((r) => setTimeout(r, 20));
      expect(await server.store.rescueExpiredLeases()).toBe(2);
      const doubt = await server.request('GET', '/v1/jobs?state=unknown&order=oldest');
      expect(doubt.body.data.map((j: any) => j.id)).toEqual([ids[0], ids[3]]);
      expect(doubt.body.data[0].attempts[0].state).toBe('unknown');
      const doubtPage = await server.request('GET', '/v1/jobs?state=unknown&order=oldest&limit=1');
      const doubtNext = await server.request('GET', `/v1/jobs?state=unknown&order=oldest&limit=1&cursor=${doubtPage.body.next_cursor}`);
      expect(doubtNext.body.data.map((j: any) => j.id)).toEqual([ids[3]]);
      // A cursor of the other order is refused.
      const mixed = await server.request('GET', `/v1/jobs?state=unknown&order=newest&cursor=${doubtPage.body.next_cursor}`);
      expect([mixed.status, mixed.body.code]).toEqual([400, 'invalid_request']);
      for (const q of ['since=nope', 'order=sideways', 'until=2025-01-01']) {
        const bad = await server.request('GET', `/v1/jobs?${q}`);
        expect([bad.status, bad.body.code], q).toEqual([400, 'invalid_request']);
      }
      await server.store.settleAttempt({ ownerId: 'alice', attemptId: a.id, outcome: { state: 'cancelled' } });
    });

    it("a job's event log keeps the reasons given to resolve and cancel; another owner's log is 404", async () => {
      const created = await server.request('POST', '/v1/jobs', { key: 'reasons-1', body: { route: 'summarize', input: INPUT } });
      const id = created.body.id;
      const attempt = await server.store.startAttempt({ ownerId: 'alice', jobId: id, kind: 'first', hedgeAfterMs: null });
      const resolved = await server.request('POST', `/v1/attempts/${attempt.id}/resolve`, { body: { state: 'failed', reason: 'the provider says it never ran' } });
      expect(resolved.status).toBe(200);
      const badCancel = await server.request('POST', `/v1/jobs/${id}/cancel`, { body: { reason: 42 } });
      expect([badCancel.status, badCancel.body.code]).toEqual([422, 'invalid_request']);
      expect((await server.request('GET', `/v1/jobs/${id}`)).body.state).toBe('running');
      const cancelled = await server.request('POST', `/v1/jobs/${id}/cancel`, { body: { reason: 'customer gave up' } });
      expect(cancelled.body.state).toBe('cancelled');
      const log = await server.request('GET', `/v1/jobs/${id}/events`);
      expect(log.status).toBe(200);
      const types = log.body.data.map((e: any) => e.type);
      expect(types).toEqual(expect.arrayContaining(['attempt.started', 'attempt.failed', 'job.cancelled']));
      expect(log.body.data.find((e: any) => e.type === 'attempt.failed')).toMatchObject({ attempt_id: attempt.id, data: { actor: 'api', reason: 'the provider says it never ran' } });
      expect(log.body.data.find((e: any) => e.type === 'job.cancelled').data).toEqual({ actor: 'api', reason: 'customer gave up' });
      const ids = log.body.data.map((e: any) => e.id);
      expect([...ids].sort((x: number, y: number) => x - y)).toEqual(ids);
      const theirs = await server.request('GET', `/v1/jobs/${id}/events`, { token: BOB });
      expect([theirs.status, theirs.body.code]).toEqual([404, 'job_not_found']);
      // A cancel without a body still works (the reason is optional).
      const plain = await server.request('POST', '/v1/jobs', { key: 'reasons-2', body: { route: 'summarize', input: INPUT } });
      expect((await server.request('POST', `/v1/jobs/${plain.body.id}/cancel`)).body.state).toBe('cancelled');
    });

    it('GET /v1/events streams the owner\'s job changes, resumes from Last-Event-ID, and never shows another owner\'s', async () => {
      const open = (token: string, headers: Record<string, string> = {}) =>
        fetch(`${server.baseUrl}/v1/events`, { headers: { authorization: `Bearer ${token}`, ...headers } });
      const aliceRes = await open(ALICE);
      expect(aliceRes.status).toBe(200);
      expect(aliceRes.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const bobRes = await open(BOB);
      const created = await server.request('POST', '/v1/jobs', { key: 'live-1', body: { route: 'summarize', input: INPUT } });
      const attempt = await server.store.startAttempt({ ownerId: 'alice', jobId: created.body.id, kind: 'first', hedgeAfterMs: null });
      const aliceMessages = await readSse(aliceRes, (ms) => ms.some((m) => m.event === 'job_event' && m.data.type === 'attempt.started'));
      expect(aliceMessages[0]).toMatchObject({ event: 'ready' });
      expect(aliceMessages).toContainEqual(expect.objectContaining({ event: 'job_changed', data: { job_id: created.body.id, state: 'queued' } }));
      const started = aliceMessages.find((m) => m.event === 'job_event' && m.data.type === 'attempt.started')!;
      expect(started.data).toMatchObject({ job_id: created.body.id, attempt_id: attempt.id });
      expect(Number(started.id)).toBe(started.data.id);

      // Bob's own change arrives on his stream; Alice's never did.
      const bobJob = await server.request('POST', '/v1/jobs', { key: 'live-bob', token: BOB, body: { route: 'summarize', input: INPUT } });
      const bobMessages = await readSse(bobRes, (ms) => ms.some((m) => m.event === 'job_changed'));
      expect(bobMessages.filter((m) => m.event !== 'ready').map((m) => m.data.job_id)).toEqual([bobJob.body.id]);

      // Resuming after the started event gives what followed, and nothing before it.
      await server.store.settleAttempt({ ownerId: 'alice', attemptId: attempt.id, outcome: { state: 'succeeded', result: 'done' } });
      const resumed = await readSse(await open(ALICE, { 'last-event-id': started.id! }), (ms) => ms.some((m) => m.data?.type === 'job.succeeded'));
      const types = resumed.filter((m) => m.event === 'job_event').map((m) => m.data.type);
      expect(types).toEqual(['attempt.succeeded', 'job.succeeded']);
      expect((await fetch(`${server.baseUrl}/v1/events`)).status).toBe(401);
    });

    it('GET /v1/doubt reads a page of attempts in doubt in one statement, whatever its size; it lists one beside a running hedge; 401 without a token', async () => {
      const lease = { leaseOwner: 'exe_gone', leaseMs: 30_000 };
      /** A job whose first attempt went unknown; with `hedge`, a hedge was running beside it first (the job stays running). */
      const inDoubt = async (key: string, hedge = false) => {
        const { job, claimed } = await server.store.createJob({
          ownerId: 'alice', idempotencyKey: key, route: hedge ? 'hedged' : 'summarize', input: { messages: [{ role: 'user', content: `refund ${key}` }] },
          providers: ['p1', 'p2'], firstAttempt: lease,
        });
        const a = claimed!.attempt;
        const fence = { ownerId: 'alice', attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
        if (hedge) {
          expect(await server.store.markRunning({ ...fence, timeoutMs: 30_000 })).toBeTruthy();
          await server.store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'hedge', hedgeAfterMs: 0, lease });
        }
        expect(await server.store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
        return { job: job.id, attempt: a.id };
      };
      const hedged = await inDoubt('doubt-hedged', true);
      const plain: { job: string; attempt: string }[] = [];
      for (let i = 0; i < 30; i++) plain.push(await inDoubt(`doubt-${String(i).padStart(2, '0')}`));
      // Count what the page costs the database: every driver call is one statement.
      const driver = server.store.driver;
      let statements = 0;
      const counted: [Record<string, unknown>, string, unknown][] = [];
      for (const target of [driver.queries as unknown as Record<string, unknown>, driver.insights as unknown as Record<string, unknown>]) {
        for (const [name, fn] of Object.entries(target)) {
          if (typeof fn !== 'function') continue;
          counted.push([target, name, fn]);
          target[name] = (...args: unknown[]) => {
            statements++;
            return (fn as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
      }
      let res;
      try {
        res = await server.request('GET', '/v1/doubt?limit=200');
      } finally {
        for (const [target, name, fn] of counted) target[name] = fn;
      }
      expect(res.status).toBe(200);
      expect(statements).toBe(1);
      const rows = (res.body as any).data as any[];
      // Oldest doubt first (earlier tests' attempts in doubt come before these).
      const mine = [hedged.attempt, ...plain.map((p) => p.attempt)];
      expect(rows.map((r) => r.id).filter((id) => mine.includes(id))).toEqual(mine);
      expect(rows.find((r) => r.id === hedged.attempt)).toMatchObject({ job: { id: hedged.job, idempotency_key: 'doubt-hedged', route: 'hedged', state: 'running', input_line: 'refund doubt-hedged' }, state: 'unknown', can_check: false });
      // The jobs list by state misses it: the job is running (its hedge is), yet its first attempt is in doubt.
      const listed = (await server.request('GET', '/v1/jobs?state=unknown&limit=200')).body as any;
      expect(listed.data.map((j: any) => j.id)).not.toContain(hedged.job);
      expect((await server.request('GET', '/v1/doubt', { token: null })).status).toBe(401);
      // Their jobs cancelled, they block nothing and leave the queue.
      for (const p of [hedged, ...plain]) await server.store.cancelJob('alice', p.job);
      const left = ((await server.request('GET', '/v1/doubt')).body as any).data.map((r: any) => r.id);
      expect(left.filter((id: string) => mine.includes(id))).toEqual([]);
    });

    it('/metrics lists the usage counters', async () => {
      const res = await server.request('GET', '/metrics', { token: null });
      expect(res.text).toContain('# TYPE onejob_attempt_tokens_total counter');
      expect(res.text).toContain('# TYPE onejob_attempt_cost_usd_total counter');
    });
  });
}

describe('GET /v1/certifications', () => {
  const db = TEST_DATABASES[0]!;
  it('shows route × provider: passed for the current contract and model, void for another model, not certified, and not required without a contract', async () => {
    const { store, cleanup } = await createTestStore(db);
    const contract = { outputSchema: { type: 'object', required: ['summary'] }, cases: [{ input: { messages: [{ role: 'user', content: 'x' }] } }] };
    const config = defineConfig({
      apiKeys: { [ALICE]: 'alice' },
      providers: {
        a: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'ma' },
        b: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'mb' },
        c: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'mc' },
      },
      routes: { checked: { providers: ['a', 'b', 'c'], contract: 'summary' }, free: { providers: ['a'] } },
      contracts: { summary: contract },
    });
    const fp = (await compileContract('summary', contract, { baseDir: process.cwd() })).fingerprint;
    const at = new Date('2025-01-02T03:04:05Z');
    await store.recordCertification({ provider: 'a', model: 'ma', contractFingerprint: fp, route: 'checked', passed: true, report: { cases: 1 }, verifiedAt: at });
    await store.recordCertification({ provider: 'b', model: 'old-model', contractFingerprint: fp, route: 'checked', passed: true, report: {}, verifiedAt: at });
    const app = buildApp({ store, config });
    try {
      const res = await app.inject({ method: 'GET', url: '/v1/certifications', headers: { authorization: `Bearer ${ALICE}` } });
      expect(res.statusCode).toBe(200);
      const rows = res.json().data.map((r: any) => [r.route, r.provider, r.status, r.contract_fingerprint === fp || r.contract_fingerprint, r.certification?.model ?? null]);
      expect(rows).toEqual([
        ['checked', 'a', 'passed', true, 'ma'],
        ['checked', 'b', 'void', true, 'old-model'],
        ['checked', 'c', 'not_certified', true, null],
        ['free', 'a', 'not_required', null, null],
      ]);
      expect(res.json().data[0]).toMatchObject({ model: 'ma', eligible: true, reason: null, certification: { passed: true, verified_at: at.toISOString(), report: { cases: 1 } } });
      expect((await app.inject({ method: 'GET', url: '/v1/certifications' })).statusCode).toBe(401);
    } finally {
      await app.close();
      await cleanup();
    }
  });
});

describe('GET /ui', () => {
  it('serves the built files with a strict CSP, index.html uncached and hashed assets immutable; no token needed', async () => {
    const dist = mkdtempSync(join(tmpdir(), 'onejob-ui-'));
    mkdirSync(join(dist, 'assets'));
    writeFileSync(join(dist, 'index.html'), '<!doctype html><title>onejob</title>');
    writeFileSync(join(dist, 'assets', 'app-abc123.js'), 'console.log(1)');
    const app = Fastify();
    registerDashboardRoutes(app, { dist });
    try {
      const redirect = await app.inject('/ui');
      expect([redirect.statusCode, redirect.headers.location]).toEqual([302, '/ui/']);
      const index = await app.inject('/ui/');
      expect(index.statusCode).toBe(200);
      expect(index.headers['content-type']).toMatch(/^text\/html/);
      expect(index.headers['cache-control']).toBe('no-cache');
      expect(index.headers['content-security-policy']).toMatch(/default-src 'self'/);
      const js = await app.inject('/ui/assets/app-abc123.js');
      expect([js.statusCode, js.headers['content-type'], js.headers['cache-control']]).toEqual([200, 'text/javascript; charset=utf-8', 'public, max-age=31536000, immutable']);
      expect((await app.inject('/ui/../package.json')).statusCode).toBe(404);
      expect((await app.inject('/ui/%2e%2e/package.json')).statusCode).toBe(404);
      expect((await app.inject('/ui/nope.js')).statusCode).toBe(404);
    } finally {
      await app.close();
      rmSync(dist, { recursive: true, force: true });
    }
    // The server's bare address (what a new user opens first) leads to the dashboard, without a token.
    const { store, cleanup } = await createTestStore(TEST_DATABASES[0]!);
    const whole = buildApp({ store, config: defineConfig({ apiKeys: { [ALICE]: 'alice' } }) });
    try {
      const root = await whole.inject('/');
      expect([root.statusCode, root.headers.location]).toEqual([302, '/ui/']);
    } finally {
      await whole.close();
      await cleanup();
    }
    const unbuilt = Fastify();
    registerDashboardRoutes(unbuilt, { dist: join(tmpdir(), 'onejob-no-such-dist') });
    const res = await unbuilt.inject('/ui/');
    expect(res.statusCode).toBe(503);
    expect(res.body).toMatch(/npm run build:web/);
    await unbuilt.close();
  });
});
