/**
 * Errors → `application/problem+json` (RFC 9457), in one place.
 *
 * {@link toProblem} turns any thrown value into a status, a problem document
 * and extra headers: an {@link OnejobError} through `ERROR_TABLE` (a code
 * with an `apiCode` is shown under it: every 503 is `unavailable` with a
 * `Retry-After`, its cause in `reason`); Fastify's
 * own request errors (validation, body parsing, body limit) into the
 * contract's codes; anything else into a generic 500 `internal` (the caller
 * logs the original). Bad input never becomes a 500.
 */
import { ERROR_TABLE, isOnejobError, type ErrorCode } from '../core/errors.ts';

/** A rendered problem. */
export interface Problem {
  readonly status: number;
  readonly body: Record<string, unknown> & { type: string; title: string; status: number; detail: string; code: ErrorCode };
  readonly headers: Readonly<Record<string, string>>;
  /** True when the error was not an expected one and must be logged as such. */
  readonly unexpected: boolean;
}

/** The problem `type` URI of a code. */
export function problemType(code: ErrorCode): string {
  return `urn:onejob:error:${code}`;
}

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message?: string;
  validation?: { instancePath?: string; message?: string; keyword?: string; params?: Record<string, unknown> }[];
  validationContext?: string;
}

function describeValidation(err: FastifyLikeError): { field: string | null; detail: string } {
  const part = err.validationContext ?? 'body';
  const first = err.validation?.[0];
  if (!first) return { field: null, detail: err.message ?? `${part} is invalid` };
  let path = (first.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  let reason = first.message ?? 'is invalid';
  const params = first.params ?? {};
  if (first.keyword === 'required' && typeof params.missingProperty === 'string') {
    path = path ? `${path}.${params.missingProperty}` : params.missingProperty;
    reason = 'is required';
  } else if (first.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
    path = path ? `${path}.${params.additionalProperty}` : params.additionalProperty;
    reason = 'is not allowed';
  } else if (first.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    reason = `must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  } else if (first.keyword === 'discriminator') {
    path = path ? `${path}.state` : 'state';
    reason = 'must be one of "succeeded", "failed", "cancelled"';
  }
  const field = path === '' ? null : path;
  const where = part === 'querystring' ? 'query parameter' : part === 'body' ? 'field' : part;
  const detail = field === null ? `the ${part} ${reason}` : `${where} ${field} ${reason}`;
  return { field, detail };
}

/** Seconds a client is asked to wait after a `503 unavailable`. */
export const RETRY_AFTER_SECONDS = 1;

function render(cause: ErrorCode, detail: string, status: number, extra: Record<string, unknown>, unexpected = false): Problem {
  // A cause the API presents under another code (database_unavailable → unavailable) keeps it as `reason`.
  const apiCode = ERROR_TABLE[cause].apiCode;
  const code = apiCode ?? cause;
  if (apiCode !== undefined) extra = { ...extra, reason: cause };
  const spec = ERROR_TABLE[code];
  const headers: Record<string, string> = {};
  if (code === 'idempotency_key_reused') headers['x-should-retry'] = 'false';
  if (code === 'unauthorized') headers['www-authenticate'] = 'Bearer';
  if (status === 503) headers['retry-after'] = String(RETRY_AFTER_SECONDS);
  // The limits' refusals (CONTRACT §16) say when to come back, when they know.
  if (status === 429 && typeof extra.retry_after_seconds === 'number') headers['retry-after'] = String(extra.retry_after_seconds);
  return {
    status,
    body: { ...extra, type: problemType(code), title: spec.title, status, detail, code },
    headers,
    unexpected,
  };
}

/**
 * The problem for any thrown value.
 *
 * @example const p = toProblem(new OnejobError('job_not_found', 'no job job_1')); // p.status === 404
 */
export function toProblem(error: unknown): Problem {
  if (isOnejobError(error)) {
    return render(error.code, error.message, error.spec.status, { ...error.details });
  }
  const err = (error ?? {}) as FastifyLikeError;
  if (err.validation) {
    const { field, detail } = describeValidation(err);
    // A body of the wrong shape is 422; a bad query, path or header is 400.
    const status = err.validationContext === 'body' ? 422 : 400;
    return render('invalid_request', detail, status, field === null ? {} : { field });
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return render('payload_too_large', 'the request body is larger than the configured limit', 413, {});
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return render('invalid_request', `the body is not valid JSON: ${err.message ?? ''}`.trim(), 400, {});
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return render('invalid_request', 'the body must be JSON (Content-Type: application/json)', 400, {});
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    if (err.statusCode === 413) return render('payload_too_large', 'the request body is larger than the configured limit', 413, {});
    return render('invalid_request', err.message ?? 'invalid request', err.statusCode === 404 ? 404 : 400, {});
  }
  return render('internal', 'an internal error occurred; it has been logged', 500, {}, true);
}
