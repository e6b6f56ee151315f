/**
 * A gateway with batches for the batch tests: the in-process app on a real
 * socket, one executor, the batch runner, over a fresh store of one test
 * database, and a fake OpenAI provider (`gpt`) and Anthropic one (`claude`).
 */
import type { FastifyInstance } from 'fastify';
import type { BatchRunner } from '../../src/batches/batch-runner.ts';
import type { UploadLimits } from '../../src/batches/file-upload.ts';
import { defineConfig } from '../../src/config/config.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, type TestDatabase } from '../support/databases.ts';

export const TOKEN = 'tok_alice_batches_0123456789';
export const OWNER = 'alice';
export const TOKEN_BOB = 'tok_bob_batches_0123456789';

export interface BatchGateway {
  readonly store: JobStore;
  readonly origin: string;
  readonly url: string;
  readonly openaiFake: FakeProvider;
  readonly anthropicFake: FakeProvider;
  readonly executor: Executor;
  readonly runner: BatchRunner;
  close(): Promise<void>;
}

export interface BatchGatewayOptions {
  readonly uploadLimits?: UploadLimits;
  readonly concurrency?: number;
  readonly maxShare?: number;
  readonly timeoutMs?: number;
  /** The batch runner's clock (expiry). */
  readonly now?: () => Date;
}

export async function startBatchGateway(db: TestDatabase, options: BatchGatewayOptions = {}): Promise<BatchGateway> {
  const { store, url, cleanup } = await createTestStore(db);
  const [openaiFake, anthropicFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
  const timeoutMs = options.timeoutMs ?? 5_000;
  const config = defineConfig({
    apiKeys: { [TOKEN]: OWNER, [TOKEN_BOB]: 'bob' },
    providers: {
      gpt: { type: 'openai', baseUrl: `${openaiFake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs, pricing: { inputPerMTok: 1, outputPerMTok: 2 } },
      claude: { type: 'anthropic', baseUrl: anthropicFake.url, apiKey: 'k', model: 'claude-fake', timeoutMs },
    },
    routes: { gpt: { providers: ['gpt'], hedgeAfterMs: 50 }, claude: { providers: ['claude'] } },
    ...(options.maxShare === undefined ? {} : { batch: { maxShare: options.maxShare } }),
  });
  const runtime: Runtime = await createRuntime({ config, store });
  const executor = runtime.createExecutor({ pollMs: 100, lateAnswerGraceMs: 200, concurrency: options.concurrency ?? 64 });
  await executor.start();
  const runner = runtime.startBatches({ busyMs: 20, idleMs: 100, now: options.now });
  const app: FastifyInstance = buildApp({
    store, config, eligible: runtime.eligible, executor, waitRecheckMs: 200,
    batches: { uploadLimits: options.uploadLimits, onChange: () => runtime.wakeBatches() },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    store, url, openaiFake, anthropicFake, executor, runner,
    origin: `http://127.0.0.1:${address.port}`,
    async close() {
      await app.close();
      await runtime.close(0);
      await Promise.all([openaiFake.close(), anthropicFake.close()]);
      await cleanup();
    },
  };
}

/** A JSONL batch input file of chat lines `line-<i>` on route `gpt`. */
export function chatLines(n: number, text: (i: number) => string = (i) => `line-${i}`): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    out.push(JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt', messages: [{ role: 'user', content: text(i) }] } }));
  }
  return out.join('\n') + '\n';
}

/** Rows of `table` in the test database behind `url` (an outside look: no store method lists every upload). */
export async function countRows(url: string, table: string, where = 'true'): Promise<number> {
  if (url.startsWith('sqlite:')) {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    try {
      return Number((db.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where}`).get() as { n: number }).n);
    } finally {
      db.close();
    }
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`)).rows[0].n);
  } finally {
    await client.end();
  }
}

/** Polls `read` until `done` holds (or `timeoutMs` passes: then throws with the last value). */
export async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: T = await read();
  while (!done(last)) {
    if (Date.now() > until) throw new Error(`timed out; last value: ${JSON.stringify(last).slice(0, 2000)}`);
    await new Promise((r) => setTimeout(r, everyMs));
    last = await read();
  }
  return last;
}

/** Runs one statement on the test database behind `url` (what only time would do: a batch's window ending). */
export async function execSql(url: string, sql: string): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.pragma('busy_timeout = 5000');
      db.prepare(sql).run();
    } finally {
      db.close();
    }
    return;
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
