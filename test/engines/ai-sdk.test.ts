/**
 * The Vercel AI SDK's agent loop with a real crash: `generateText` with a
 * tool and three steps (a tool call, a second tool call, the answer) runs in
 * its own process through onejob's gateway; the process is killed with
 * SIGKILL in step 2 (its model call accepted by the provider, not answered
 * yet) and a supervisor (the test) runs the loop again with the same run id.
 * With `onejobStepKeys({ identity })` (keys `step:ai-sdk:<run>:<n>`) step 1
 * gets its stored answer and step 2 joins the call still running: each step
 * ran once at the provider. The control, `intentFetch()` alone (keys that
 * live in one process), calls the provider again for steps 1 and 2.
 */
import { randomUUID } from 'node:crypto';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, wrapLanguageModel } from 'ai';
import { onejobStepKeys } from '../../src/ai-sdk/index.ts';
import { isOnejobInDoubtError, type OnejobInDoubtError } from '../../src/client/index.ts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FakeCall } from '../../src/testing/fake-provider-server.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { TOKEN, startGateway, type Gateway } from '../clients/gateway-server.ts';
import { startWorker, type WorkerProcess } from './support/worker-process.ts';

const WORKER = 'test/engines/workers/ai-sdk-worker.ts';
const postgres = TEST_DATABASES.find((d) => d.name === 'postgres')!;

/** Which step of the loop a provider call was, from its prompt. */
function stepOf(call: FakeCall): 1 | 2 | 3 {
  const text = JSON.stringify(call.body);
  return text.includes('weather-of-Rome') ? 3 : text.includes('weather-of-Paris') ? 2 : 1;
}

describe.skipIf(postgres.skip !== null)('AI SDK agent loop killed -9 in step 2 and run again by a supervisor', { timeout: 150_000 }, () => {
  let gateway: Gateway;
  const workers: WorkerProcess[] = [];
  beforeAll(async () => {
    gateway = await startGateway(postgres, { providerTimeoutMs: 30_000, chatMaxWaitMs: 5_000 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
    await gateway?.close();
  });
  beforeEach(() => {
    gateway.reset();
    // Step 3 (the answer) first: its prompt holds both tool results.
    gateway.openaiFake.when({ contains: 'weather-of-Rome' }, { reply: 'Sunny in Paris, rainy in Rome.' });
    gateway.openaiFake.when({ contains: 'weather-of-Paris' }, { gate: 'step-2', toolCalls: [{ id: 'call_rome', name: 'get_weather', arguments: { city: 'Rome' } }] });
    gateway.openaiFake.setDefault({ toolCalls: [{ id: 'call_paris', name: 'get_weather', arguments: { city: 'Paris' } }] });
  });

  const run = (mode: string, runId: string): WorkerProcess => {
    const w = startWorker(WORKER, { MODE: mode, RUN_ID: runId, ONEJOB_URL: gateway.origin, ONEJOB_TOKEN: TOKEN });
    workers.push(w);
    return w;
  };
  const waitForCallOfStep = async (step: number, count: number): Promise<void> => {
    for (let i = 0; i < 600; i++) {
      if (gateway.openaiFake.calls.filter((c) => stepOf(c) === step).length >= count) return;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    throw new Error(`no call of step ${step} #${count}: ${gateway.openaiFake.calls.length} calls`);
  };

  it('with onejobStepKeys: steps 1 and 2 each ran once at the provider, and the re-run finishes the loop', async () => {
    const runId = `run-${randomUUID()}`;
    const first = run('onejob', runId);
    await first.waitFor('step');
    await waitForCallOfStep(2, 1);
    await first.kill9();

    const second = run('onejob', runId);
    // The re-run's step 1 is answered from onejob at once (its stored answer); its step 2 joins the held call.
    await second.waitFor('step');
    await new Promise((ok) => setTimeout(ok, 500));
    gateway.openaiFake.release('step-2');
    const result = await second.waitFor('result');
    expect(result.text).toBe('Sunny in Paris, rainy in Rome.');
    expect(result.steps).toBe(3);
    expect(gateway.openaiFake.calls.map(stepOf)).toEqual([1, 2, 3]);
    for (const n of [0, 1, 2]) {
      const jobs = await gateway.jobsWithKey(`step:ai-sdk:${runId}:${n}`);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]!.attempts).toHaveLength(1);
    }
  });

  it('the control, intentFetch() alone: the new process has new keys and calls the provider again for steps 1 and 2', async () => {
    const runId = `run-${randomUUID()}`;
    const first = run('intent-fetch', runId);
    await first.waitFor('step');
    await waitForCallOfStep(2, 1);
    await first.kill9();
    const second = run('intent-fetch', runId);
    await waitForCallOfStep(2, 2);
    gateway.openaiFake.release('step-2');
    await second.waitFor('result');
    expect(gateway.openaiFake.calls.map(stepOf).sort()).toEqual([1, 1, 2, 2, 3]);
  });
});

describe('AI SDK: a model call in doubt', () => {
  let gateway: Gateway;
  const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;
  beforeAll(async () => {
    gateway = await startGateway(sqlite, { providerTimeoutMs: 1000, chatMaxWaitMs: 5_000 });
  });
  afterAll(async () => gateway?.close());

  it('raises OnejobInDoubtError with the job id and the step key, and the SDK\'s retries with that key call the provider no more', async () => {
    gateway.openaiFake.setDefault({ hang: true });
    const provider = createOpenAICompatible({ name: 'onejob', baseURL: `${gateway.origin}/v1`, apiKey: TOKEN });
    const model = wrapLanguageModel({ model: provider('gpt'), middleware: onejobStepKeys({ identity: 'run-doubt' }) });
    const error = await generateText({ model, prompt: 'hello', maxRetries: 2 }).catch((e: unknown) => e);
    expect(isOnejobInDoubtError(error)).toBe(true);
    const doubt = error as OnejobInDoubtError;
    expect(doubt.idempotencyKey).toBe('step:ai-sdk:run-doubt:0');
    expect(doubt.jobId).toMatch(/^job_/);
    expect(doubt.attemptId).toMatch(/^att_/);
    expect(gateway.openaiFake.calls).toHaveLength(1);
  });
});
