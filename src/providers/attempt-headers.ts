/**
 * The headers that carry an attempt's identity downstream, so a proxy or
 * provider that dedupes (or just logs) can tie a request to its job.
 */
import { context, propagation } from '@opentelemetry/api';
import type { ProviderRequest } from './provider.ts';

/** The `User-Agent` onejob sends. */
export const ONEJOB_USER_AGENT = 'onejob/0.1';

/**
 * The identity headers of one attempt:
 * `Idempotency-Key: <jobId>:<attemptNumber>`, `X-Request-Id: <jobId>`,
 * `Onejob-Job-Id: <jobId>`, `Onejob-Attempt-Id: <attemptId>`, and, when
 * tracing is on, `traceparent` of the active span.
 *
 * @example attemptHeaders({ jobId: 'job_1', attemptId: 'att_2', attemptNumber: 2 })['idempotency-key'] // 'job_1:2'
 */
export function attemptHeaders(request: Pick<ProviderRequest, 'jobId' | 'attemptId' | 'attemptNumber'>): Record<string, string> {
  const headers: Record<string, string> = {
    'idempotency-key': `${request.jobId}:${request.attemptNumber}`,
    'x-request-id': request.jobId,
    'onejob-job-id': request.jobId,
    'onejob-attempt-id': request.attemptId,
  };
  // W3C `traceparent` (and `tracestate`) of the active span, the provider call
  // (docs/tracing.md); nothing when tracing is off.
  propagation.inject(context.active(), headers);
  return headers;
}

/**
 * Merges headers in order, later sources winning, with names lower-cased so
 * that `Authorization` and `authorization` cannot both be sent.
 */
export function mergeHeaders(...sources: (Readonly<Record<string, string>> | undefined)[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const source of sources) {
    if (source === undefined) continue;
    for (const [name, value] of Object.entries(source)) out[name.toLowerCase()] = value;
  }
  return out;
}

/**
 * The headers of a JSON API call that is not a chat request (a task's create, get and cancel; a background
 * Response's poll and cancel): `accept`, onejob's user agent, `Authorization: Bearer <apiKey>` when one is set,
 * then the provider's own `headers`, which win.
 */
export function jsonApiHeaders(apiKey: string | null | undefined, headers?: Readonly<Record<string, string>>): Record<string, string> {
  return mergeHeaders({ accept: 'application/json', 'user-agent': ONEJOB_USER_AGENT }, apiKey ? { authorization: `Bearer ${apiKey}` } : undefined, headers);
}
