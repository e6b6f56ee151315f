/**
 * Tool calls through onejob's `/mcp` (CONTRACT §14) with one key per
 * intended call: {@link callToolOnce} sends a call with its
 * `_meta["onejob/idempotencyKey"]` and repeats it, with that key, where a
 * repeat cannot run the tool twice; {@link toolCallInfo} reads what onejob
 * says about a tool result (its job, key, state); {@link jobOfToolCall}
 * reads the job behind it. Resolve and cancel go through {@link OnejobClient}
 * (`resolveAttempt`, `cancelJob`) like any job's.
 *
 * The MCP client is described structurally ({@link ToolCaller}: the official
 * SDK's `Client.callTool`), so `onejob/client` loads no MCP package.
 */
import { OnejobClientError } from './client-error.ts';
import { newIntentKey } from './intent-key.ts';
import type { Job } from './api-shapes.ts';
import type { CallOptions, OnejobClient } from './onejob-client.ts';
import { backoffMs, retryPolicy, sleep, type RetryOptions } from './retry-policy.ts';

/** The `_meta` members of a tool call and of onejob's answer to it. */
export const TOOL_CALL_META = {
  /** In a call: the key of the intended call. In an answer: the key onejob used. */
  idempotencyKey: 'onejob/idempotencyKey',
  jobId: 'onejob/jobId',
  /** Whether the answer is a stored one (the call was a repeat). */
  replayed: 'onejob/replayed',
  /** The job's state (`succeeded`, or `unknown` for an answer in doubt). */
  state: 'onejob/state',
  /** The attempt in doubt, in an answer whose outcome is unknown. */
  attemptId: 'onejob/attemptId',
} as const;

/** A `tools/call`'s params. */
export interface ToolCallParams {
  readonly name: string;
  readonly arguments?: Record<string, unknown> | undefined;
  readonly _meta?: Record<string, unknown> | undefined;
}

/**
 * What {@link callToolOnce} needs of an MCP client: the official SDK's
 * `Client` (`@modelcontextprotocol/sdk`) has it.
 */
export interface ToolCaller {
  callTool(params: ToolCallParams, resultSchema?: never, options?: { signal?: AbortSignal; timeout?: number }): Promise<unknown>;
}

/** A tool result (`CallToolResult`) as far as these helpers read it. */
export interface ToolResult {
  readonly content?: unknown;
  readonly structuredContent?: unknown;
  readonly isError?: boolean;
  readonly _meta?: Record<string, unknown>;
  readonly [member: string]: unknown;
}

/** What onejob's answer says about a tool call. */
export interface ToolCallInfo {
  /** The call's job, or null (a read-only tool, passed through without a job; or not onejob's answer). */
  readonly jobId: string | null;
  readonly idempotencyKey: string | null;
  readonly replayed: boolean;
  /** The job's state when it answered, or null. */
  readonly state: string | null;
  /** Whether the outcome is unknown (the tool server timed out or the connection was cut): the tool may or may not have run. */
  readonly inDoubt: boolean;
  /** The attempt in doubt (to resolve), or null. */
  readonly attemptId: string | null;
  /**
   * The server's wait ended with the job still running (`queued`, `starting`
   * or `running`): the answer is not the tool's; repeating the same call
   * (same key) waits for the same job and runs nothing again.
   */
  readonly stillRunning: boolean;
}

/** Job states of an answer that is not the tool's yet (the server's wait ended first). */
const STILL_RUNNING_STATES: ReadonlySet<string> = new Set(['queued', 'starting', 'running']);

/** Whether a tool result's `onejob/state` says the tool has not answered yet (the server's wait ended first). */
export function isStillRunningState(state: string | null): boolean {
  return state !== null && STILL_RUNNING_STATES.has(state);
}

/**
 * What onejob says about a tool result, read from its `_meta`.
 *
 * @example
 * const info = toolCallInfo(await client.callTool({ name: 'payments.charge', arguments }));
 * if (info.inDoubt) askAnOperator(info.jobId, info.attemptId);
 */
export function toolCallInfo(result: unknown): ToolCallInfo {
  const meta = isRecord(result) && isRecord(result._meta) ? result._meta : {};
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const state = str(meta[TOOL_CALL_META.state]);
  return {
    jobId: str(meta[TOOL_CALL_META.jobId]),
    idempotencyKey: str(meta[TOOL_CALL_META.idempotencyKey]),
    replayed: meta[TOOL_CALL_META.replayed] === true,
    state,
    inDoubt: state === 'unknown' && isRecord(result) && result.isError === true,
    attemptId: str(meta[TOOL_CALL_META.attemptId]),
    stillRunning: isStillRunningState(state),
  };
}

/** Options of {@link callToolOnce}. */
export interface CallToolOnceOptions extends CallOptions {
  /**
   * The intended call's key. Default: a new one (`ik_<uuid>`) for this
   * call. Pass one that outlives the process for a call that must stay one
   * across restarts: e.g. `${runId}:${toolCallId}` from the model's tool call id.
   */
  readonly idempotencyKey?: string;
  /** Repeats after the first try (same key). Default 4, backoff 250 ms doubling to 8 s (docs/client.md). */
  readonly retry?: RetryOptions;
  /** One try's deadline, given to the MCP client (`timeout`). Default the client's (the SDK: 60 s). */
  readonly tryTimeoutMs?: number;
  /**
   * With a client of onejob's HTTP API, an answer in doubt is followed: the
   * job is long-polled until someone resolves it (at most `inDoubtWaitMs`),
   * then the call is sent again with the same key and answers the outcome.
   * Without one, an answer in doubt is returned as it is (`inDoubt: true`).
   */
  readonly onejob?: OnejobClient;
  /** How long an answer in doubt is followed (with `onejob`). Default 30 000 ms. */
  readonly inDoubtWaitMs?: number;
}

/** The outcome of {@link callToolOnce}. */
export interface ToolCallOutcome extends ToolCallInfo {
  /** The tool result as onejob answered it (the tool's, stored; or, in doubt, onejob's `isError` result naming the job). */
  readonly result: ToolResult;
  /** The key the call was sent with (every try). */
  readonly idempotencyKey: string;
  /** How many times the call was sent. */
  readonly tries: number;
}

/** JSON-RPC error codes of the transport's own failures (the SDK's `ErrorCode`): the answer was lost, not refused. */
const CONNECTION_CLOSED = -32000;
const REQUEST_TIMEOUT = -32001;
/** `data.code`s after which a repeat with the same key is what the server asks for. */
const REPEAT_CODES = new Set(['attempt_in_flight', 'unavailable']);

/**
 * Calls a tool through onejob's `/mcp` as one intended call: one key in
 * `_meta["onejob/idempotencyKey"]` on every try, so however often it is
 * sent the tool runs at most once. It repeats the call (same key) when
 * the answer was lost (a network error, a cut connection, an HTTP 5xx or
 * 429, the client's own timeout), when the server's wait ended with the job
 * still running (a tool result whose `_meta["onejob/state"]` is `queued` or
 * `running`; older servers: `attempt_in_flight`), and when the tool server could not be
 * reached (`unavailable`: nothing was created). It never repeats a refusal
 * (`idempotency_key_reused`, `job_failed`, `job_finished`, an unknown tool,
 * HTTP 4xx); those throw an {@link OnejobClientError} with the server's
 * `data.code`, the job id and the key. An answer in doubt is returned
 * (`inDoubt: true`), or followed with `options.onejob`.
 *
 * @example
 * import { Client } from '@modelcontextprotocol/sdk/client/index.js';
 * const out = await callToolOnce(client, { name: 'payments.charge', arguments: { amount: 42 } }, { idempotencyKey: `${runId}:${toolCallId}` });
 * out.result.structuredContent; out.jobId; out.replayed;
 */
export async function callToolOnce(caller: ToolCaller, params: ToolCallParams, options: CallToolOnceOptions = {}): Promise<ToolCallOutcome> {
  const idempotencyKey = options.idempotencyKey ?? newIntentKey();
  const policy = retryPolicy(options.retry);
  const signal = options.signal;
  const inDoubtWaitMs = options.inDoubtWaitMs ?? 30_000;
  const call: ToolCallParams = { ...params, _meta: { ...(params._meta ?? {}), [TOOL_CALL_META.idempotencyKey]: idempotencyKey } };
  const requestOptions = { ...(signal ? { signal } : {}), ...(options.tryTimeoutMs === undefined ? {} : { timeout: options.tryTimeoutMs }) };
  let followed = false;
  let retries = 0;
  for (let tries = 1; ; tries++) {
    let result: ToolResult;
    try {
      const answer = await caller.callTool(call, undefined, requestOptions);
      if (!isRecord(answer)) throw new OnejobClientError('invalid_response', `${params.name}: the answer is not a tool result`, { idempotencyKey, tries });
      result = answer as ToolResult;
    } catch (error) {
      if (signal?.aborted) throw new OnejobClientError('aborted', 'the call was aborted', { cause: signal.reason, idempotencyKey, tries });
      if (error instanceof OnejobClientError) throw error;
      const failure = classify(error);
      const fail = () => new OnejobClientError(failure.code, `${params.name}: ${(error as Error)?.message ?? String(error)}`, {
        cause: error, idempotencyKey, tries, jobId: failure.jobId, status: failure.status,
      });
      if (!failure.repeat || retries >= policy.maxRetries) throw fail();
      retries++;
      await pause(failure.code === 'attempt_in_flight' ? policy.baseDelayMs : backoffMs(retries, policy), signal, idempotencyKey, tries);
      continue;
    }
    const info = toolCallInfo(result);
    if (info.stillRunning) {
      // The server's wait ended first: the same key waits for the same job (older servers said so with attempt_in_flight).
      if (retries >= policy.maxRetries) {
        throw new OnejobClientError('attempt_in_flight', `${params.name}: job ${info.jobId ?? '?'} is still ${info.state} after ${tries} tries; call again with the same key to keep waiting`, {
          idempotencyKey, tries, jobId: info.jobId,
        });
      }
      retries++;
      await pause(policy.baseDelayMs, signal, idempotencyKey, tries);
      continue;
    }
    if (info.inDoubt && options.onejob && info.jobId !== null && !followed && inDoubtWaitMs > 0) {
      // Only a resolution moves it on: wait for one, then the same key answers the outcome.
      const job = await options.onejob.waitForJob(info.jobId, { until: 'terminal', timeoutMs: inDoubtWaitMs, ...(signal ? { signal } : {}) });
      if (job.state !== 'unknown') {
        followed = true;
        continue;
      }
    }
    return { ...info, result, idempotencyKey, tries };
  }
}

/**
 * The job behind a tool call (`GET /v1/jobs/{id}`): from a tool result, a
 * {@link ToolCallOutcome} or an {@link OnejobClientError} that names one.
 * Null when there is none (a read-only tool passed through).
 *
 * @example
 * const job = await jobOfToolCall(onejob, outcome);
 * if (job?.state === 'unknown') await onejob.resolveAttempt(outcome.attemptId!, { outcome: 'failed', reason: 'the bank has no such charge' });
 */
export async function jobOfToolCall(onejob: OnejobClient, of: unknown, options: CallOptions = {}): Promise<Job | null> {
  const jobId = of instanceof OnejobClientError ? of.jobId : isRecord(of) && typeof of.jobId === 'string' ? of.jobId : toolCallInfo(of).jobId;
  return jobId === null ? null : onejob.getJob(jobId, options);
}

interface Failure {
  readonly code: string;
  readonly repeat: boolean;
  readonly jobId: string | null;
  readonly status: number | null;
}

/**
 * What a rejected `callTool` means. A JSON-RPC error (negative `code`)
 * carries onejob's `data.code`; the SDK's own closed/timeout codes and
 * anything without a code (a fetch that failed) lost the answer; a positive
 * `code` is the HTTP status of the SDK's transport error.
 */
function classify(error: unknown): Failure {
  const code = isRecord(error) ? error.code : undefined;
  const data = isRecord(error) && isRecord(error.data) ? error.data : {};
  const jobId = typeof data.job_id === 'string' ? data.job_id : null;
  if (typeof code === 'number' && code < 0) {
    if (typeof data.code === 'string') return { code: data.code, repeat: REPEAT_CODES.has(data.code), jobId, status: null };
    if (code === CONNECTION_CLOSED || code === REQUEST_TIMEOUT) return { code: 'network_error', repeat: true, jobId, status: null };
    return { code: `jsonrpc_${-code}`, repeat: false, jobId, status: null };
  }
  if (typeof code === 'number' && code >= 100 && code < 600) {
    return { code: code >= 500 || code === 429 ? 'network_error' : `http_${code}`, repeat: code >= 500 || code === 429, jobId, status: code };
  }
  return { code: 'network_error', repeat: true, jobId, status: null };
}

async function pause(ms: number, signal: AbortSignal | undefined, key: string, tries: number): Promise<void> {
  try {
    await sleep(ms, signal);
  } catch {
    throw new OnejobClientError('aborted', 'the call was aborted', { cause: signal?.reason, idempotencyKey: key, tries });
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
