/**
 * The one place where a provider exchange becomes a {@link ProviderOutcome}:
 * the HTTP status table and the transport cases, shared by every adapter.
 *
 * The rule: `failure` only when the provider certainly did not execute the
 * request (nothing was sent, or it answered with a status its documentation
 * defines as "rejected before processing"); anything else that is not a
 * readable completion is `ambiguous`. See `docs/providers.md`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { redactCredentials, redactStrings } from '../core/redact-credentials.ts';
import { ResponseTooLargeError, type HttpExchange } from './http-exchange.ts';
import type {
  NormalizedCompletion,
  ProviderError,
  ProviderErrorCode,
  ProviderErrorDetails,
  ProviderOutcome,
} from './provider.ts';

/** How one HTTP status is classified, and why. */
export interface StatusClassification {
  readonly kind: 'failure' | 'ambiguous';
  readonly code: ProviderErrorCode;
  /** Why, in a few words (shown in docs and error messages). */
  readonly reason: string;
}

const rejected = (reason: string): StatusClassification => ({ kind: 'failure', code: 'provider_rejected', reason });
const serverError = (reason: string): StatusClassification => ({ kind: 'ambiguous', code: 'provider_server_error', reason });

/** The statuses with a documented meaning. Others fall back by class (see {@link classifyStatus}). */
export const STATUS_TABLE: Readonly<Record<number, StatusClassification>> = {
  400: rejected('invalid request, rejected before processing'),
  401: rejected('authentication failed'),
  403: rejected('permission denied'),
  404: rejected('unknown model or endpoint'),
  408: rejected('the server timed out reading the request'),
  409: serverError('conflict: a request with this idempotency key may still be in flight'),
  413: rejected('request too large'),
  422: rejected('request not processable'),
  429: { kind: 'failure', code: 'provider_rate_limited', reason: 'rate limited, the request was not processed' },
  500: serverError('internal error, the request may have been processed'),
  501: rejected('not implemented'),
  502: serverError('bad gateway, an upstream may have processed the request'),
  503: { kind: 'failure', code: 'provider_overloaded', reason: 'overloaded or unavailable, the request was not processed' },
  504: serverError('gateway timeout, an upstream may still be processing the request'),
  505: rejected('HTTP version not supported'),
  529: { kind: 'failure', code: 'provider_overloaded', reason: 'overloaded (Anthropic), the request was not processed' },
};

/**
 * Classifies a non-2xx status: {@link STATUS_TABLE}, else 3xx and 4xx are
 * failures (not processed; redirects are never followed), else ambiguous.
 *
 * @example classifyStatus(529) // { kind: 'failure', code: 'provider_overloaded', … }
 */
export function classifyStatus(status: number): StatusClassification {
  const known = STATUS_TABLE[status];
  if (known !== undefined) return known;
  if (status >= 300 && status < 400) return rejected('redirect (not followed)');
  if (status >= 400 && status < 500) return rejected('client error, rejected before processing');
  return serverError('unexpected status, the request may have been processed');
}

/**
 * Whether a definite failure may be tried again on the same provider
 * (CONTRACT §11, a provider's `retry`): a 429 or 503 (Anthropic's 529 too)
 * that says when to come back (`Retry-After`, `retry-after-ms`), or a
 * connection refused before anything was sent. Each certainly did not
 * execute. Returns the wait the provider asked for (null when it could not
 * say: a refused connection), or null when the failure is not of this kind
 * (a 429 without `Retry-After` fails over at once: nothing says when to come back).
 *
 * @example retryHereAfter({ code: 'provider_rate_limited', details: { provider: 'p', phase: 'after_body', status: 429, retry_after_ms: 1000 } }) // { retryAfterMs: 1000 }
 */
export function retryHereAfter(error: Pick<ProviderError, 'code' | 'details'>): { readonly retryAfterMs: number | null } | null {
  const d = error.details;
  if ((error.code === 'provider_rate_limited' || error.code === 'provider_overloaded') && d.retry_after_ms !== undefined) {
    return { retryAfterMs: d.retry_after_ms };
  }
  if (error.code === 'provider_unreachable' && d.phase === 'before_send' && d.cause_code === 'ECONNREFUSED') return { retryAfterMs: null };
  return null;
}

/** Turns a parsed 2xx body into a completion, or says why it is not one. */
export type CompletionParser = (body: unknown) => NormalizedCompletion | { readonly malformed: string };

/**
 * Classifies one exchange.
 *
 * @example outcomeFromExchange(exchange, 'primary', parseOpenAICompletion)
 */
export function outcomeFromExchange(exchange: HttpExchange, provider: string, parse: CompletionParser): ProviderOutcome {
  if (exchange.kind === 'not_sent') {
    return exchange.aborted
      ? failure('aborted_before_send', `${provider}: aborted before the request was sent`, { provider, phase: 'before_send', ...causeDetails(exchange.cause) }, exchange.cause)
      : failure('provider_unreachable', `${provider}: could not connect, the request was not sent (${describeCause(exchange.cause)})`, { provider, phase: 'before_send', ...causeDetails(exchange.cause) }, exchange.cause);
  }

  if (exchange.kind === 'lost') {
    const base = { provider, phase: exchange.phase, ...headerDetails(exchange.headers), ...causeDetails(exchange.cause) };
    const status = exchange.status;
    if (status !== undefined && !(status >= 200 && status < 300)) {
      // The status line already said what happened; a broken body does not change it.
      const c = classifyStatus(status);
      return outcome(c.kind, c.code, `${provider} answered ${status} (${c.reason}), then the connection broke`, { ...base, status }, exchange.cause);
    }
    if (exchange.cause instanceof ResponseTooLargeError) {
      return ambiguous('malformed_response', `${provider} answered ${status} with a body too large to read (${exchange.cause.message})`, { ...base, ...(status === undefined ? {} : { status }) }, exchange.cause);
    }
    if (exchange.aborted) {
      return ambiguous('aborted_after_send', `${provider}: aborted after the request was sent; it may have been processed`, { ...base, ...(status === undefined ? {} : { status }) }, exchange.cause);
    }
    const what = exchange.phase === 'after_send' ? 'before any answer' : 'while reading the answer';
    return ambiguous('connection_lost', `${provider}: the connection broke ${what} (${describeCause(exchange.cause)}); the request may have been processed`, { ...base, ...(status === undefined ? {} : { status }) }, exchange.cause);
  }

  const { status, headers, body } = exchange;
  const base: ProviderErrorDetails = { provider, phase: 'after_body', status, ...headerDetails(headers) };
  if (status < 200 || status >= 300) {
    const c = classifyStatus(status);
    const info = errorBodyInfo(body);
    const detail = info.message === undefined ? '' : `: ${info.message}`;
    const type = info.type === undefined ? '' : ` ${info.type}`;
    return outcome(c.kind, c.code, `${provider} answered ${status}${type} (${c.reason})${truncate(detail, 300)}`, {
      ...base,
      ...(info.type === undefined ? {} : { provider_error_type: info.type }),
      ...(info.code === undefined ? {} : { provider_error_code: info.code }),
      ...(info.message === undefined ? {} : { provider_message: truncate(info.message, 1000) }),
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (err) {
    return ambiguous('malformed_response', `${provider} answered ${status} with a body that is not JSON`, { ...base, ...causeDetails(err) }, err);
  }
  const parsed = parse(json);
  if ('malformed' in parsed) {
    return ambiguous('malformed_response', `${provider} answered ${status} with an unexpected body: ${parsed.malformed}`, base);
  }
  const requestId = base.provider_request_id;
  return { kind: 'success', completion: parsed, raw: json, ...(requestId === undefined ? {} : { providerRequestId: requestId }) };
}

/** A definite failure outcome. */
export function failure(code: ProviderErrorCode, message: string, details: ProviderErrorDetails, cause?: unknown): ProviderOutcome {
  return { kind: 'failure', error: providerError(code, message, details, cause) };
}

/** An ambiguous outcome. */
export function ambiguous(code: ProviderErrorCode, message: string, details: ProviderErrorDetails, cause?: unknown): ProviderOutcome {
  return { kind: 'ambiguous', error: providerError(code, message, details, cause) };
}

function outcome(kind: 'failure' | 'ambiguous', code: ProviderErrorCode, message: string, details: ProviderErrorDetails, cause?: unknown): ProviderOutcome {
  return kind === 'failure' ? failure(code, message, details, cause) : ambiguous(code, message, details, cause);
}

/**
 * Every provider error is built here: its `message` and `details` are what
 * tenants may see (recorded on the attempt and the job, sent in a stream's
 * error event), so credentials and organisation ids are redacted from them
 * ({@link redactCredentials}); the text as the provider wrote it stays in
 * `unredacted`, for the log line only.
 */
function providerError(code: ProviderErrorCode, message: string, details: ProviderErrorDetails, cause: unknown): ProviderError {
  const safe = { code, message: redactCredentials(message), details: redactStrings(details) };
  const changed = safe.message !== message || Object.entries(details).some(([k, v]) => safe.details[k as keyof ProviderErrorDetails] !== v);
  return {
    ...safe,
    ...(changed ? { unredacted: { message, details } } : {}),
    ...(cause === undefined ? {} : { cause }),
  };
}

function causeDetails(cause: unknown): Pick<ProviderErrorDetails, 'cause_code' | 'cause_message'> {
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return { cause_code: typeof code === 'string' ? code : cause.name, cause_message: cause.message };
  }
  if (cause === undefined || cause === null) return {};
  return { cause_message: String(cause) };
}

function describeCause(cause: unknown): string {
  const d = causeDetails(cause);
  return d.cause_code ?? d.cause_message ?? 'unknown error';
}

function headerDetails(headers: IncomingHttpHeaders | undefined): Pick<ProviderErrorDetails, 'provider_request_id' | 'retry_after_ms'> {
  if (headers === undefined) return {};
  const first = (name: string): string | undefined => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const out: { provider_request_id?: string; retry_after_ms?: number } = {};
  const requestId = first('x-request-id') ?? first('request-id');
  if (requestId !== undefined) out.provider_request_id = requestId;
  const retryAfter = parseRetryAfter(first('retry-after-ms'), first('retry-after'));
  if (retryAfter !== undefined) out.retry_after_ms = retryAfter;
  return out;
}

function parseRetryAfter(ms: string | undefined, value: string | undefined): number | undefined {
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  if (value === undefined) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** The `{ error: { type, message } }` members shared by OpenAI's and Anthropic's error bodies. */
function errorBodyInfo(body: string): { type?: string; code?: string; message?: string } {
  try {
    const json = JSON.parse(body) as { error?: unknown; message?: unknown };
    const err = json.error;
    if (typeof err === 'object' && err !== null) {
      const e = err as { type?: unknown; code?: unknown; message?: unknown };
      const type = typeof e.type === 'string' ? e.type : typeof e.code === 'string' ? e.code : undefined;
      return {
        ...(type === undefined ? {} : { type }),
        ...(typeof e.code === 'string' ? { code: e.code } : {}),
        ...(typeof e.message === 'string' ? { message: e.message } : {}),
      };
    }
    if (typeof err === 'string') return { message: err };
    if (typeof json.message === 'string') return { message: json.message };
  } catch {
    // not JSON: fall through to the raw text
  }
  const text = body.trim();
  return text === '' ? {} : { message: text };
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
