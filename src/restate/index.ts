/**
 * `onejob/restate`: exactly one provider call per `ctx.run` of a Restate
 * handler (docs/durable-engines.md). `@restatedev/restate-sdk` is an
 * optional peer dependency: only this entry point loads it. The SDK (1.17)
 * needs Node 22 or later (it calls `Promise.withResolvers`).
 *
 * Restate journals a `ctx.run` result when its closure returns; a service
 * that dies after the provider accepted the call and before the journal
 * entry is written runs the closure again on the retry. Called through
 * these helpers, the call carries a key made of the invocation id and the
 * call's ordinal in the handler (0 for the handler's first onejob call, 1
 * for the next, …), which the retry computes the same way because it
 * replays the same handler code in the same order.
 *
 * @example
 * import * as restate from '@restatedev/restate-sdk';
 * import { restateChat } from 'onejob/restate';
 * const agent = restate.service({ name: 'agent', handlers: {
 *   summarize: async (ctx: restate.Context, text: string) => {
 *     const { body } = await restateChat(ctx, onejob, { model: 'summarize', messages: [{ role: 'user', content: text }] });
 *     return body.choices[0]?.message.content;
 *   },
 * } });
 */
import { TerminalError, type Context, type RunOptions } from '@restatedev/restate-sdk';
import type { ChatCompletion, ChatCompletionRequest, CreateJobRequest, Job } from '../client/api-shapes.ts';
import type { CompletionResult, OnejobClient } from '../client/onejob-client.ts';
import { isOnejobInDoubtError, stepChat, stepJob, type StepCallOptions } from '../client/step-call.ts';
import { stepKey } from '../client/step-key.ts';

export { OnejobInDoubtError, isOnejobInDoubtError } from '../client/step-call.ts';

/** The metadata of the TerminalError a call in doubt ends its `ctx.run` with. */
export const IN_DOUBT_METADATA = { code: 'code', jobId: 'onejob_job_id', idempotencyKey: 'onejob_idempotency_key' } as const;

/** Options of the Restate helpers. */
export interface RestateStepOptions<T = unknown> extends Omit<StepCallOptions, 'signal'> {
  /** The name of the `ctx.run` entry in the journal. Default `onejob chat` / `onejob job`. */
  readonly name?: string;
  /** The `ctx.run`'s retry options. */
  readonly runOptions?: RunOptions<T>;
  /** Names the call in the key instead of nothing (the ordinal still counts it). */
  readonly label?: string;
}

const ordinals = new WeakMap<object, number>();

/**
 * The key of the handler's next onejob call: `step:restate:<invocation id>:<ordinal>[:<label>]`.
 * Call it in the handler's own code, NOT inside `ctx.run`: the handler's
 * code runs again, in the same order, on every retry of the invocation (a
 * closure whose result was journaled does not), which is what keeps the
 * ordinal the same. Each call takes the next ordinal.
 */
export function restateStepKey(ctx: Pick<Context, 'request'>, label?: string): string {
  const ordinal = ordinals.get(ctx) ?? 0;
  ordinals.set(ctx, ordinal + 1);
  const id = ctx.request().id;
  return label === undefined ? stepKey('restate', id, ordinal) : stepKey('restate', id, ordinal, label);
}

/**
 * `POST /v1/chat/completions` inside a `ctx.run`, with the key of the
 * handler's next call ({@link restateStepKey}). A call in doubt ends the
 * run with a `TerminalError` (409, metadata `code: attempt_in_doubt`,
 * `onejob_job_id`, `onejob_idempotency_key`) so that Restate does not retry
 * it on its own; read it with {@link inDoubtOf}.
 */
export function restateChat(ctx: Context, onejob: OnejobClient, request: ChatCompletionRequest, options: RestateStepOptions<CompletionResult<ChatCompletion>> = {}): Promise<CompletionResult<ChatCompletion>> {
  const key = restateStepKey(ctx, options.label);
  return ctx.run(options.name ?? 'onejob chat', () => terminalIfInDoubt(() => stepChat(onejob, key, request, options)), options.runOptions ?? {});
}

/** `POST /v1/jobs` then a wait for the job ({@link stepJob}) inside a `ctx.run`, keyed like {@link restateChat}. */
export function restateJob(ctx: Context, onejob: OnejobClient, request: CreateJobRequest, options: RestateStepOptions<Job> = {}): Promise<Job> {
  const key = restateStepKey(ctx, options.label);
  return ctx.run(options.name ?? 'onejob job', () => terminalIfInDoubt(() => stepJob(onejob, key, request, options)), options.runOptions ?? {});
}

/**
 * The job and key of a call in doubt, from the `OnejobInDoubtError` or the
 * journaled `TerminalError` a helper ended with; null for any other error.
 */
export function inDoubtOf(error: unknown): { readonly jobId: string; readonly idempotencyKey: string } | null {
  if (isOnejobInDoubtError(error)) return { jobId: error.jobId, idempotencyKey: error.idempotencyKey };
  const metadata = (error as { metadata?: Record<string, string> } | null)?.metadata;
  if (error instanceof Error && metadata?.[IN_DOUBT_METADATA.code] === 'attempt_in_doubt') {
    const jobId = metadata[IN_DOUBT_METADATA.jobId];
    const idempotencyKey = metadata[IN_DOUBT_METADATA.idempotencyKey];
    if (jobId !== undefined && idempotencyKey !== undefined) return { jobId, idempotencyKey };
  }
  return null;
}

async function terminalIfInDoubt<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (isOnejobInDoubtError(error)) {
      throw new TerminalError(error.message, {
        errorCode: 409,
        metadata: { [IN_DOUBT_METADATA.code]: 'attempt_in_doubt', [IN_DOUBT_METADATA.jobId]: error.jobId, [IN_DOUBT_METADATA.idempotencyKey]: error.idempotencyKey },
      });
    }
    throw error;
  }
}
