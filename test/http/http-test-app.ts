/**
 * The HTTP app on a real socket (127.0.0.1, a free port) over a fresh,
 * migrated store of one test database engine, plus small request helpers.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Metrics } from '../../src/http/metrics.ts';
import { defineConfig, type OnejobConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import type { JobWithAttempts } from '../../src/core/types.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, type TestDatabase } from '../support/databases.ts';

/** Tokens of the test config. */
export const ALICE = 'tok_alice_0123456789';
export const BOB = 'tok_bob_0123456789';

/** The test config: two owners, two providers, a plain and a hedged route. */
export function testConfig(overrides: { bodyLimitBytes?: number } = {}): OnejobConfig {
  const { bodyLimitBytes } = overrides;
  return defineConfig({
    apiKeys: { [ALICE]: 'alice', [BOB]: 'bob' },
    providers: {
      p1: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm1' },
      p2: { type: 'anthropic', baseUrl: 'http://127.0.0.1:9', model: 'm2' },
    },
    routes: {
      summarize: { providers: ['p1', 'p2'] },
      hedged: { providers: ['p1', 'p2'], hedgeAfterMs: 0 },
    },
    bodyLimitBytes,
  });
}

/** A running test server. */
export interface TestServer {
  readonly app: FastifyInstance;
  readonly store: JobStore;
  readonly baseUrl: string;
  /** The database URL (to open a second store, as another process would). */
  readonly url: string;
  /** Sends a request; `body` objects are sent as JSON, strings as they are. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Every job of `owner` (all pages). */
  allJobs(owner: string): Promise<JobWithAttempts[]>;
  close(): Promise<void>;
}

/** Options of {@link TestServer.request}. */
export interface RequestOptions {
  /** Bearer token; null sends no Authorization header. Default: Alice's. */
  token?: string | null;
  key?: string;
  body?: unknown;
  /** Raw body text (sent as application/json unless contentType says otherwise). */
  raw?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** A response with its parsed JSON body (or null). */
export interface TestResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly text: string;
}

/** Starts the app for `db` on 127.0.0.1 and a free port. */
export async function startTestServer(
  db: TestDatabase,
  options: { bodyLimitBytes?: number; waitRecheckMs?: number; logger?: Logger; metrics?: Metrics } = {},
): Promise<TestServer> {
  const { store, url, cleanup } = await createTestStore(db);
  const app = buildApp({ store, config: testConfig(options), waitRecheckMs: options.waitRecheckMs, logger: options.logger, metrics: options.metrics });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const baseUrl = `http://127.0.0.1:${address.port}`;
  return {
    app,
    store,
    baseUrl,
    url,
    async request(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) };
      const token = o.token === undefined ? ALICE : o.token;
      if (token !== null) headers.authorization = `Bearer ${token}`;
      if (o.key !== undefined) headers['idempotency-key'] = o.key;
      let payload: string | undefined;
      if (o.raw !== undefined) payload = o.raw;
      else if (o.body !== undefined) payload = JSON.stringify(o.body);
      if (payload !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
      const res = await fetch(baseUrl + path, { method, headers, body: payload });
      const text = await res.text();
      let body: unknown = null;
      try {
        body = text === '' ? null : JSON.parse(text);
      } catch {
        body = null;
      }
      return { status: res.status, headers: res.headers, body, text };
    },
    async allJobs(owner) {
      const jobs: JobWithAttempts[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.listJobs({ ownerId: owner, limit: 200, cursor });
        jobs.push(...page.jobs);
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      return jobs;
    },
    async close() {
      await app.close();
      await cleanup();
    },
  };
}
