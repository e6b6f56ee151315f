/**
 * The chaos rig's callback replayer (chaos/callback-replayer.ts) against a
 * real onejob app and the fake task service: the fake's signed callbacks go
 * through the relay and settle the doubt; replaying them byte for byte, onto
 * their own attempt and onto another's, is 401 every time (CONTRACT §15) and
 * changes nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { CallbackRelay } from '../../chaos/callback-replayer.ts';
import { defineConfig } from '../../src/config/config.ts';
import { Reconciler } from '../../src/executor/reconciler.ts';
import { buildApp } from '../../src/http/build-app.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const SECRET = 'whsec_chaos_doubt_0123456789';
const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

describe('chaos: the callback replayer', () => {
  let store: JobStore;
  let cleanup: () => Promise<void>;
  let app: FastifyInstance;
  let relay: CallbackRelay;
  let fake: FakeProvider;
  let providers: Map<string, Provider>;

  beforeEach(async () => {
    ({ store, cleanup } = await createTestStore(sqlite));
    relay = new CallbackRelay();
    await relay.listen();
    fake = await startFakeProvider({ taskCallback: { url: relay.callbackUrl, secret: SECRET } });
    const config = defineConfig({
      apiKeys: { tok_alice_0123456789: 'alice' },
      providers: { dt: { type: 'task', baseUrl: `${fake.url}/v1/tasks`, model: 'task', callbackSecret: SECRET } },
      routes: { r: { providers: ['dt'] } },
    });
    providers = new Map(Object.entries(config.providers).map(([name, p]) => [name, createProvider(name, p as never)]));
    app = buildApp({ store, config, reconciler: new Reconciler({ store, providers }) });
    await app.listen({ host: '127.0.0.1', port: 0 });
    relay.setTarget(`http://127.0.0.1:${(app.server.address() as { port: number }).port}`);
  });
  afterEach(async () => {
    await app.close();
    await Promise.all([...providers.values()].map((p) => p.close()));
    await fake.close();
    await relay.close();
    await cleanup();
  });

  /** A task attempt in doubt whose task at the fake ends after `runMs` and calls back. */
  async function inDoubt(key: string, output: string, runMs: number) {
    const lease = { leaseOwner: 'exe_gone', leaseMs: 30_000 };
    const { claimed } = await store.createJob({ ownerId: 'alice', idempotencyKey: key, route: 'r', input: { prompt: key }, providers: ['dt'], firstAttempt: lease });
    const a = claimed!.attempt;
    const fence = { ownerId: 'alice', attemptId: a.id, leaseOwner: lease.leaseOwner, leaseToken: a.leaseToken! };
    fake.script([{ reply: output, task: { runMs, output } }]);
    const created = await fetch(`${fake.url}/v1/tasks`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': a.id }, body: JSON.stringify({ input: { prompt: key } }) });
    expect(await store.recordProviderRequestId({ ...fence, providerRequestId: ((await created.json()) as { id: string }).id })).toBe(true);
    expect(await store.markUnknown({ ...fence, reason: { code: 'deadline_exceeded', message: 'no answer' } })).toBe(true);
    return a;
  }

  it('relays the fake\'s callbacks (the doubt ends resolved_by callback); every replay is 401 and changes nothing', async () => {
    const a = await inDoubt('first', 'render of the first', 100);
    const b = await inDoubt('second', 'render of the second', 2_000);
    for (let i = 0; i < 200 && relay.kept < 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(relay.kept).toBe(1);
    expect(await store.getJob('alice', a.jobId)).toMatchObject({ state: 'succeeded', result: { content: 'render of the first' }, attempts: [{ resolvedBy: 'callback' }] });
    // b is still in doubt: a's delivery replayed onto it must not make a's render its result.
    let round = await relay.replay(3, () => 0);
    expect(round).toMatchObject({ sent: 3, accepted: 0, statuses: { 401: 3 } });
    expect((await store.getAttempt('alice', b.id))!.state).toBe('unknown');
    for (let i = 0; i < 300 && relay.kept < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await store.getJob('alice', b.jobId)).toMatchObject({ state: 'succeeded', result: { content: 'render of the second' } });
    round = await relay.replay(4, Math.random);
    expect(round.accepted).toBe(0);
    expect(round.sent).toBe(8);
    expect(await store.getJob('alice', a.jobId)).toMatchObject({ result: { content: 'render of the first' } });
    expect(await store.getJob('alice', b.jobId)).toMatchObject({ result: { content: 'render of the second' } });
  });
});
