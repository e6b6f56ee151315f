/**
 * A provider's error text reaches the logs, not tenants: a job failed by
 * providers whose error messages carry an API key, a bearer token and an
 * organisation id keeps, on the job and on each attempt (as the API answers
 * them), the code, the status and the message with those removed; the
 * executor's log line has the whole text. Real HTTP to the fake provider,
 * an executor in-process, SQLite and PostgreSQL.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const TOKEN = 'tok_alice_redaction_0123456789';
const KEY = 'sk-proj-Zq8rT2vX9yW4uB6nM1kL3jH5gF7dS0aP';
const ORG = 'org-Xy7Wv6Ut5Sr4Qp3On2';
const BEARER = 'eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2ln';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`provider error text on the job and in the logs (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let keyFake: FakeProvider;
    let orgFake: FakeProvider;
    let runtime: Runtime;
    let executor: Executor;
    const lines: Record<string, unknown>[] = [];
    let app: ReturnType<typeof buildApp>;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      [keyFake, orgFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
      const sink = new Writable({
        write(chunk, _encoding, done) {
          for (const line of String(chunk).split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line));
          done();
        },
      });
      const logger = pino({ level: 'info' }, sink);
      const config = defineConfig({
        apiKeys: { [TOKEN]: 'alice' },
        providers: {
          primary: { type: 'openai', baseUrl: `${keyFake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 },
          fallback: { type: 'openai', baseUrl: `${orgFake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs: 5_000 },
        },
        routes: { chat: { providers: ['primary', 'fallback'] } },
      });
      runtime = await createRuntime({ config, store, logger });
      executor = runtime.createExecutor({ pollMs: 50 });
      await executor.start();
      app = buildApp({ store, config, executor, metrics: createMetrics({ processMetrics: false }), logger });
      await app.ready();
    });
    afterAll(async () => {
      await app?.close();
      await runtime?.close(100);
      await Promise.all([keyFake?.close(), orgFake?.close()]);
      await cleanup?.();
    });

    it('job.error and every attempt error keep code, status and a redacted message; the log line has the whole text', async () => {
      keyFake.script([{ status: 401, error: { type: 'invalid_request_error', code: 'invalid_api_key', message: `Incorrect API key provided: ${KEY}. You can find your API key at https://platform.openai.com/account/api-keys.` } }]);
      orgFake.script([{ status: 429, error: { type: 'requests', message: `Rate limit reached for gpt-4o in organization ${ORG} on requests per min (RPM): Limit 3, Used 3. Upstream said Authorization: Bearer ${BEARER}` } }]);
      const created = await app.inject({
        method: 'POST', url: '/v1/jobs', headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'redact-1', 'content-type': 'application/json' },
        payload: JSON.stringify({ route: 'chat', input: { messages: [{ role: 'user', content: 'hi' }] } }),
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json<{ id: string }>().id;
      const read = await app.inject({ method: 'GET', url: `/v1/jobs/${id}?wait=10`, headers: { authorization: `Bearer ${TOKEN}` } });
      const job = read.json<{ state: string; error: unknown; attempts: { provider: string; state: string; error: { code: string; message: string; details: { status: number } } }[] }>();
      expect(job.state).toBe('failed');
      const tenantView = JSON.stringify({ error: job.error, attempts: job.attempts });
      for (const secret of [KEY, 'Zq8rT2vX9yW4', ORG, 'Xy7Wv6Ut5Sr4Qp3On2', BEARER]) expect(tenantView).not.toContain(secret);
      const [first, second] = job.attempts;
      expect(first).toMatchObject({ provider: 'primary', state: 'failed', error: { code: 'provider_rejected', details: { status: 401 } } });
      expect(first!.error.message).toMatch(/primary answered 401 .*Incorrect API key provided: \[redacted\]\. You can find your API key at https:\/\/platform\.openai\.com/);
      expect(second).toMatchObject({ provider: 'fallback', state: 'failed', error: { code: 'provider_rate_limited', details: { status: 429 } } });
      expect(second!.error.message).toMatch(/Rate limit reached for gpt-4o in organization org-\[redacted\] on requests per min/);
      expect(tenantView).toContain('Bearer [redacted]');

      // The operator's log has it all.
      const logged = JSON.stringify(lines.filter((l) => l.msg === 'provider error'));
      expect(logged).toContain(KEY);
      expect(logged).toContain(ORG);
      expect(logged).toContain(BEARER);
      expect(lines.filter((l) => l.msg === 'provider error').map((l) => l.status)).toEqual([401, 429]);
    });
  });
}
