/**
 * The fuzzer's reading of "a valid credential" (chaos/fuzz.ts): a 2xx to any
 * request it calls invalid is a finding, so it must read tokens exactly as
 * the server does (Bearer anywhere; x-api-key on /v1/messages only, however
 * that path is spelled).
 */
import { describe, expect, it } from 'vitest';
import { hasValidCredential } from '../../chaos/fuzz.ts';

describe('hasValidCredential', () => {
  it('reads Bearer tokens as the server does, and x-api-key only on /v1/messages', () => {
    const r = (path: string, headers: Record<string, string>) => hasValidCredential({ path, headers });
    expect(r('/%761/jobs', {})).toBe(false);
    expect(r('/%761/jobs', { authorization: 'Bearer tok_mallory' })).toBe(true);
    expect(r('/v1/jobs', { authorization: 'bearer tok_mallory ' })).toBe(true);
    expect(r('/v1/jobs', { authorization: 'Bearer tok_malloryx' })).toBe(false);
    expect(r('/v1/jobs', { authorization: 'Basic dG9rOg==' })).toBe(false);
    expect(r('/v1/messages', { 'x-api-key': 'tok_mallory' })).toBe(true);
    expect(r('/v1/m%65ssages', { 'x-api-key': 'tok_mallory' })).toBe(true);
    expect(r('/v1/jobs', { 'x-api-key': 'tok_mallory' })).toBe(false);
    expect(r('/v1/messages', { 'x-api-key': 'tok_mallory', authorization: 'Bearer nope' })).toBe(false);
  });
});
