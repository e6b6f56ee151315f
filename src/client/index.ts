/**
 * `onejob/client`: the typed client of onejob's HTTP API, and the intent key
 * for the official SDKs. Runs in browsers and on Node 20; imports nothing of
 * the server. See docs/client.md.
 *
 * @example
 * import { OnejobClient } from 'onejob/client';
 * const onejob = new OnejobClient({ baseUrl: 'http://127.0.0.1:8080', token: 'tok_alice' });
 * const { job } = await onejob.createJob({ route: 'summarize', input: { messages } });
 * const done = await onejob.waitForJob(job.id, { until: 'terminal' });
 */
export { OnejobClient, isTerminalJob, JOB_ID_HEADER, MAX_WAIT_SECONDS, REPLAYED_HEADER } from './onejob-client.ts';
export type {
  CallOptions, CompletionCallOptions, CompletionResult, CreateJobResult, KeyedCallOptions, OnejobClientOptions, StreamCallOptions, StreamedEvent, WaitForJobOptions,
} from './onejob-client.ts';
export { ClientErrorCode, OnejobClientError, isOnejobClientError } from './client-error.ts';
export type { OnejobClientErrorOptions } from './client-error.ts';
export { intentFetch, isFinalAnswer, RETRY_COUNT_HEADER } from './intent-fetch.ts';
export type { IntentFetch, IntentFetchOptions } from './intent-fetch.ts';
export { INTENT_KEY_PREFIX, isValidIdempotencyKey, newIntentKey } from './intent-key.ts';
export { DEFAULT_RETRY_POLICY, backoffMs, isRetryableStatus, retryAfterMs } from './retry-policy.ts';
export type { CallSafety, RetryOptions, RetryPolicy } from './retry-policy.ts';
export type * from './api-shapes.ts';
export { IntentSession, intentStatusOf, intentStorageKey } from './intent-session.ts';
export type { IntentSessionOptions, IntentSnapshot, IntentStatus, IntentStorage } from './intent-session.ts';
export { TOOL_CALL_META, callToolOnce, jobOfToolCall, toolCallInfo } from './tool-call.ts';
export type { CallToolOnceOptions, ToolCallInfo, ToolCallOutcome, ToolCallParams, ToolCaller, ToolResult } from './tool-call.ts';
export { MAX_STEP_KEY_LENGTH, STEP_KEY_PREFIX, stepKey } from './step-key.ts';
export type { StepKeyPart } from './step-key.ts';
export { OnejobInDoubtError, isOnejobInDoubtError, stepChat, stepJob } from './step-call.ts';
export type { StepCallOptions } from './step-call.ts';
