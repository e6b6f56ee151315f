/**
 * Provider refusals a route returns to its caller instead of failing over
 * (issue 35): with `"passThrough": ["content_filter"]`, a provider's `400`
 * whose error code says its content policy refused the request is the
 * answer, not a fault. Another provider would most likely refuse too (or,
 * worse, answer what the first one would not); the caller gets the
 * provider's error in its protocol's shape. Pure.
 *
 * The executor marks such an attempt error ({@link markPassThrough}); the
 * failover decision (`decideAfterSettle`) ends the job with
 * {@link passedThroughJobError} instead of moving on; the endpoints answer it
 * as `400 content_filter` ({@link passedThroughError}).
 */
import type { RecordedError } from './types.ts';

/** The refusals a route may pass through. */
export const PASS_THROUGH_KINDS = ['content_filter'] as const;
export type PassThroughKind = (typeof PASS_THROUGH_KINDS)[number];

/**
 * Error codes (or types) providers give a content-policy refusal: OpenAI and
 * Azure OpenAI `content_filter` / `content_policy_violation`, Azure's inner
 * `ResponsibleAIPolicyViolation`.
 */
export const CONTENT_FILTER_CODES: ReadonlySet<string> = new Set(['content_filter', 'content_policy_violation', 'ResponsibleAIPolicyViolation']);

/** The member of a recorded error's details that marks it passed through. */
const MARK = 'pass_through';

function detailsOf(error: RecordedError): Record<string, unknown> {
  const d = error.details;
  return typeof d === 'object' && d !== null && !Array.isArray(d) ? (d as Record<string, unknown>) : {};
}

/** Whether an attempt's error is a provider's content-policy refusal: a `400` whose error code or type is one of {@link CONTENT_FILTER_CODES}. */
export function isContentFilterRefusal(error: RecordedError): boolean {
  const d = detailsOf(error);
  if (d.status !== 400) return false;
  return [d.provider_error_code, d.provider_error_type].some((c) => typeof c === 'string' && CONTENT_FILTER_CODES.has(c));
}

/**
 * The attempt's error, marked to be passed through when the route asks for
 * its kind (`passThrough`); else unchanged.
 *
 * @example markPassThrough({ code: 'provider_rejected', message, details: { status: 400, provider_error_code: 'content_filter' } }, ['content_filter'])
 * // { …, details: { …, pass_through: 'content_filter' } }
 */
export function markPassThrough(error: RecordedError, kinds: readonly string[] | undefined): RecordedError {
  if (kinds === undefined || !kinds.includes('content_filter') || !isContentFilterRefusal(error)) return error;
  return { ...error, details: { ...detailsOf(error), [MARK]: 'content_filter' } };
}

/** The kind an error was passed through as, or null. */
export function passThroughKindOf(error: RecordedError | null | undefined): PassThroughKind | null {
  if (error === null || error === undefined) return null;
  return detailsOf(error)[MARK] === 'content_filter' ? 'content_filter' : null;
}

/**
 * A job's error when its attempt's refusal was passed through: code
 * `content_filter`, the provider's message, and the provider's details.
 */
export function passedThroughJobError(attemptError: RecordedError): RecordedError {
  const d = detailsOf(attemptError);
  const said = typeof d.provider_message === 'string' ? d.provider_message : attemptError.message;
  return { code: 'content_filter', message: `${String(d.provider ?? 'the provider')} refused the request under its content policy: ${said}`, details: { ...d, attempt_error: attemptError.code } };
}

/** What an endpoint answers for a job ended by a passed-through refusal: its status, code and message, or null for any other job error. */
export function passedThroughError(jobError: RecordedError | null | undefined): { readonly status: 400; readonly code: 'content_filter'; readonly message: string; readonly details: Record<string, unknown> } | null {
  if (jobError?.code !== 'content_filter' || passThroughKindOf(jobError) === null) return null;
  const d = detailsOf(jobError);
  return { status: 400, code: 'content_filter', message: jobError.message, details: { provider: d.provider ?? null, provider_error_code: d.provider_error_code ?? d.provider_error_type ?? null } };
}
