/**
 * `onejob/ai-sdk`: one key per model call of a Vercel AI SDK agent loop,
 * kept across a restart of the loop (docs/durable-engines.md). `ai` is an
 * optional peer dependency; this entry point imports only its types.
 *
 * `generateText` / `streamText` with tools make one model call per step,
 * each with the conversation so far. {@link onejobStepKeys} is a
 * language-model middleware (for `wrapLanguageModel`) that sends each call
 * with `Idempotency-Key: step:ai-sdk:<identity>:<n>`, where `<identity>` is
 * what the caller passes (the agent run's id, kept by whoever restarts the
 * run) and `<n>` the call's place in the loop: the number of assistant
 * messages in its prompt (0 for the first step, 1 after the first answer, …).
 * So when the process dies in step 2 and a supervisor runs the loop again
 * with the same identity, step 1 gets its stored answer and step 2 its
 * stored answer or the running call's, from onejob, and the provider ran
 * each step once. (`intentFetch()` covers the SDK's own resends within one
 * process; this covers a new process.)
 *
 * @example
 * import { generateText, stepCountIs, wrapLanguageModel } from 'ai';
 * import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
 * import { onejobStepKeys } from 'onejob/ai-sdk';
 * const onejob = createOpenAICompatible({ name: 'onejob', baseURL: 'http://127.0.0.1:8080/v1', apiKey: token });
 * const model = wrapLanguageModel({ model: onejob('summarize'), middleware: onejobStepKeys({ identity: `run-${runId}` }) });
 * await generateText({ model, tools, stopWhen: stepCountIs(5), prompt });
 */
import type { LanguageModelMiddleware } from 'ai';
import { OnejobInDoubtError } from '../client/step-call.ts';
import { stepKey } from '../client/step-key.ts';

export { OnejobInDoubtError, isOnejobInDoubtError } from '../client/step-call.ts';

/** A prompt as the middleware sees it: messages with a role. */
type Prompt = readonly { readonly role: string }[];

/** Options of {@link onejobStepKeys}. */
export interface OnejobStepKeysOptions {
  /**
   * The stable identity of the agent run (or a function giving it, read at
   * each call): the same on every re-run of the same run, different for two
   * runs. An id your supervisor or queue keeps for the run, a workflow id,
   * a conversation id plus the turn's number.
   */
  readonly identity: string | (() => string);
}

/**
 * The key of one model call of a run: `step:ai-sdk:<identity>:<n>`, `<n>`
 * the number of assistant messages in the call's prompt.
 */
export function aiSdkStepKey(identity: string, prompt: Prompt): string {
  if (typeof identity !== 'string' || identity === '') throw new TypeError('onejob/ai-sdk: the step identity must be a non-empty string (the agent run\'s id)');
  return stepKey('ai-sdk', identity, prompt.filter((m) => m.role === 'assistant').length);
}

/**
 * A middleware for `wrapLanguageModel` that gives each model call its key
 * ({@link aiSdkStepKey}) as the `Idempotency-Key` header. An answer
 * `409 attempt_in_doubt` (the step's first call may have run, nobody
 * resolved it yet) is raised as {@link OnejobInDoubtError}, with the job id.
 */
export function onejobStepKeys(options: OnejobStepKeysOptions): LanguageModelMiddleware {
  const identity = (): string => (typeof options.identity === 'function' ? options.identity() : options.identity);
  return {
    middlewareVersion: 'v2',
    transformParams: async ({ params }) => ({ ...params, headers: { ...params.headers, 'idempotency-key': aiSdkStepKey(identity(), params.prompt) } }),
    wrapGenerate: async ({ doGenerate, params }) => inDoubtAsTyped(doGenerate, params.headers),
    wrapStream: async ({ doStream, params }) => inDoubtAsTyped(doStream, params.headers),
  };
}

async function inDoubtAsTyped<T>(call: () => PromiseLike<T>, headers: Record<string, string | undefined> | undefined): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const inDoubt = inDoubtAnswer(error);
    const key = headers?.['idempotency-key'];
    if (inDoubt !== null && key !== undefined) throw new OnejobInDoubtError(inDoubt.jobId, key, { attemptId: inDoubt.attemptId, cause: error });
    throw error;
  }
}

/** The job of an AI SDK `APICallError` that is onejob's `409 attempt_in_doubt` (also when wrapped in a `RetryError`), or null. */
function inDoubtAnswer(error: unknown): { jobId: string; attemptId: string | null } | null {
  const candidates = [error, (error as { lastError?: unknown } | null)?.lastError];
  for (const e of candidates) {
    const call = e as { statusCode?: unknown; responseBody?: unknown; responseHeaders?: Record<string, string> } | null;
    if (call === null || typeof call !== 'object' || call.statusCode !== 409 || typeof call.responseBody !== 'string') continue;
    let body: { code?: unknown; job_id?: unknown; attempt_id?: unknown };
    try {
      body = (JSON.parse(call.responseBody) ?? {}) as typeof body;
    } catch {
      continue;
    }
    if (body.code !== 'attempt_in_doubt') continue;
    const jobId = typeof body.job_id === 'string' ? body.job_id : call.responseHeaders?.['onejob-job-id'];
    if (typeof jobId === 'string') return { jobId, attemptId: typeof body.attempt_id === 'string' ? body.attempt_id : null };
  }
  return null;
}
