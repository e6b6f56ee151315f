/**
 * Property-based: whatever body and headers a client sends to the job routes,
 * the answer is never a 500, and no other job changes.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { ALICE, BOB, startTestServer, type TestServer } from './http-test-app.ts';

/** Header values fetch accepts (Latin-1, no CR/LF/NUL), including edge cases. */
const headerValue = fc.oneof(
  fc.constantFrom('', ' ', 'k', 'x'.repeat(255), 'x'.repeat(256), 'a b', '"quoted"', '~!', '\u00e9', '\t'),
  fc.string({ unit: fc.constantFrom(...'abcXYZ019 !~-_./:;,"\'\t\u00a0\u00ff'), maxLength: 300 }),
);

const jsonBody = fc.oneof(
  fc.record(
    {
      route: fc.oneof(fc.constantFrom('summarize', 'hedged', 'nope', '', '__proto__', 'constructor'), fc.jsonValue()),
      input: fc.jsonValue(),
      metadata: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue()),
    },
    { requiredKeys: [] },
  ),
  fc.jsonValue(),
);

const rawBody = fc.oneof(
  jsonBody.map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  jsonBody.map((v) => JSON.stringify(v).slice(0, -1)),
  fc.constantFrom('', '{', '{"route":"summarize","input":{"__proto__":{"polluted":true}}}', '{"route":"summarize","input":1}'),
);

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`request fuzzing (${db.name})`, () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(db);
    });
    afterAll(async () => {
      await server?.close();
    });

    it('POST /v1/jobs: never a 500, never a change to another job', async () => {
      // A job of Bob's and one of Alice's that no request below may touch.
      const bobJob = await server.request('POST', '/v1/jobs', { token: BOB, key: 'fixed', body: { route: 'summarize', input: { keep: 1 } } });
      const aliceJob = await server.request('POST', '/v1/jobs', { token: ALICE, key: 'fixed', body: { route: 'summarize', input: { keep: 2 } } });
      const bobBefore = await server.store.getJob('bob', bobJob.body.id);
      const aliceBefore = await server.store.getJob('alice', aliceJob.body.id);

      await fc.assert(
        fc.asyncProperty(
          fc.record({
            key: fc.option(headerValue, { nil: undefined }),
            token: fc.constantFrom(ALICE, BOB, null, 'tok_nobody'),
            raw: fc.option(rawBody, { nil: undefined }),
            contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded'),
          }),
          async ({ key, token, raw, contentType }) => {
            const res = await server.request('POST', '/v1/jobs', { token, raw, contentType, headers: key === undefined ? {} : { 'idempotency-key': key } });
            expect(res.status).toBeLessThan(500);
            if (res.status >= 400) {
              expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
              expect(typeof res.body.code).toBe('string');
            } else {
              // A 2xx must be a job for a well-formed request.
              expect(res.body.route).toMatch(/^(summarize|hedged)$/);
            }
          },
        ),
        { numRuns: 150 },
      );

      expect(await server.store.getJob('bob', bobJob.body.id)).toEqual(bobBefore);
      // Alice's job under key "fixed" may be replayed or conflicted, but never changed.
      expect(await server.store.getJob('alice', aliceJob.body.id)).toEqual(aliceBefore);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('other routes: arbitrary ids, queries and bodies never give a 500 or touch another job', async () => {
      const bobJob = await server.request('POST', '/v1/jobs', { token: BOB, key: 'fixed-2', body: { route: 'summarize', input: 1 } });
      const bobBefore = await server.store.getJob('bob', bobJob.body.id);
      const segment = fc.oneof(fc.constant(bobJob.body.id as string), fc.string({ maxLength: 40 }).map(encodeURIComponent), fc.constant('job_x'));
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(
            ['GET', (id: string) => `/v1/jobs/${id}`],
            ['GET', (id: string) => `/v1/jobs/${id}/attempts`],
            ['POST', (id: string) => `/v1/jobs/${id}/attempts`],
            ['POST', (id: string) => `/v1/jobs/${id}/cancel`],
            ['POST', (id: string) => `/v1/attempts/${id}/resolve`],
            ['GET', () => '/v1/jobs'],
          ),
          segment,
          fc.string({ unit: fc.constantFrom(...'wait=limit&cursor=state-0123456789.eabcqueudx%'), maxLength: 40 }),
          fc.option(rawBody, { nil: undefined }),
          async ([method, path], id, query, raw) => {
            const res = await server.request(method, `${path(id)}?${query}`, { raw: method === 'GET' ? undefined : raw });
            expect(res.status, `${method} ${path(id)}?${query} ${raw}`).toBeLessThan(500);
          },
        ),
        { numRuns: 150 },
      );
      expect(await server.store.getJob('bob', bobJob.body.id)).toEqual(bobBefore);
    });
  });
}
