/**
 * The classification table, as data.
 */
import { describe, expect, it } from 'vitest';
import { classifyStatus, outcomeFromExchange, retryHereAfter } from '../../src/providers/classify-outcome.ts';
import { ResponseTooLargeError } from '../../src/providers/http-exchange.ts';
import { AMBIGUOUS_CODES, FAILURE_CODES, ProviderErrorCode } from '../../src/providers/provider.ts';

describe('classifyStatus', () => {
  it.each([
    [400, 'failure', 'provider_rejected'],
    [401, 'failure', 'provider_rejected'],
    [403, 'failure', 'provider_rejected'],
    [404, 'failure', 'provider_rejected'],
    [408, 'failure', 'provider_rejected'],
    [413, 'failure', 'provider_rejected'],
    [418, 'failure', 'provider_rejected'],
    [422, 'failure', 'provider_rejected'],
    [429, 'failure', 'provider_rate_limited'],
    [503, 'failure', 'provider_overloaded'],
    [529, 'failure', 'provider_overloaded'],
    [307, 'failure', 'provider_rejected'],
    [409, 'ambiguous', 'provider_server_error'],
    [500, 'ambiguous', 'provider_server_error'],
    [502, 'ambiguous', 'provider_server_error'],
    [504, 'ambiguous', 'provider_server_error'],
    [520, 'ambiguous', 'provider_server_error'],
  ] as const)('%i → %s %s', (status, kind, code) => {
    expect(classifyStatus(status)).toMatchObject({ kind, code });
  });
});

describe('error codes', () => {
  it('every code is exactly one of failure or ambiguous', () => {
    for (const code of Object.values(ProviderErrorCode)) {
      expect(FAILURE_CODES.has(code) !== AMBIGUOUS_CODES.has(code)).toBe(true);
    }
  });
});

describe('outcomeFromExchange', () => {
  const parse = () => ({ malformed: 'never called' });

  it('a status that arrived before the connection broke still decides', () => {
    const outcome = outcomeFromExchange({ kind: 'lost', phase: 'after_headers', aborted: false, status: 429, headers: {}, cause: new Error('x') }, 'p', parse);
    expect(outcome).toMatchObject({ kind: 'failure', error: { code: 'provider_rate_limited' } });
  });

  it('a 2xx whose body broke is ambiguous', () => {
    const outcome = outcomeFromExchange({ kind: 'lost', phase: 'after_headers', aborted: false, status: 200, headers: {}, cause: new Error('x') }, 'p', parse);
    expect(outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'connection_lost', details: { status: 200 } } });
  });

  it('keeps the raw cause out of the JSON details', () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const outcome = outcomeFromExchange({ kind: 'not_sent', aborted: false, cause }, 'p', parse);
    if (outcome.kind === 'success') throw new Error('unexpected');
    expect(outcome.error.cause).toBe(cause);
    expect(JSON.parse(JSON.stringify(outcome.error.details))).toEqual({ provider: 'p', phase: 'before_send', cause_code: 'ECONNREFUSED', cause_message: 'connect ECONNREFUSED' });
  });

  it('parses Retry-After as seconds and retry-after-ms as milliseconds', () => {
    const a = outcomeFromExchange({ kind: 'response', status: 429, headers: { 'retry-after': '3' }, body: '' }, 'p', parse);
    const b = outcomeFromExchange({ kind: 'response', status: 429, headers: { 'retry-after-ms': '250', 'retry-after': '3' }, body: '' }, 'p', parse);
    expect(a).toMatchObject({ error: { details: { retry_after_ms: 3000 } } });
    expect(b).toMatchObject({ error: { details: { retry_after_ms: 250 } } });
  });
});

describe('a response too large to read', () => {
  it('is ambiguous malformed_response', () => {
    const cause = new ResponseTooLargeError('response body exceeds 10 bytes');
    const outcome = outcomeFromExchange({ kind: 'lost', phase: 'after_headers', aborted: false, status: 200, headers: {}, cause }, 'p', () => ({ malformed: 'x' }));
    expect(outcome).toMatchObject({ kind: 'ambiguous', error: { code: 'malformed_response', details: { status: 200 } } });
  });
});

describe('retryHereAfter: a definite failure that may be retried where it happened', () => {
  const at = (code: ProviderErrorCode, details: Record<string, unknown>) => retryHereAfter({ code, details: { provider: 'p', phase: 'after_body', ...details } });
  it('a 429 or 503 (and 529) with Retry-After: the wait it asked for', () => {
    expect(at('provider_rate_limited', { status: 429, retry_after_ms: 1000 })).toEqual({ retryAfterMs: 1000 });
    expect(at('provider_overloaded', { status: 503, retry_after_ms: 0 })).toEqual({ retryAfterMs: 0 });
    expect(at('provider_overloaded', { status: 529, retry_after_ms: 2000 })).toEqual({ retryAfterMs: 2000 });
  });
  it('a connection refused before anything was sent: no wait asked for', () => {
    expect(at('provider_unreachable', { phase: 'before_send', cause_code: 'ECONNREFUSED' })).toEqual({ retryAfterMs: null });
  });
  it('nothing else: a 429 without Retry-After, another unreachable cause, any ambiguous or other failure', () => {
    expect(at('provider_rate_limited', { status: 429 })).toBeNull();
    expect(at('provider_unreachable', { phase: 'before_send', cause_code: 'ENOTFOUND' })).toBeNull();
    expect(at('provider_unreachable', { phase: 'before_send', cause_code: 'UND_ERR_CONNECT_TIMEOUT' })).toBeNull();
    expect(at('provider_rejected', { status: 400, retry_after_ms: 1000 })).toBeNull();
    expect(at('provider_server_error', { status: 500, retry_after_ms: 1000 })).toBeNull();
    expect(at('connection_lost', { phase: 'after_send', cause_code: 'ECONNRESET' })).toBeNull();
  });
});
