/**
 * `"limits"` (CONTRACT §16): the default and per-owner entries merged member
 * by member, `null` unlimited; worst cases from pricing; bad values refused at
 * start with the path and the reason.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { spendPolicyOf } from '../../src/config/limits-config.ts';
import { estimateInputTokens, limitsOf, requestOutputCap, retryAfterSeconds, windowsAt, worstCaseMicros } from '../../src/core/limits.ts';

const provider = { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' };

function load(extra: Record<string, unknown>) {
  const path = join(mkdtempSync(join(tmpdir(), 'onejob-limits-')), 'onejob.config.json');
  writeFileSync(path, JSON.stringify({ providers: { p: provider }, routes: { r: { providers: ['p'] } }, ...extra }));
  return () => loadConfig({ argvConfigPath: path, env: {} });
}

describe('limits in the config', () => {
  it('merges member by member: a named member wins (null unlimited), a left-out one keeps the default, neither is unlimited', () => {
    const config = load({
      limits: {
        default: { spendUsd: { day: 20 }, concurrency: 32 },
        owners: { alice: { spendUsd: { day: 50, month: 1000 }, concurrency: 64, requestsPerMinute: 600 }, bob: { concurrency: null }, carol: { spendUsd: null } },
      },
    })();
    expect(limitsOf(config.limits, 'alice')).toEqual({ spendDayMicros: 50_000_000, spendMonthMicros: 1_000_000_000, concurrency: 64, requestsPerMinute: 600 });
    expect(limitsOf(config.limits, 'bob')).toEqual({ spendDayMicros: 20_000_000, spendMonthMicros: null, concurrency: null, requestsPerMinute: null });
    expect(limitsOf(config.limits, 'carol')).toEqual({ spendDayMicros: null, spendMonthMicros: null, concurrency: 32, requestsPerMinute: null });
    expect(limitsOf(config.limits, 'dave')).toEqual({ spendDayMicros: 20_000_000, spendMonthMicros: null, concurrency: 32, requestsPerMinute: null });
  });

  it('no "limits": everyone unlimited', () => {
    const config = load({})();
    expect(limitsOf(config.limits, 'x')).toEqual({ spendDayMicros: null, spendMonthMicros: null, concurrency: null, requestsPerMinute: null });
  });

  it.each([
    [{ default: { spendUsd: { day: -1 } } }, '/limits/default/spendUsd/day'],
    [{ default: { spendUsd: { week: 5 } } }, '/limits/default/spendUsd'],
    [{ owners: { alice: { concurrency: 0 } } }, '/limits/owners/alice/concurrency'],
    [{ owners: { alice: { requestsPerMinute: 1.5 } } }, '/limits/owners/alice/requestsPerMinute'],
    [{ owners: { alice: { budget: 3 } } }, '/limits/owners/alice'],
    [{ perOwner: {} }, '/limits'],
  ])('refuses %j naming %s', (limits, path) => {
    expect(load({ limits })).toThrow(expect.objectContaining({ code: 'config_invalid', message: expect.stringContaining(path) }));
  });

  it('refuses a provider maxOutputTokens that is not a positive integer', () => {
    const bad = () => loadConfig({ argvConfigPath: (() => {
      const path = join(mkdtempSync(join(tmpdir(), 'onejob-limits-')), 'c.json');
      writeFileSync(path, JSON.stringify({ providers: { p: { ...provider, maxOutputTokens: 0 } }, routes: { r: { providers: ['p'] } } }));
      return path;
    })(), env: {} });
    expect(bad).toThrow(expect.objectContaining({ code: 'config_invalid', message: expect.stringContaining('/providers/p/maxOutputTokens') }));
  });
});

describe('the worst case (CONTRACT §16)', () => {
  it('input: UTF-8 bytes ÷ 3 rounded up; output: the request cap, else the provider maxOutputTokens, else 4096', () => {
    expect(estimateInputTokens('abcd')).toBe(2);
    expect(estimateInputTokens('é')).toBe(1); // 2 bytes
    expect(estimateInputTokens({ a: 'x' })).toBe(3); // {"a":"x"} is 9 bytes
    expect(requestOutputCap({ max_tokens: 100 })).toBe(100);
    expect(requestOutputCap({ max_completion_tokens: 50 })).toBe(50);
    expect(requestOutputCap({ max_output_tokens: 70 })).toBe(70);
    expect(requestOutputCap({ messages: [] })).toBeNull();
    const pricing = { inputPerMTok: 1, outputPerMTok: 2 };
    // 3 input tokens at $1/MTok = 3 µ$; 4096 output at $2/MTok = 8192 µ$.
    expect(worstCaseMicros({ a: 'x' }, pricing, null)).toBe(8195);
    expect(worstCaseMicros({ a: 'x' }, pricing, 1000)).toBe(2003);
    expect(worstCaseMicros({ a: 'x', max_tokens: 10 }, pricing, 1000)).toBe(9 + 20); // {"a":"x","max_tokens":10} is 26 bytes → 9 tokens
  });

  it('the policy: priced, unpriced, and an unconfigured (tool) provider is free', () => {
    const config = load({ providers: { p: { ...provider, pricing: { inputPerMTok: 1, outputPerMTok: 1 }, maxOutputTokens: 10 }, q: provider }, routes: { r: { providers: ['p', 'q'] } } })();
    const policy = spendPolicyOf(config);
    expect(policy.worstCase('p', 'abc')).toBe(11);
    expect(policy.worstCase('q', 'abc')).toBe('unpriced');
    expect(policy.worstCase('mcp:files.write', {})).toBe('free');
  });

  it('windows are UTC calendar days and months; Retry-After only within the hour', () => {
    const w = windowsAt(new Date('2026-12-31T23:30:00Z'));
    expect(w.day).toEqual({ startsOn: '2026-12-31', resetsAt: new Date('2027-01-01T00:00:00Z') });
    expect(w.month).toEqual({ startsOn: '2026-12-01', resetsAt: new Date('2027-01-01T00:00:00Z') });
    expect(retryAfterSeconds(new Date('2026-12-31T23:30:00Z'), w.day.resetsAt)).toBe(1800);
    expect(retryAfterSeconds(new Date('2026-12-31T22:00:00Z'), w.day.resetsAt)).toBeNull();
  });
});
