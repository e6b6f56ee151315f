/**
 * `onejob/dbos`: exactly one provider call per DBOS step
 * (docs/durable-engines.md). `@dbos-inc/dbos-sdk` is an optional peer
 * dependency: only this entry point loads it.
 *
 * DBOS checkpoints a step's result after the step returns; a crash between
 * the provider accepting the call and that checkpoint makes DBOS recover the
 * workflow and run the step again. Called through these helpers, the step's
 * call carries a key made of the workflow id and the step's function id,
 * which the recovered run assigns the same way, so the re-run gets the first
 * call's answer (or joins it) instead of calling the provider again.
 *
 * @example
 * import { DBOS } from '@dbos-inc/dbos-sdk';
 * import { OnejobClient } from 'onejob/client';
 * import { dbosChat } from 'onejob/dbos';
 * const onejob = new OnejobClient({ baseUrl, token });
 * async function summarize(text: string) {
 *   const { body } = await DBOS.runStep(() => dbosChat(onejob, { model: 'summarize', messages: [{ role: 'user', content: text }] }), { name: 'summarize' });
 *   return body.choices[0]?.message.content;
 * }
 * export const summarizeWorkflow = DBOS.registerWorkflow(summarize, { name: 'summarize' });
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import type { ChatCompletion, ChatCompletionRequest, CreateJobRequest, Job } from '../client/api-shapes.ts';
import type { CompletionResult, OnejobClient } from '../client/onejob-client.ts';
import { stepChat, stepJob, type StepCallOptions } from '../client/step-call.ts';
import { stepKey } from '../client/step-key.ts';

export { OnejobInDoubtError, isOnejobInDoubtError } from '../client/step-call.ts';

/** Options of the DBOS helpers. */
export interface DbosStepOptions extends StepCallOptions {
  /**
   * Names one of several onejob calls made by the same step (a step that
   * calls two routes): each needs its own key. Default none (one call per step).
   */
  readonly label?: string;
}

/** The identity of the DBOS step running now: its workflow's id and its function id. */
export interface DbosStepIdentity {
  readonly workflowId: string;
  readonly functionId: number;
}

/** The step running now, or an error that says where to call from. */
export function currentDbosStep(): DbosStepIdentity {
  const workflowId = DBOS.workflowID;
  const functionId = DBOS.stepID;
  if (!DBOS.isInStep() || workflowId === undefined || functionId === undefined) {
    throw new Error('onejob/dbos: call this inside a DBOS step (DBOS.runStep(...) or a function registered with DBOS.registerStep, run by a workflow): '
      + 'the key is made of the workflow id and the step\'s function id, which exist only there');
  }
  return { workflowId, functionId };
}

/**
 * The key of the DBOS step running now: `step:dbos:<workflow id>:<function id>[:<label>]`.
 * The function id is the step's position in its workflow, which DBOS assigns
 * the same on every execution of the workflow (that is how it finds the
 * step's checkpoint on recovery), so a recovered run of the step gets the same key.
 */
export function dbosStepKey(identity: DbosStepIdentity = currentDbosStep(), label?: string): string {
  return label === undefined ? stepKey('dbos', identity.workflowId, identity.functionId) : stepKey('dbos', identity.workflowId, identity.functionId, label);
}

/** `POST /v1/chat/completions` with the step's key ({@link stepChat}); call it inside a DBOS step. */
export function dbosChat(onejob: OnejobClient, request: ChatCompletionRequest, options: DbosStepOptions = {}): Promise<CompletionResult<ChatCompletion>> {
  return stepChat(onejob, dbosStepKey(currentDbosStep(), options.label), request, options);
}

/** `POST /v1/jobs` with the step's key, then waits for the job ({@link stepJob}); call it inside a DBOS step. */
export function dbosJob(onejob: OnejobClient, request: CreateJobRequest, options: DbosStepOptions = {}): Promise<Job> {
  return stepJob(onejob, dbosStepKey(currentDbosStep(), options.label), request, options);
}
