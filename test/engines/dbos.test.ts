/**
 * DBOS Transact (@dbos-inc/dbos-sdk, on this machine's PostgreSQL) with a
 * real crash: the worker process is killed with SIGKILL after the provider
 * accepted the step's call and before DBOS checkpointed the step; a new
 * worker launches, DBOS recovers the workflow and runs the step again. The
 * fake provider counts the calls. With onejob (`dbosChat`: the key is the
 * workflow id and the step's function id) the provider ran once and the
 * workflow's result is that first answer; the control, the same workflow
 * calling the provider directly, calls it twice. docs/durable-engines.md.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { createPostgresDatabase } from '../support/postgres.ts';
import { TOKEN, startGateway, type Gateway } from '../clients/gateway-server.ts';
import { startWorker, type WorkerProcess } from './support/worker-process.ts';

const WORKER = 'test/engines/workers/dbos-worker.ts';
const postgres = TEST_DATABASES.find((d) => d.name === 'postgres')!;

describe.skipIf(postgres.skip !== null)('DBOS: a worker killed -9 between the provider and the step checkpoint', { timeout: 150_000 }, () => {
  let gateway: Gateway;
  let systemDb: { url: string; drop(): Promise<void> };
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    // Provider deadline 30 s: a re-run that joins a held call must find it still running after a restart.
    gateway = await startGateway(postgres, { providerTimeoutMs: 30_000 });
    systemDb = await createPostgresDatabase();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
    await gateway?.close();
    await systemDb?.drop();
  });
  beforeEach(() => gateway.reset());

  const worker = (env: Record<string, string>): WorkerProcess => {
    const w = startWorker(WORKER, {
      DBOS_SYSTEM_DATABASE_URL: systemDb.url, ONEJOB_URL: gateway.origin, ONEJOB_TOKEN: TOKEN, FAKE_URL: gateway.openaiFake.url, ...env,
    });
    workers.push(w);
    return w;
  };

  it('through onejob: the recovered step gets the first answer and the provider ran once', async () => {
    gateway.openaiFake.script([{ reply: 'first answer' }, { reply: 'second answer' }]);
    const workflowId = `wf-${randomUUID()}`;
    const first = worker({ MODE: 'onejob', START: '1', HOLD_AFTER_ANSWER: '1', WORKFLOW_ID: workflowId });
    const answered = await first.waitFor('answered');
    await first.waitFor('holding');
    await first.kill9();
    expect(gateway.openaiFake.calls).toHaveLength(1);
    expect(answered.content).toBe('first answer');

    const second = worker({ MODE: 'onejob', WORKFLOW_ID: workflowId });
    const result = await second.waitFor('result');
    const rerun = await second.waitFor('step-start');
    const again = await second.waitFor('answered');
    // DBOS did run the step again (it had no checkpoint), with the same identity, so the same key.
    expect(rerun.workflowId).toBe(workflowId);
    expect(rerun.stepId).toBe((await first.waitFor('step-start')).stepId);
    expect(again.idempotencyKey).toBe(answered.idempotencyKey);
    expect(again.idempotencyKey).toBe(`step:dbos:${workflowId}:${String(rerun.stepId)}`);
    expect(again.jobId).toBe(answered.jobId);
    expect(result.result).toBe('summary: first answer');
    expect(result.status).toBe('SUCCESS');
    expect(gateway.openaiFake.calls).toHaveLength(1);
    const jobs = await gateway.jobsWithKey(String(answered.idempotencyKey));
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.state).toBe('succeeded');
    expect(jobs[0]!.attempts).toHaveLength(1);
  });

  it('through onejob, killed while the provider still holds the call: the recovered step joins that call', async () => {
    gateway.openaiFake.script([{ gate: 'first', reply: 'first answer' }, { reply: 'second answer' }]);
    const workflowId = `wf-${randomUUID()}`;
    const first = worker({ MODE: 'onejob', START: '1', WORKFLOW_ID: workflowId });
    await first.waitFor('step-start');
    await gateway.openaiFake.waitForCalls(1);
    await first.kill9();

    const second = worker({ MODE: 'onejob', WORKFLOW_ID: workflowId });
    await second.waitFor('step-start');
    // The re-run's request reaches the gateway and waits on the running job; then the provider answers.
    await new Promise((ok) => setTimeout(ok, 1000));
    expect(second.events.some((e) => e.event === 'answered')).toBe(false);
    gateway.openaiFake.release('first');
    const result = await second.waitFor('result');
    expect(result.result).toBe('summary: first answer');
    expect(gateway.openaiFake.calls).toHaveLength(1);
    const key = String((await second.waitFor('answered')).idempotencyKey);
    const jobs = await gateway.jobsWithKey(key);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.attempts).toHaveLength(1);
  });

  it('the control, calling the provider directly: the recovered step calls it a second time', async () => {
    gateway.openaiFake.script([{ reply: 'first answer' }, { reply: 'second answer' }]);
    const workflowId = `wf-${randomUUID()}`;
    const first = worker({ MODE: 'direct', START: '1', HOLD_AFTER_ANSWER: '1', WORKFLOW_ID: workflowId });
    expect((await first.waitFor('answered')).content).toBe('first answer');
    await first.waitFor('holding');
    await first.kill9();
    const second = worker({ MODE: 'direct', WORKFLOW_ID: workflowId });
    const result = await second.waitFor('result');
    expect(gateway.openaiFake.calls).toHaveLength(2);
    expect(result.result).toBe('summary: second answer');
  });
});
