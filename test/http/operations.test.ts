/**
 * Operations over real HTTP: health, readiness, metrics, the OpenAPI
 * document (validated as OpenAPI 3.1), and structured logs.
 */
import { Writable } from 'node:stream';
import SwaggerParser from '@apidevtools/swagger-parser';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { ALICE, startTestServer, type TestServer } from './http-test-app.ts';

const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

describe('operations', () => {
  let server: TestServer;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line));
        done();
      },
    });
    server = await startTestServer(sqlite, { logger: pino({ level: 'info' }, sink) });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('GET /healthz and /readyz need no token', async () => {
    expect(await server.request('GET', '/healthz', { token: null })).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await server.request('GET', '/readyz', { token: null })).toMatchObject({ status: 200, body: { status: 'ready' } });
  });

  it('GET /readyz is 503 unavailable (reason database_unavailable) with a Retry-After when the database is gone', async () => {
    const { buildApp } = await import('../../src/http/build-app.ts');
    const { testConfig } = await import('./http-test-app.ts');
    const { createTestStore } = await import('../support/databases.ts');
    const { store, cleanup } = await createTestStore(sqlite);
    const app = buildApp({ store, config: testConfig() });
    await store.close();
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({ code: 'unavailable', reason: 'database_unavailable', status: 503 });
    expect(res.headers['retry-after']).toBe('1');
    await app.close();
    await cleanup().catch(() => undefined);
  });

  it('GET /metrics speaks Prometheus text and counts creations, replays and conflicts', async () => {
    const body = { route: 'summarize', input: 'metrics' };
    await server.request('POST', '/v1/jobs', { key: 'm1', body });
    await server.request('POST', '/v1/jobs', { key: 'm1', body });
    await server.request('POST', '/v1/jobs', { key: 'm1', body: { ...body, input: 'other' } });
    const res = await server.request('GET', '/metrics', { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/^onejob_jobs_created_total\{route="summarize"\} 1$/m);
    expect(res.text).toMatch(/^onejob_idempotent_replays_total\{route="summarize"\} 1$/m);
    expect(res.text).toMatch(/^onejob_idempotency_conflicts_total 1$/m);
    for (const name of ['onejob_attempts_total', 'onejob_races_lost_total', 'onejob_attempts_in_doubt', 'onejob_provider_latency_seconds']) {
      expect(res.text).toContain(`# TYPE ${name}`);
    }
  });

  it('one identity through the layers: the X-Request-Id from the load balancer is answered, and job answers carry Onejob-Job-Id', async () => {
    const created = await server.request('POST', '/v1/jobs', { key: 'ident-1', body: { route: 'summarize', input: 'x' }, headers: { 'x-request-id': 'lb-req-42' } });
    expect(created.status).toBe(201);
    expect(created.headers.get('x-request-id')).toBe('lb-req-42');
    const id = (created.body as { id: string }).id;
    expect(created.headers.get('onejob-job-id')).toBe(id);
    const read = await server.request('GET', `/v1/jobs/${id}`);
    expect(read.headers.get('onejob-job-id')).toBe(id);
    expect(read.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const line = lines.find((l) => l.reqId === 'lb-req-42' && l.job_id === id);
    expect(line).toBeDefined();
  });

  it('an id with a NUL byte or non-ASCII is 404 (and never echoed into a header), and a body that is not UTF-8 is 400 invalid_request', async () => {
    for (const id of ['%00', '%F0%9F%92%A5']) {
      for (const [method, path] of [['GET', `/v1/jobs/${id}`], ['GET', `/v1/jobs/${id}/attempts`], ['POST', `/v1/jobs/${id}/attempts`], ['POST', `/v1/jobs/${id}/cancel`]] as const) {
        const res = await fetch(server.baseUrl + path, {
          method,
          headers: { authorization: `Bearer ${ALICE}`, ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) },
          ...(method === 'POST' ? { body: '{}' } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(((await res.json()) as { code: string }).code, `${method} ${path}`).toBe('job_not_found');
        expect(res.headers.get('onejob-job-id'), `${method} ${path}`).toBeNull();
      }
    }
    const res = await fetch(server.baseUrl + '/v1/jobs', {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'idempotency-key': 'utf8-raw', 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"route":"summarize","input":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe('invalid_request');
    const deep = await server.request('POST', '/v1/jobs', { key: 'deep', raw: `{"route":"summarize","input":${'['.repeat(50_000)}${']'.repeat(50_000)}}` });
    expect(deep).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    const ok = await server.request('POST', '/v1/jobs', { key: 'deep-ok', raw: `{"route":"summarize","input":${'['.repeat(100)}${']'.repeat(100)}}` });
    expect(ok.status).toBe(201);
  });

  it('GET /openapi.json is a valid OpenAPI 3.1 document describing every route', async () => {
    const res = await server.request('GET', '/openapi.json', { token: null });
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const doc = structuredClone(res.body);
    await expect(SwaggerParser.validate(doc)).resolves.toBeDefined();
    const paths = Object.keys(res.body.paths).sort();
    expect(paths).toEqual(
      [
        '/healthz', '/metrics', '/readyz', '/v1/attempts/{id}/resolve', '/v1/attempts/{id}/check', '/v1/attempts/{id}/callback', '/v1/chat/completions', '/v1/jobs', '/v1/jobs/{id}',
        '/v1/jobs/{id}/attempts', '/v1/jobs/{id}/cancel', '/v1/messages',
        '/v1/usage', '/v1/limits', '/v1/events', '/v1/jobs/{id}/events', '/v1/certifications', '/v1/doubt',
        '/v1/responses', '/v1/responses/{id}', '/v1/responses/{id}/cancel', '/v1/responses/{id}/input_items',
        '/v1/models', '/v1/models/{id}',
        '/v1/files', '/v1/files/{id}', '/v1/files/{id}/content', '/v1/batches', '/v1/batches/{id}', '/v1/batches/{id}/cancel',
      ].sort(),
    );
    expect(Object.keys(res.body.components.schemas)).toEqual(expect.arrayContaining(['Job', 'Attempt', 'Problem']));
    expect(res.body.paths['/v1/jobs'].post.responses['409'] ?? res.body.paths['/v1/jobs'].post.responses['4XX']).toBeDefined();
  });

  it('unknown paths are 404 problem documents; unexpected methods too', async () => {
    const res = await server.request('GET', '/nope', { token: null });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
    expect((await server.request('DELETE', '/v1/jobs')).status).toBe(404);
  });

  it('logs are JSON lines; every line about a job carries job_id and owner (and attempt_id when there is one)', async () => {
    const created = await server.request('POST', '/v1/jobs', { key: 'log-1', body: { route: 'summarize', input: 1 } });
    const attempt = await server.request('POST', `/v1/jobs/${created.body.id}/attempts`);
    await server.request('POST', `/v1/attempts/${attempt.body.id}/resolve`, { body: { state: 'cancelled' } });
    const about = lines.filter((l) => JSON.stringify(l).includes(created.body.id));
    expect(about.length).toBeGreaterThan(3);
    for (const line of about) {
      expect(line.job_id, JSON.stringify(line)).toBe(created.body.id);
      expect(line.owner).toBe('alice');
    }
    expect(about.some((l) => l.msg === 'job created')).toBe(true);
    expect(about.some((l) => l.msg === 'attempt started' && l.attempt_id === attempt.body.id)).toBe(true);
    expect(about.some((l) => l.msg === 'attempt resolved' && l.attempt_id === attempt.body.id)).toBe(true);
    expect(about.some((l) => l.msg === 'request completed')).toBe(true);
    // Tokens never reach the logs.
    expect(lines.some((l) => JSON.stringify(l).includes('tok_alice'))).toBe(false);
  });
});
