/**
 * IntentSession (the logic under useIntent()) on Node against a real
 * `onejob serve`, with a Map standing in for sessionStorage: the key's
 * lifetime of CONTRACT §10 step by step.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IntentSession, OnejobClient, intentStorageKey, type IntentSnapshot, type IntentStorage } from '../../src/client/index.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { TOKEN, startOnejobServe, type OnejobServe } from './onejob-serve.ts';

const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;
const input = { messages: [{ role: 'user', content: 'Summarize: intent' }] };

function memoryStorage(): IntentStorage & { map: Map<string, string> } {
  const map = new Map<string, string>();
  return { map, getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v), removeItem: (k) => void map.delete(k) };
}

/** Resolves with the first snapshot that satisfies `test`. */
function until(session: IntentSession, test: (s: IntentSnapshot) => boolean): Promise<IntentSnapshot> {
  return new Promise((ok) => {
    const check = (): void => {
      const s = session.getSnapshot();
      if (test(s)) {
        unsubscribe();
        ok(s);
      }
    };
    const unsubscribe = session.subscribe(check);
    check();
  });
}

describe('IntentSession against onejob serve (sqlite)', () => {
  let server: OnejobServe;
  let client: OnejobClient;
  beforeAll(async () => {
    server = await startOnejobServe(sqlite);
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => {
    server.resetFakes();
    client = new OnejobClient({ baseUrl: server.url, token: TOKEN, waitSliceSeconds: 1 });
  });

  it('minted at start, kept across starts and a "reload", let go when the job is terminal', async () => {
    server.primary.setDefault({ gate: 'go', reply: 'the summary' });
    const storage = memoryStorage();
    const first = new IntentSession({ client, route: 'summarize', storage });
    expect(first.getSnapshot()).toMatchObject({ status: 'idle', key: null });
    first.start(input);
    const key = first.getSnapshot().key;
    expect(key).toMatch(/^ik_/);
    expect(JSON.parse(storage.map.get(intentStorageKey('summarize'))!)).toMatchObject({ key, input });
    const { job } = await until(first, (s) => s.job !== null);
    first.start(input); // a double click
    expect(first.getSnapshot().key).toBe(key);
    await server.primary.waitForCalls(1);
    first.pause(); // the page goes away

    const reloaded = new IntentSession({ client, route: 'summarize', storage });
    expect(reloaded.getSnapshot()).toMatchObject({ key, input });
    reloaded.resume();
    await until(reloaded, (s) => s.job?.id === job!.id);
    server.primary.release('go');
    const done = await until(reloaded, (s) => s.status === 'done');
    expect(done).toMatchObject({ key: null, job: { id: job!.id, state: 'succeeded', result: { content: 'the summary' } } });
    expect(storage.map.size).toBe(0);
    expect(server.primary.calls.filter((c) => c.jobId === job!.id)).toHaveLength(1);

    reloaded.start(input); // the intent had its outcome: this is a new one
    const next = await until(reloaded, (s) => s.job !== null && s.job.id !== job!.id);
    expect(next.key).not.toBe(key);
  });

  it('another input under a held key is the server\'s idempotency_key_reused; reset() lets the key go', async () => {
    server.primary.setDefault({ hang: true });
    const session = new IntentSession({ client, route: 'summarize', storage: memoryStorage() });
    session.start(input);
    await until(session, (s) => s.job !== null);
    const key = session.getSnapshot().key;
    session.start({ messages: [{ role: 'user', content: 'something else' }] });
    const refused = await until(session, (s) => s.error !== null);
    expect(refused.error!.code).toBe('idempotency_key_reused');
    expect(refused.key).toBe(key);
    await server.primary.waitForCalls(1);
    for (let i = 0; i < 100 && (await client.listAttempts(refused.job!.id))[0]?.state !== 'running'; i++) await new Promise((r) => setTimeout(r, 20));
    await session.fallback(); // running, no hedge allowed on this route
    expect(session.getSnapshot().error?.code).toBe('attempt_in_flight');
    session.reset();
    expect(session.getSnapshot()).toMatchObject({ status: 'idle', key: null, job: null, error: null });
    session.start(input);
    expect(session.getSnapshot().key).not.toBe(key);
    await session.cancel().catch(() => undefined);
    session.pause();
  });

  it('fallback() on a job in doubt resolves the attempt cancelled; the chain moves on to the fallback', async () => {
    server.flaky.setDefault({ hang: true });
    server.fallback.setDefault({ reply: 'from the fallback' });
    const session = new IntentSession({ client, route: 'doubtful', storage: memoryStorage() });
    session.start(input);
    await until(session, (s) => s.status === 'in_doubt');
    await session.fallback();
    const done = await until(session, (s) => s.status === 'done');
    expect(done.job!.attempts.map((a) => [a.provider, a.kind, a.state])).toEqual([['flaky', 'first', 'cancelled'], ['fallback', 'failover', 'succeeded']]);
    expect(done.error).toBeNull();
  });
});
