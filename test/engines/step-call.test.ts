/**
 * stepChat / stepJob (src/client/step-call.ts) against the gateway over a
 * real socket, on SQLite and PostgreSQL: a step run twice at once is one job
 * and one provider call (the second joins the first, for POST /v1/jobs too:
 * create, then wait); a call in doubt raises OnejobInDoubtError with the job
 * id, a re-run with the same key starts nothing, and once someone resolves
 * the attempt the same key answers the outcome.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OnejobClient, OnejobInDoubtError, isOnejobClientError, isOnejobInDoubtError, stepChat, stepJob, stepKey } from '../../src/client/index.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { TOKEN, startGateway, type Gateway } from '../clients/gateway-server.ts';
import { dbosChat } from '../../src/dbos/index.ts';
import { inDoubtOf, restateChat, restateStepKey } from '../../src/restate/index.ts';
import type { Context as RestateContext } from '@restatedev/restate-sdk';

/** The two members of a Restate context the helpers use; `run` runs the action as the SDK would on a first execution. */
function fakeRestateContext(invocationId: string): RestateContext {
  return { request: () => ({ id: invocationId }), run: (_name: string, action: () => Promise<unknown>) => action() } as unknown as RestateContext;
}

const messages = [{ role: 'user' as const, content: 'plan the trip' }];

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`stepChat and stepJob (${db.name})`, () => {
    let gateway: Gateway;
    let onejob: OnejobClient;
    beforeAll(async () => {
      gateway = await startGateway(db, { providerTimeoutMs: 1500, chatMaxWaitMs: 5000 });
      onejob = new OnejobClient({ baseUrl: gateway.origin, token: TOKEN, inDoubtPollMs: 50 });
    });
    afterAll(async () => gateway?.close());
    beforeEach(() => gateway.reset());

    it('stepJob: a step run twice while its job runs creates one job, and both runs wait for it and get it', async () => {
      gateway.openaiFake.script([{ gate: 'slow', reply: 'the plan' }]);
      const key = stepKey('test', `join-${db.name}`, 1);
      const first = stepJob(onejob, key, { route: 'gpt', input: { messages } });
      await gateway.openaiFake.waitForCalls(1);
      const second = stepJob(onejob, key, { route: 'gpt', input: { messages } });
      await new Promise((ok) => setTimeout(ok, 300));
      gateway.openaiFake.release('slow');
      const [a, b] = await Promise.all([first, second]);
      expect(a.state).toBe('succeeded');
      expect(b.id).toBe(a.id);
      expect(JSON.stringify(b.result)).toContain('the plan');
      expect(gateway.openaiFake.calls).toHaveLength(1);
      expect(await gateway.jobsWithKey(key)).toHaveLength(1);
    });

    it('stepChat: a re-run while the first call runs joins it (one job, one provider call, the same answer)', async () => {
      gateway.openaiFake.script([{ gate: 'slow', reply: 'the plan' }]);
      const key = stepKey('test', `chat-join-${db.name}`, 1);
      const first = stepChat(onejob, key, { model: 'gpt', messages });
      await gateway.openaiFake.waitForCalls(1);
      const second = stepChat(onejob, key, { model: 'gpt', messages });
      await new Promise((ok) => setTimeout(ok, 300));
      gateway.openaiFake.release('slow');
      const [a, b] = await Promise.all([first, second]);
      expect(a.body.choices[0]!.message.content).toBe('the plan');
      expect(b.body.choices[0]!.message.content).toBe('the plan');
      expect(b.jobId).toBe(a.jobId);
      expect(gateway.openaiFake.calls).toHaveLength(1);
    });

    it('a call in doubt raises OnejobInDoubtError; a re-run with the same key starts nothing; after a resolution it answers the outcome', async () => {
      gateway.openaiFake.setDefault({ hang: true });
      gateway.anthropicFake.setDefault({ reply: 'from claude' });
      const key = stepKey('test', `doubt-${db.name}`, 1);
      const request = { model: 'gpt-then-claude', messages };
      const error = await stepChat(onejob, key, request, { inDoubtWaitMs: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OnejobInDoubtError);
      expect(isOnejobInDoubtError(error)).toBe(true);
      expect(isOnejobClientError(error, 'attempt_in_doubt')).toBe(true);
      const doubt = error as OnejobInDoubtError;
      expect(doubt.jobId).toMatch(/^job_/);
      expect(doubt.idempotencyKey).toBe(key);
      expect(doubt.attemptId).toMatch(/^att_/);
      expect(doubt.message).toContain(doubt.jobId);

      // The engine runs the step again: same key, the same job still in doubt, no new provider call.
      const again = await stepChat(onejob, key, request, { inDoubtWaitMs: 200 }).catch((e: unknown) => e);
      expect(isOnejobInDoubtError(again) && again.jobId).toBe(doubt.jobId);
      expect(gateway.openaiFake.calls).toHaveLength(1);
      expect(gateway.anthropicFake.calls).toHaveLength(0);

      // Someone resolves it (here: failed, so the job moves on to claude); the step's key answers that outcome.
      const waiting = stepChat(onejob, key, request, { inDoubtWaitMs: 30_000 });
      await new Promise((ok) => setTimeout(ok, 200));
      await onejob.resolveAttempt(doubt.attemptId!, { state: 'failed' });
      const answer = await waiting;
      expect(answer.jobId).toBe(doubt.jobId);
      expect(answer.body.choices[0]!.message.content).toBe('from claude');
      expect(gateway.openaiFake.calls).toHaveLength(1);
      expect(gateway.anthropicFake.calls).toHaveLength(1);
    });

    it('restateChat: a call in doubt ends its ctx.run with a TerminalError carrying the job and key (inDoubtOf reads them)', async () => {
      gateway.openaiFake.setDefault({ hang: true });
      const ctx = fakeRestateContext(`inv_doubt_${db.name}`);
      const error = await restateChat(ctx, onejob, { model: 'gpt', messages }, { inDoubtWaitMs: 0 }).catch((e: unknown) => e);
      expect((error as Error).name).toBe('TerminalError');
      expect((error as { code?: number }).code).toBe(409);
      const doubt = inDoubtOf(error);
      expect(doubt?.jobId).toMatch(/^job_/);
      expect(doubt?.idempotencyKey).toBe(`step:restate:inv_doubt_${db.name}:0`);
      expect(inDoubtOf(new Error('other'))).toBeNull();
      expect(gateway.openaiFake.calls).toHaveLength(1);
    });

    it('stepJob: a job in doubt raises OnejobInDoubtError with its id; a failed job throws job_failed', async () => {
      gateway.openaiFake.setDefault({ hang: true });
      const key = stepKey('test', `job-doubt-${db.name}`, 1);
      const error = await stepJob(onejob, key, { route: 'gpt', input: { messages } }, { inDoubtWaitMs: 100 }).catch((e: unknown) => e);
      expect(isOnejobInDoubtError(error)).toBe(true);
      const doubt = error as OnejobInDoubtError;
      expect((await onejob.getJob(doubt.jobId)).state).toBe('unknown');
      await onejob.resolveAttempt(doubt.attemptId!, { state: 'failed' });
      const failed = await stepJob(onejob, key, { route: 'gpt', input: { messages } }).catch((e: unknown) => e);
      expect(isOnejobClientError(failed, 'job_failed') && failed.jobId).toBe(doubt.jobId);
      expect(gateway.openaiFake.calls).toHaveLength(1);
    });
  });
}

describe('the engines\' keys outside their engines', () => {
  it('restateStepKey counts the calls of one handler execution from 0, and a new execution (a retry) counts again from 0', () => {
    const first = fakeRestateContext('inv_1');
    expect([restateStepKey(first), restateStepKey(first), restateStepKey(first, 'tool')]).toEqual(['step:restate:inv_1:0', 'step:restate:inv_1:1', 'step:restate:inv_1:2:tool']);
    const retry = fakeRestateContext('inv_1');
    expect(restateStepKey(retry)).toBe('step:restate:inv_1:0');
  });

  it('dbosChat outside a DBOS step says where to call it', async () => {
    const onejob = new OnejobClient({ baseUrl: 'http://127.0.0.1:9', token: TOKEN });
    expect(() => dbosChat(onejob, { model: 'gpt', messages })).toThrow(/inside a DBOS step/);
  });
});
