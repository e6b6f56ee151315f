/**
 * `onejob/temporal`: exactly one provider call per Temporal activity
 * (docs/durable-engines.md). `@temporalio/activity` is an optional peer
 * dependency: only this entry point loads it.
 *
 * Temporal records an activity's result when the activity returns; a worker
 * that dies after the provider accepted the call makes Temporal schedule
 * another attempt of the same activity. Called through these helpers, the
 * activity's call carries a key made of its workflow's id and run id and the
 * activity id, which every attempt shares (the attempt number is left out on
 * purpose), so a later attempt gets the first one's answer or joins it.
 *
 * @example
 * // activities.ts
 * import { temporalChat } from 'onejob/temporal';
 * export async function summarize(text: string): Promise<string> {
 *   const { body } = await temporalChat(onejob, { model: 'summarize', messages: [{ role: 'user', content: text }] });
 *   return body.choices[0]?.message.content ?? '';
 * }
 * // workflow.ts: proxyActivities({ startToCloseTimeout: '2m', retry: { nonRetryableErrorTypes: ['OnejobInDoubtError'] } })
 */
import { Context, type Info } from '@temporalio/activity';
import type { ChatCompletion, ChatCompletionRequest, CreateJobRequest, Job } from '../client/api-shapes.ts';
import type { CompletionResult, OnejobClient } from '../client/onejob-client.ts';
import { stepChat, stepJob, type StepCallOptions } from '../client/step-call.ts';
import { stepKey } from '../client/step-key.ts';

export { OnejobInDoubtError, isOnejobInDoubtError } from '../client/step-call.ts';

/** The members of the activity's `Info` the key is made of. */
export type TemporalActivityIdentity = Pick<Info, 'activityId' | 'workflowExecution'> & Partial<Pick<Info, 'activityRunId' | 'attempt'>>;

/** Options of the Temporal helpers. */
export interface TemporalStepOptions extends StepCallOptions {
  /** The activity's identity. Default `Context.current().info` (the activity running now). */
  readonly info?: TemporalActivityIdentity;
  /** Names one of several onejob calls made by the same activity: each needs its own key. */
  readonly label?: string;
}

/**
 * The key of an activity: `step:temporal:<workflow id>:<run id>:<activity id>[:<label>]`,
 * or for an activity no workflow started (a standalone activity)
 * `step:temporal:activity:<activity id>:<activity run id>[:<label>]`.
 * Never the attempt number: every retry of the activity is the same step.
 * The run id is in the key because activity ids restart with each run of a
 * workflow id (`continueAsNew`): without it, a new run's first activity
 * would get the previous run's answer.
 */
export function temporalStepKey(info: TemporalActivityIdentity = Context.current().info, label?: string): string {
  const rest = label === undefined ? [] : [label];
  if (typeof info.activityId !== 'string' || info.activityId === '') throw new TypeError('temporalStepKey: the activity info has no activityId');
  const wf = info.workflowExecution;
  if (wf !== undefined) return stepKey('temporal', wf.workflowId, wf.runId, info.activityId, ...rest);
  if (typeof info.activityRunId === 'string' && info.activityRunId !== '') return stepKey('temporal', 'activity', info.activityId, info.activityRunId, ...rest);
  throw new TypeError('temporalStepKey: the activity was started by no workflow and has no activityRunId: nothing identifies it across attempts');
}

/** `POST /v1/chat/completions` with the activity's key ({@link stepChat}); call it inside an activity. */
export function temporalChat(onejob: OnejobClient, request: ChatCompletionRequest, options: TemporalStepOptions = {}): Promise<CompletionResult<ChatCompletion>> {
  return stepChat(onejob, temporalStepKey(options.info ?? Context.current().info, options.label), request, withSignal(options));
}

/** `POST /v1/jobs` with the activity's key, then waits for the job ({@link stepJob}); call it inside an activity. */
export function temporalJob(onejob: OnejobClient, request: CreateJobRequest, options: TemporalStepOptions = {}): Promise<Job> {
  return stepJob(onejob, temporalStepKey(options.info ?? Context.current().info, options.label), request, withSignal(options));
}

/** The activity's cancellation signal, unless the caller gave one (or gave its own info: a call outside an activity). */
function withSignal(options: TemporalStepOptions): StepCallOptions {
  if (options.signal !== undefined || options.info !== undefined) return options;
  return { ...options, signal: Context.current().cancellationSignal };
}
