/**
 * A DBOS application for test/engines/dbos.test.ts, run as its own process
 * (the test kills it with SIGKILL). One workflow, `summarize`, whose one
 * step asks a model for a summary: through onejob (`MODE=onejob`, the step
 * calls `dbosChat`) or straight at the fake provider (`MODE=direct`, the
 * control). Writes one JSON line per event on stdout.
 *
 * Env: DBOS_SYSTEM_DATABASE_URL, MODE, ONEJOB_URL, ONEJOB_TOKEN, FAKE_URL,
 * WORKFLOW_ID; START=1 starts the workflow (else the process only launches
 * DBOS, which recovers the workflow this executor left pending);
 * HOLD_AFTER_ANSWER=1 makes the step stop after its call answered, before
 * it returns (so before DBOS checkpoints it): the test kills the process there.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { OnejobClient } from '../../../src/client/index.ts';
import { dbosChat } from '../../../src/dbos/index.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`dbos-worker: ${name} is not set`);
  return value;
};
const emit = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};

const mode = env('MODE');
const onejob = new OnejobClient({ baseUrl: env('ONEJOB_URL'), token: env('ONEJOB_TOKEN') });
const hold = process.env.HOLD_AFTER_ANSWER === '1';

async function askModel(text: string): Promise<string> {
  emit({ event: 'step-start', workflowId: DBOS.workflowID, stepId: DBOS.stepID });
  const request = { model: 'gpt', messages: [{ role: 'user' as const, content: `summarize: ${text}` }] };
  let content: string;
  if (mode === 'onejob') {
    const { body, jobId, idempotencyKey } = await dbosChat(onejob, request);
    content = body.choices[0]?.message.content ?? '';
    emit({ event: 'answered', content, jobId, idempotencyKey });
  } else {
    const res = await fetch(`${env('FAKE_URL')}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    content = body.choices[0]?.message.content ?? '';
    emit({ event: 'answered', content });
  }
  if (hold) {
    emit({ event: 'holding' });
    await new Promise(() => undefined); // the test kills the process here: the call answered, the step not checkpointed
  }
  return content;
}

async function summarize(text: string): Promise<string> {
  const answer = await DBOS.runStep(() => askModel(text), { name: 'askModel' });
  return `summary: ${answer}`;
}
const summarizeWorkflow = DBOS.registerWorkflow(summarize, { name: 'summarize' });

DBOS.setConfig({ name: 'onejob-dbos-test', systemDatabaseUrl: env('DBOS_SYSTEM_DATABASE_URL'), logLevel: 'error' });
await DBOS.launch();
emit({ event: 'launched' });
const workflowId = env('WORKFLOW_ID');
const handle = process.env.START === '1'
  ? await DBOS.startWorkflow(summarizeWorkflow, { workflowID: workflowId })('the quarterly report')
  : DBOS.retrieveWorkflow<string>(workflowId);
const result = await handle.getResult();
emit({ event: 'result', result, status: (await handle.getStatus())?.status });
await DBOS.shutdown();
process.exit(0);
