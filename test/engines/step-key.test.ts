/**
 * The step keys (src/client/step-key.ts) and how each engine's entry point
 * derives them: the format, its length bound, determinism, and the parts
 * that must and must not be in a key (the Temporal attempt number).
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aiSdkStepKey, onejobStepKeys } from '../../src/ai-sdk/index.ts';
import { MAX_STEP_KEY_LENGTH, isValidIdempotencyKey, stepKey } from '../../src/client/index.ts';
import { sha256Hex } from '../../src/client/sha256.ts';
import { ensureApplicationFailure } from '@temporalio/common';
import { OnejobInDoubtError, temporalStepKey, type TemporalActivityIdentity } from '../../src/temporal/index.ts';

describe('stepKey', () => {
  it('writes step:<engine>:<parts> with every part percent-encoded', () => {
    expect(stepKey('dbos', 'order-7', 2)).toBe('step:dbos:order-7:2');
    expect(stepKey('my-engine', 'run/42', 'plan')).toBe('step:my-engine:run%2F42:plan');
    expect(stepKey('x', 'a:b', '')).toBe('step:x:a%3Ab:');
    expect(stepKey('x', 'é ~!')).toBe('step:x:%C3%A9%20%7E%21');
    // The separator cannot be forged by a part: two parts and one part holding a colon differ.
    expect(stepKey('x', 'a', 'b')).not.toBe(stepKey('x', 'a:b'));
  });

  it('refuses what would make an ambiguous or unstable key', () => {
    expect(() => stepKey('DBOS', 'a')).toThrow(/a-z, 0-9 and -/);
    expect(() => stepKey('', 'a')).toThrow(TypeError);
    expect(() => stepKey('dbos')).toThrow(/at least one part/);
    expect(() => stepKey('dbos', 1.5)).toThrow(/safe integer/);
    expect(() => stepKey('dbos', Number.NaN)).toThrow(/safe integer/);
    expect(() => stepKey('dbos', null as unknown as string)).toThrow(/string or an integer/);
  });

  it('bounds a long key to 255 characters: a kept prefix, ~ and the SHA-256 of the long form', () => {
    const id = 'w'.repeat(300);
    const key = stepKey('dbos', id, 1);
    const long = `step:dbos:${id}:1`;
    expect(key).toHaveLength(MAX_STEP_KEY_LENGTH);
    expect(key).toBe(`${long.slice(0, 190)}~${createHash('sha256').update(long).digest('hex')}`);
    // Two long ids that share the kept prefix still get two keys.
    expect(stepKey('dbos', id, 2)).not.toBe(key);
    expect(stepKey('dbos', `${id}x`, 1)).not.toBe(key);
    // A key of exactly 255 is kept whole.
    const exact = stepKey('dbos', 'a'.repeat(255 - 'step:dbos:'.length));
    expect(exact).toHaveLength(255);
    expect(exact).not.toContain('~');
  });

  it('is deterministic, always a valid Idempotency-Key, and distinct for distinct identities (property)', () => {
    const part = fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), fc.integer());
    fc.assert(fc.property(fc.array(part, { minLength: 1, maxLength: 4 }), fc.array(part, { minLength: 1, maxLength: 4 }), (a, b) => {
      const ka = stepKey('eng', ...a);
      expect(stepKey('eng', ...a)).toBe(ka);
      expect(isValidIdempotencyKey(ka)).toBe(true);
      const same = a.length === b.length && a.every((x, i) => String(x) === String(b[i]));
      if (!same) expect(stepKey('eng', ...b)).not.toBe(ka);
    }), { numRuns: 300 });
  });

  it('computes SHA-256 as node:crypto does (empty, multi-block, non-ASCII)', () => {
    for (const text of ['', 'abc', 'a'.repeat(55), 'a'.repeat(56), 'a'.repeat(64), 'x'.repeat(1000), 'é☃𝄞']) {
      expect(sha256Hex(text)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
    }
  });
});

describe('temporalStepKey (the activity Context info shape; no Temporal server runs in these tests)', () => {
  const info = (over: Partial<TemporalActivityIdentity> = {}): TemporalActivityIdentity => ({
    activityId: '3', attempt: 1, workflowExecution: { workflowId: 'order-7', runId: '9f1c-run' }, ...over,
  });

  it('is made of the workflow id, run id and activity id, and is the same on every attempt', () => {
    expect(temporalStepKey(info())).toBe('step:temporal:order-7:9f1c-run:3');
    expect(temporalStepKey(info({ attempt: 2 }))).toBe(temporalStepKey(info({ attempt: 1 })));
    expect(temporalStepKey(info({ attempt: 17 }))).toBe('step:temporal:order-7:9f1c-run:3');
  });

  it('differs for another activity, another run of the workflow id (continueAsNew), or a label', () => {
    const base = temporalStepKey(info());
    expect(temporalStepKey(info({ activityId: '4' }))).not.toBe(base);
    expect(temporalStepKey(info({ workflowExecution: { workflowId: 'order-7', runId: 'next-run' } }))).not.toBe(base);
    expect(temporalStepKey(info(), 'second-call')).toBe('step:temporal:order-7:9f1c-run:3:second-call');
  });

  it('keys a standalone activity by its activity run id, and refuses an activity with no stable identity', () => {
    expect(temporalStepKey({ activityId: 'a1', workflowExecution: undefined, activityRunId: 'r1' })).toBe('step:temporal:activity:a1:r1');
    expect(() => temporalStepKey({ activityId: 'a1', workflowExecution: undefined })).toThrow(/no activityRunId/);
    expect(() => temporalStepKey({ activityId: '', workflowExecution: { workflowId: 'w', runId: 'r' } })).toThrow(/no activityId/);
  });

  it('an OnejobInDoubtError thrown by an activity fails it with type OnejobInDoubtError (what nonRetryableErrorTypes matches)', () => {
    // The worker turns an activity's error into an ApplicationFailure this way (@temporalio/common, a dependency of @temporalio/activity).
    const failure = ensureApplicationFailure(new OnejobInDoubtError('job_1', 'step:temporal:w:r:1', { attemptId: 'att_1' }));
    expect(failure.type).toBe('OnejobInDoubtError');
    expect(failure.message).toContain('job_1');
  });

  it('reads Context.current().info by default, and says so outside an activity', () => {
    expect(() => temporalStepKey()).toThrow(/[Aa]ctivity/);
  });
});

describe('onejobStepKeys (AI SDK middleware)', () => {
  const user = { role: 'user', content: [{ type: 'text', text: 'hi' }] } as const;
  const assistant = { role: 'assistant', content: [{ type: 'text', text: 'calling' }] } as const;
  const tool = { role: 'tool', content: [] } as const;

  it('numbers a call by the assistant messages in its prompt: the same across a re-run of the loop', () => {
    expect(aiSdkStepKey('run-1', [user])).toBe('step:ai-sdk:run-1:0');
    expect(aiSdkStepKey('run-1', [user, assistant, tool])).toBe('step:ai-sdk:run-1:1');
    expect(aiSdkStepKey('run-1', [user, assistant, tool, assistant, tool])).toBe('step:ai-sdk:run-1:2');
    expect(aiSdkStepKey('run-2', [user])).not.toBe(aiSdkStepKey('run-1', [user]));
    expect(() => aiSdkStepKey('', [user])).toThrow(/non-empty/);
  });

  it('sets the Idempotency-Key header in transformParams, keeping the caller\'s headers', async () => {
    let run = 'run-a';
    const middleware = onejobStepKeys({ identity: () => run });
    const params = { prompt: [user, assistant, tool], headers: { 'x-trace': 't1' } } as never;
    const out = await middleware.transformParams!({ type: 'generate', params, model: {} as never });
    expect(out.headers).toEqual({ 'x-trace': 't1', 'idempotency-key': 'step:ai-sdk:run-a:1' });
    run = 'run-b';
    const again = await middleware.transformParams!({ type: 'stream', params, model: {} as never });
    expect(again.headers?.['idempotency-key']).toBe('step:ai-sdk:run-b:1');
  });
});
