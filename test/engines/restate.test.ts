/**
 * Restate with a real crash: the Restate server from npm
 * (@restatedev/restate-server 1.7) and a service (`agent.summarize`, SDK
 * 1.17) in its own process on Node 22+ (test/engines/support/restate-runtime.ts
 * says where that Node comes from). The service process is killed with
 * SIGKILL after the provider accepted the handler's call and before its
 * `ctx.run` was journaled; Restate retries the invocation on a new service
 * process, which replays the handler and runs the call again. The fake
 * provider counts the calls. Through onejob (`restateChat`: the key is the
 * invocation id and the call's ordinal) the provider ran once and the
 * invocation's result is the first answer; the control, the same handler
 * calling the provider directly, calls it twice.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';
import { TOKEN, startGateway, type Gateway } from '../clients/gateway-server.ts';
import { nodeForRestate, startRestateServer, type RestateServer } from './support/restate-runtime.ts';
import { startWorker, type WorkerProcess } from './support/worker-process.ts';

const WORKER = 'test/engines/workers/restate-worker.ts';
const postgres = TEST_DATABASES.find((d) => d.name === 'postgres')!;
const runtime = nodeForRestate();

describe.skipIf(postgres.skip !== null || runtime.skip !== null)(`Restate: a service killed -9 between the provider and the journal (${runtime.skip ?? 'Node 22+ service'})`, { timeout: 150_000 }, () => {
  let gateway: Gateway;
  let restate: RestateServer;
  let port: number;
  const workers: WorkerProcess[] = [];

  const service = async (env: Record<string, string>): Promise<WorkerProcess> => {
    const w = startWorker(WORKER, { PORT: String(port), ONEJOB_URL: gateway.origin, ONEJOB_TOKEN: TOKEN, FAKE_URL: gateway.openaiFake.url, ...env }, { node: runtime.node! });
    workers.push(w);
    const listening = await w.waitFor('listening');
    expect(Number((listening.node as string).slice(1).split('.')[0])).toBeGreaterThanOrEqual(22);
    return w;
  };
  /** Starts `agent.summarize` (`/send`): its invocation id. */
  const invoke = async (): Promise<string> => {
    for (let i = 0; ; i++) {
      const res = await fetch(`${restate.ingressUrl}/agent/summarize/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify('the quarterly report') });
      const text = await res.text();
      if (res.ok) return (JSON.parse(text) as { invocationId: string }).invocationId;
      // The ingress learns of a new deployment a moment after the admin API.
      if (res.status !== 404 || i > 40) throw new Error(`invoke: ${res.status} ${text}`);
      await new Promise((ok) => setTimeout(ok, 250));
    }
  };
  const resultOf = async (invocationId: string): Promise<unknown> => {
    const res = await fetch(`${restate.ingressUrl}/restate/invocation/${invocationId}/attach`);
    const text = await res.text();
    if (!res.ok) throw new Error(`attach ${invocationId}: ${res.status} ${text}\n${restate.output().slice(-3000)}`);
    return JSON.parse(text) as unknown;
  };

  beforeAll(async () => {
    // Provider deadline 30 s: a re-run that joins a held call must find it still running after a restart.
    gateway = await startGateway(postgres, { providerTimeoutMs: 30_000 });
    restate = await startRestateServer();
    port = await freePort();
    const first = await service({ MODE: 'onejob' });
    await restate.register(`http://127.0.0.1:${port}`);
    await first.kill9();
  }, 180_000);
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
    await restate?.close();
    await gateway?.close();
  });
  beforeEach(() => gateway.reset());
  // One service process at a time: they all listen on the registered deployment's port.
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
  });

  it('through onejob: the retried invocation gets the first answer and the provider ran once', async () => {
    gateway.openaiFake.script([{ reply: 'first answer' }, { reply: 'second answer' }]);
    const first = await service({ MODE: 'onejob', HOLD_AFTER_ANSWER: '1' });
    const invocationId = await invoke();
    const answered = await first.waitFor('answered');
    await first.waitFor('holding');
    await first.kill9();
    expect(answered.content).toBe('first answer');
    expect(answered.idempotencyKey).toBe(`step:restate:${invocationId}:0`);
    expect(gateway.openaiFake.calls).toHaveLength(1);

    const second = await service({ MODE: 'onejob' });
    const result = await resultOf(invocationId);
    const again = await second.waitFor('answered');
    expect((await second.waitFor('handler-start')).invocationId).toBe(invocationId);
    expect(again.idempotencyKey).toBe(answered.idempotencyKey);
    expect(result).toBe('summary: first answer');
    expect(gateway.openaiFake.calls).toHaveLength(1);
    const jobs = await gateway.jobsWithKey(String(answered.idempotencyKey));
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.attempts).toHaveLength(1);
  });

  it('through onejob, killed while the provider still holds the call: the retried invocation joins that call', async () => {
    gateway.openaiFake.script([{ gate: 'first', reply: 'first answer' }, { reply: 'second answer' }]);
    const first = await service({ MODE: 'onejob' });
    const invocationId = await invoke();
    await first.waitFor('handler-start');
    await gateway.openaiFake.waitForCalls(1);
    await first.kill9();

    const second = await service({ MODE: 'onejob' });
    await second.waitFor('handler-start');
    await new Promise((ok) => setTimeout(ok, 1000));
    expect(second.events.some((e) => e.event === 'answered')).toBe(false);
    gateway.openaiFake.release('first');
    expect(await resultOf(invocationId)).toBe('summary: first answer');
    expect(gateway.openaiFake.calls).toHaveLength(1);
    const jobs = await gateway.jobsWithKey(`step:restate:${invocationId}:0`);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.attempts).toHaveLength(1);
  });

  it('the control, calling the provider directly in ctx.run: the retried invocation calls it a second time', async () => {
    gateway.openaiFake.script([{ reply: 'first answer' }, { reply: 'second answer' }]);
    const first = await service({ MODE: 'direct', HOLD_AFTER_ANSWER: '1' });
    const invocationId = await invoke();
    expect((await first.waitFor('answered')).content).toBe('first answer');
    await first.waitFor('holding');
    await first.kill9();
    await service({ MODE: 'direct' });
    expect(await resultOf(invocationId)).toBe('summary: second answer');
    expect(gateway.openaiFake.calls).toHaveLength(2);
  });
});
