/**
 * The gateway for the real-client tests: the in-process app on a real
 * socket, an executor and the runtime (with its routing gates, so
 * `unsupported:<member>` skips apply as in `onejob serve`), over a fresh
 * store of one test database, and two fake provider servers (each speaks
 * both protocols, by path).
 */
import type { FastifyInstance } from 'fastify';
import { defineConfig } from '../../src/config/config.ts';
import type { JobWithAttempts } from '../../src/core/types.ts';
import type { Executor } from '../../src/executor/executor.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, type TestDatabase } from '../support/databases.ts';

export const TOKEN = 'tok_alice_gateway_0123456789';
export const OWNER = 'alice';
/** Another owner's token: its requests never see alice's jobs. */
export const TOKEN_BOB = 'tok_bob_gateway_0123456789';

/** A running gateway. */
export interface Gateway {
  readonly store: JobStore;
  /** The server root, e.g. `http://127.0.0.1:40000`. */
  readonly origin: string;
  /** Serves the `openai` providers (`gpt`, `gpt-b`). */
  readonly openaiFake: FakeProvider;
  /** Serves the `anthropic` provider (`claude`). */
  readonly anthropicFake: FakeProvider;
  jobsWithKey(key: string): Promise<JobWithAttempts[]>;
  reset(): void;
  close(): Promise<void>;
}

/** Options of {@link startGateway}. */
export interface StartGatewayOptions {
  /** How long a gateway request waits for its job before `409 attempt_in_flight`. Default 5000. */
  readonly chatMaxWaitMs?: number;
  /** The providers' `timeoutMs` (past it, an attempt is `unknown`). Default 5000. */
  readonly providerTimeoutMs?: number;
}

/**
 * Routes: `gpt` (openai), `claude` (anthropic), `gpt-then-claude` (failover
 * openai → anthropic), `claude-then-gpt` (anthropic first: skipped for
 * members it cannot express).
 */
export async function startGateway(db: TestDatabase, options: StartGatewayOptions = {}): Promise<Gateway> {
  const { store, cleanup } = await createTestStore(db);
  const [openaiFake, anthropicFake] = await Promise.all([startFakeProvider(), startFakeProvider()]);
  const timeoutMs = options.providerTimeoutMs ?? 5_000;
  const config = defineConfig({
    apiKeys: { [TOKEN]: OWNER, [TOKEN_BOB]: 'bob' },
    providers: {
      gpt: { type: 'openai', baseUrl: `${openaiFake.url}/v1`, apiKey: 'k', model: 'gpt-fake', timeoutMs },
      claude: { type: 'anthropic', baseUrl: anthropicFake.url, apiKey: 'k', model: 'claude-fake', timeoutMs },
    },
    routes: {
      gpt: { providers: ['gpt'] },
      claude: { providers: ['claude'] },
      'gpt-then-claude': { providers: ['gpt', 'claude'] },
      'claude-then-gpt': { providers: ['claude', 'gpt'] },
    },
  });
  const runtime: Runtime = await createRuntime({ config, store });
  const executor: Executor = runtime.createExecutor({ pollMs: 100, lateAnswerGraceMs: 500 });
  await executor.start();
  const app: FastifyInstance = buildApp({ store, config, eligible: runtime.eligible, executor, waitRecheckMs: 200, chatCompletions: { maxWaitMs: options.chatMaxWaitMs ?? 5_000, retryAfterMs: 100 } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    store,
    origin: `http://127.0.0.1:${address.port}`,
    openaiFake,
    anthropicFake,
    jobsWithKey: async (key) => (await store.listJobs({ ownerId: OWNER, limit: 200 })).jobs.filter((j) => j.idempotencyKey === key),
    reset: () => {
      openaiFake.reset();
      anthropicFake.reset();
    },
    close: async () => {
      await app.close();
      await runtime.close(100);
      await Promise.all([openaiFake.close(), anthropicFake.close()]);
      await cleanup();
    },
  };
}
