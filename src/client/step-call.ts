/**
 * One provider call per step of a durable engine: the call is made through
 * onejob with the step's key ({@link stepKey}), so a step that the engine
 * runs again after a crash gets the first run's answer (a replay), joins the
 * first run's call while it still runs, or learns that the first run's call
 * is in doubt ({@link OnejobInDoubtError}): never a second provider call.
 * The engines' entry points (`onejob/dbos`, `onejob/restate`,
 * `onejob/temporal`) derive the key and call these. docs/durable-engines.md.
 */
import type { ChatCompletion, ChatCompletionRequest, CreateJobRequest, Job } from './api-shapes.ts';
import { OnejobClientError, isOnejobClientError } from './client-error.ts';
import type { CallOptions, CompletionResult, OnejobClient } from './onejob-client.ts';

/** Options of {@link stepChat} and {@link stepJob}. */
export interface StepCallOptions extends CallOptions {
  /**
   * How long to follow a first call that is in doubt (its attempt `unknown`)
   * before raising {@link OnejobInDoubtError}: the client long-polls the job
   * for someone (the reconciler, an operator) to resolve it. Default 30 000 ms;
   * 0 raises at once.
   */
  readonly inDoubtWaitMs?: number;
  /** The longest the call may wait for a running job; past it, code `timeout` with the job id (call again with the same key to keep waiting). Default: no limit. */
  readonly timeoutMs?: number;
}

/**
 * The step's call is in doubt: its attempt reached the provider and nobody
 * knows whether it ran (a timeout, a lost connection, a crash of onejob's
 * executor), and nobody resolved it within `inDoubtWaitMs`. Running the step
 * again with a NEW key could call the provider a second time; running it
 * again with the SAME key (what the engines' helpers do) starts nothing: it
 * answers this error again while the job stays in doubt, then the stored
 * outcome once the reconciler or an operator resolved the attempt. Wait for
 * that (`onejob.waitForJob(jobId, { until: 'terminal' })`, or call the
 * helper again later with `{ idempotencyKey }`); see docs/durable-engines.md.
 * Its `code` is `attempt_in_doubt`, so `isOnejobClientError(e, 'attempt_in_doubt')` holds too.
 */
export class OnejobInDoubtError extends OnejobClientError {
  override readonly name: string = 'OnejobInDoubtError';
  /** The job in doubt. */
  declare readonly jobId: string;
  /** The step's key: the same key later answers the job's outcome. */
  declare readonly idempotencyKey: string;

  constructor(jobId: string, idempotencyKey: string, options: { readonly attemptId?: string | null; readonly status?: number | null; readonly cause?: unknown } = {}) {
    super('attempt_in_doubt', `job ${jobId} (key ${idempotencyKey}) is in doubt: its provider call may have run. Do not run the step with a new key; `
      + 'wait for the reconciler or an operator to resolve it (onejob.waitForJob(jobId, { until: "terminal" })), then call again with the same key for its outcome', {
      jobId, idempotencyKey, attemptId: options.attemptId ?? null, status: options.status ?? 409, cause: options.cause,
    });
  }
}

/** Whether `e` is an {@link OnejobInDoubtError} (also across bundles: by name and members). */
export function isOnejobInDoubtError(e: unknown): e is OnejobInDoubtError {
  return e instanceof OnejobInDoubtError
    || (e instanceof Error && e.name === 'OnejobInDoubtError' && typeof (e as { jobId?: unknown }).jobId === 'string');
}

/**
 * `POST /v1/chat/completions` with the step's key. A re-run of the step
 * while the first call runs joins it (the gateway waits on the key, and the
 * client asks again after `409 attempt_in_flight`); after it ended, it gets
 * the stored answer. A call in doubt is followed for `inDoubtWaitMs`, then
 * raises {@link OnejobInDoubtError}.
 *
 * @example const { body } = await stepChat(onejob, stepKey('my-engine', runId, 3), { model: 'summarize', messages });
 */
export async function stepChat(onejob: OnejobClient, idempotencyKey: string, request: ChatCompletionRequest, options: StepCallOptions = {}): Promise<CompletionResult<ChatCompletion>> {
  try {
    return await onejob.chatCompletions(request, {
      idempotencyKey, inDoubtWaitMs: options.inDoubtWaitMs ?? 30_000, signal: options.signal, timeoutMs: options.timeoutMs,
    });
  } catch (error) {
    if (isOnejobClientError(error, 'attempt_in_doubt') && error.jobId !== null) {
      throw new OnejobInDoubtError(error.jobId, idempotencyKey, { attemptId: error.attemptId, status: error.status, cause: error });
    }
    throw error;
  }
}

/**
 * `POST /v1/jobs` with the step's key, then waits for the job: what the
 * gateway endpoints do on the server, done by the client for a job. A re-run
 * of the step gets the same job (created once) and waits for it, whether it
 * still runs or ended. Answers the job when it `succeeded`; throws
 * `job_failed` (failed) or `job_finished` (cancelled) with the job id, and
 * {@link OnejobInDoubtError} when it stays `unknown` for `inDoubtWaitMs`.
 *
 * @example const job = await stepJob(onejob, stepKey('my-engine', runId, 3), { route: 'summarize', input });
 */
export async function stepJob(onejob: OnejobClient, idempotencyKey: string, request: CreateJobRequest, options: StepCallOptions = {}): Promise<Job> {
  const signal = options.signal;
  const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
  const remaining = (): number | undefined => (deadline === undefined ? undefined : Math.max(0, deadline - Date.now()));
  const { job: created } = await onejob.createJob(request, { idempotencyKey, signal });
  let job = await onejob.waitForJob(created.id, { until: 'settled', signal, timeoutMs: remaining() });
  if (job.state === 'unknown') {
    const left = remaining();
    const followMs = Math.min(options.inDoubtWaitMs ?? 30_000, left ?? Infinity);
    if (followMs > 0) job = await onejob.waitForJob(job.id, { until: 'terminal', signal, timeoutMs: followMs });
    if (job.state === 'unknown') {
      const attempt = job.attempts.find((a) => a.state === 'unknown');
      throw new OnejobInDoubtError(job.id, idempotencyKey, { attemptId: attempt?.id ?? null });
    }
  }
  if (job.state === 'succeeded') return job;
  if (job.state === 'failed') {
    throw new OnejobClientError('job_failed', `job ${job.id} failed: ${job.error?.message ?? job.error?.code ?? 'no detail'}`, { jobId: job.id, idempotencyKey, status: null });
  }
  if (job.state === 'cancelled') throw new OnejobClientError('job_finished', `job ${job.id} was cancelled`, { jobId: job.id, idempotencyKey, status: null });
  throw new OnejobClientError('timeout', `job ${job.id} is still ${job.state} after the call's timeoutMs; call again with the same key to keep waiting`, { jobId: job.id, idempotencyKey, status: null });
}
