/**
 * The client's one error type. An answer of the server carries its
 * problem+json `code` (CONTRACT §3: `idempotency_key_reused`,
 * `attempt_in_doubt`, …); failures on the client's side have their own codes
 * (`network_error`, `aborted`, `timeout`, `invalid_response`).
 */
import type { Problem } from './api-shapes.ts';

/** Codes the client itself gives (the server's codes come from its answers). */
export const ClientErrorCode = {
  /** The request did not reach the server, or its answer did not arrive (after the retries the call allows). */
  NetworkError: 'network_error',
  /** The caller's `AbortSignal` fired. */
  Aborted: 'aborted',
  /** A client-side time limit (`timeoutMs`, `inDoubtWaitMs`) ended the call. */
  Timeout: 'timeout',
  /** The server answered something that is not the API's JSON. */
  InvalidResponse: 'invalid_response',
} as const;
export type ClientErrorCode = (typeof ClientErrorCode)[keyof typeof ClientErrorCode];

/** Options of {@link OnejobClientError}. */
export interface OnejobClientErrorOptions {
  /** The HTTP status, or null when no answer arrived. */
  readonly status?: number | null;
  /** The problem document as sent (RFC 9457 members plus extensions such as `job_id`). */
  readonly problem?: Problem | null;
  /** The job the error is about (`Onejob-Job-Id` header or the problem's `job_id`). */
  readonly jobId?: string | null;
  /** The attempt the error is about (the problem's `attempt_id`). */
  readonly attemptId?: string | null;
  /** The server's `Retry-After`, in milliseconds, or null. */
  readonly retryAfterMs?: number | null;
  /** The Idempotency-Key the call used, or null. */
  readonly idempotencyKey?: string | null;
  /** How many times the request was sent (1 = no retry). */
  readonly tries?: number;
  readonly cause?: unknown;
}

/**
 * A failed call: the server's answer (with its stable `code`) or a failure on
 * the way to it.
 *
 * @example
 * try { await client.chatCompletions(body) }
 * catch (e) { if (isOnejobClientError(e, 'attempt_in_doubt')) showResolveButton(e.jobId) }
 */
export class OnejobClientError extends Error {
  override readonly name: string = 'OnejobClientError';
  /** The problem's `code` (a server code of CONTRACT §3) or a {@link ClientErrorCode}. */
  readonly code: string;
  readonly status: number | null;
  readonly problem: Problem | null;
  readonly jobId: string | null;
  readonly attemptId: string | null;
  readonly retryAfterMs: number | null;
  readonly idempotencyKey: string | null;
  /** How many times the request was sent before this error (1 = no retry; 0 = never sent). */
  readonly tries: number;

  constructor(code: string, message: string, options: OnejobClientErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = options.status ?? null;
    this.problem = options.problem ?? null;
    this.jobId = options.jobId ?? null;
    this.attemptId = options.attemptId ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
    this.idempotencyKey = options.idempotencyKey ?? null;
    this.tries = options.tries ?? 1;
  }
}

/** Whether `e` is an {@link OnejobClientError}, optionally with the given code. */
export function isOnejobClientError(e: unknown, code?: string): e is OnejobClientError {
  return e instanceof OnejobClientError && (code === undefined || e.code === code);
}
