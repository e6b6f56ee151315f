import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isOnejobError } from '../../src/core/errors.ts';
import { canonicalJson, fingerprint } from '../../src/core/fingerprint.ts';
import { casComplete, decideAfterSettle, decideStartAttempt, deriveActiveJobState, everyProviderEligible, type AttemptView } from '../../src/core/job-rules.ts';
import { ATTEMPT_STATES, ATTEMPT_TRANSITIONS, JOB_STATES, transitionAttempt, transitionJob, type AttemptState } from '../../src/core/states.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const att = (number: number, state: AttemptState, provider = 'p' + number, startedMs = 0): AttemptView => ({ id: `att_${number}`, number, provider, state, startedAt: at(startedMs) });
const ask = (over: Partial<Parameters<typeof decideStartAttempt>[0]>) =>
  decideStartAttempt({ jobState: 'running', chain: ['p1', 'p2', 'p3'], attempts: [], kind: 'manual', hedgeAfterMs: null, now: at(0), eligible: everyProviderEligible, ...over });
const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (isOnejobError(e)) return e.code;
    throw e;
  }
  return 'ok';
};

describe('attempt state machine', () => {
  it('a timeout is unknown, never failed', () => {
    expect(transitionAttempt('running', 'time_out')).toBe('unknown');
    expect(transitionAttempt('starting', 'time_out')).toBe('unknown');
  });
  it('unknown may become succeeded, failed, cancelled or superseded, but never dispatches again', () => {
    expect(transitionAttempt('unknown', 'win')).toBe('succeeded');
    expect(transitionAttempt('unknown', 'fail')).toBe('failed');
    expect(transitionAttempt('unknown', 'cancel')).toBe('cancelled');
    expect(transitionAttempt('unknown', 'lose')).toBe('superseded');
    expect(codeOf(() => transitionAttempt('unknown', 'dispatch'))).toBe('illegal_transition');
  });
  it('terminal states have no way out', () => {
    for (const s of ['succeeded', 'failed', 'cancelled', 'superseded'] as const) {
      expect(Object.keys(ATTEMPT_TRANSITIONS[s])).toHaveLength(0);
      expect(codeOf(() => transitionAttempt(s, 'win'))).toBe('illegal_transition');
    }
  });
  it('no transition ever leads from a state into failed on a timeout', () => {
    for (const s of ATTEMPT_STATES) expect(ATTEMPT_TRANSITIONS[s].time_out ?? 'unknown').toBe('unknown');
  });
  it('a terminal job refuses every move with job_finished', () => {
    for (const to of JOB_STATES) expect(codeOf(() => transitionJob('succeeded', to))).toBe('job_finished');
    expect(transitionJob('unknown', 'running')).toBe('running');
    expect(codeOf(() => transitionJob('running', 'queued'))).toBe('illegal_transition');
  });
});

describe('deriveActiveJobState', () => {
  it('running beats unknown; unknown blocks; nothing active is null', () => {
    expect(deriveActiveJobState([])).toBe('queued');
    expect(deriveActiveJobState([att(1, 'unknown'), att(2, 'running')])).toBe('running');
    expect(deriveActiveJobState([att(1, 'unknown'), att(2, 'failed')])).toBe('unknown');
    expect(deriveActiveJobState([att(1, 'failed'), att(2, 'superseded')])).toBeNull();
  });
});

describe('decideStartAttempt (invariant 3)', () => {
  it('refuses while an attempt is starting or unknown, even with a hedge allowed', () => {
    expect(codeOf(() => ask({ attempts: [att(1, 'starting')], hedgeAfterMs: 0 }))).toBe('attempt_in_doubt');
    expect(codeOf(() => ask({ attempts: [att(1, 'unknown')], hedgeAfterMs: 0, kind: 'hedge' }))).toBe('attempt_in_doubt');
  });
  it('allows a hedge beside a running attempt only after hedgeAfterMs', () => {
    const running = [att(1, 'running', 'p1', 0)];
    expect(codeOf(() => ask({ attempts: running, hedgeAfterMs: null, kind: 'hedge', now: at(10_000) }))).toBe('attempt_in_flight');
    expect(codeOf(() => ask({ attempts: running, hedgeAfterMs: 500, kind: 'hedge', now: at(499) }))).toBe('attempt_in_flight');
    expect(ask({ attempts: running, hedgeAfterMs: 500, kind: 'hedge', now: at(500) })).toEqual({ provider: 'p2', skipped: [] });
    expect(codeOf(() => ask({ attempts: running, hedgeAfterMs: 500, kind: 'failover', now: at(500) }))).toBe('attempt_in_flight');
  });
  it('checks in the contract order: in doubt, in flight, finished, certification', () => {
    expect(codeOf(() => ask({ jobState: 'succeeded', attempts: [att(1, 'unknown')] }))).toBe('attempt_in_doubt');
    expect(codeOf(() => ask({ jobState: 'cancelled', attempts: [att(1, 'running')] }))).toBe('attempt_in_flight');
    expect(codeOf(() => ask({ jobState: 'failed', provider: 'p9', eligible: () => 'not_certified' }))).toBe('job_finished');
    expect(codeOf(() => ask({ provider: 'p2', eligible: () => 'not_certified' }))).toBe('provider_not_certified');
  });
  it('walks the chain past tried and ineligible providers, recording skips', () => {
    const d = ask({ attempts: [att(1, 'failed', 'p1')], eligible: (p) => (p === 'p2' ? 'not_certified' : null) });
    expect(d).toEqual({ provider: 'p3', skipped: [{ provider: 'p2', reason: 'not_certified' }] });
    expect(codeOf(() => ask({ attempts: [att(1, 'failed', 'p1'), att(2, 'failed', 'p2'), att(3, 'failed', 'p3')] }))).toBe('chain_exhausted');
  });
});

describe('decideAfterSettle', () => {
  it('stays while another attempt is active, fails over when none is, fails when the chain is spent', () => {
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1'), att(2, 'running', 'p2')], everyProviderEligible, null)).toEqual({ action: 'stay', state: 'running' });
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], everyProviderEligible, null)).toMatchObject({ action: 'failover', provider: 'p2' });
    const fail = decideAfterSettle(['p1'], [att(1, 'failed', 'p1')], everyProviderEligible, { code: 'http_503', message: 'busy' });
    expect(fail).toMatchObject({ action: 'fail', error: { code: 'providers_exhausted' } });
  });
});

describe('casComplete (invariant 2, reference model)', () => {
  it('the first completion wins; any later one loses, whatever the order attempts started in', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 10 }), (order) => {
        let job = { state: 'running' as const, version: 0, completedBy: null as string | null, result: null as unknown };
        let winners = 0;
        for (const n of order) {
          const next = casComplete(job as never, `att_${n}`, 0, { by: n });
          if (next) {
            winners++;
            job = next as never;
          }
        }
        expect(winners).toBe(1);
        expect(job.completedBy).toBe(`att_${order[0]}`);
        expect(job.result).toEqual({ by: order[0] });
      }),
    );
  });
});

describe('fingerprints', () => {
  it('ignore key order and whitespace but not values', () => {
    expect(canonicalJson(JSON.parse('{ "b": 2, "a": [1, {"d": 1, "c": 2}] }'))).toBe('{"a":[1,{"c":2,"d":1}],"b":2}');
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (obj) => {
        const reversed = Object.fromEntries(Object.entries(obj).reverse());
        expect(fingerprint(reversed)).toBe(fingerprint(obj));
      }),
    );
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: 2 }));
  });
  it('refuse a value nested too deeply to walk, with a typed error instead of a stack overflow', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(codeOf(() => fingerprint(deep))).toBe('invalid_request');
  });
});

describe('retry where it happened (decideAfterSettle with a retry request)', () => {
  const policy = { attempts: 3, maxWaitMs: 5_000 };
  const rateLimited = (retryAfterMs: number | null) => ({ provider: 'p1', retryAfterMs, policy });
  const err = { code: 'provider_rate_limited', message: '429' };

  it('the same provider again after the wait it asked for, before the next of the chain', () => {
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], everyProviderEligible, err, rateLimited(1_000))).toEqual({ action: 'retry', provider: 'p1', delayMs: 1_000 });
  });

  it('without a retry request: the first provider of the chain with no attempt yet, as before', () => {
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], everyProviderEligible, err)).toMatchObject({ action: 'failover', provider: 'p2' });
  });

  it('a wait longer than maxWaitMs fails over at once', () => {
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], everyProviderEligible, err, rateLimited(5_001))).toMatchObject({ action: 'failover', provider: 'p2' });
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], everyProviderEligible, err, rateLimited(5_000))).toMatchObject({ action: 'retry', delayMs: 5_000 });
  });

  it('attempts counts every attempt of the job on that provider, the first included', () => {
    const two = [att(1, 'failed', 'p1'), att(2, 'failed', 'p1')];
    expect(decideAfterSettle(['p1', 'p2'], two, everyProviderEligible, err, rateLimited(0))).toMatchObject({ action: 'retry', provider: 'p1' });
    const three = [...two, att(3, 'failed', 'p1')];
    expect(decideAfterSettle(['p1', 'p2'], three, everyProviderEligible, err, rateLimited(0))).toMatchObject({ action: 'failover', provider: 'p2' });
    expect(decideAfterSettle(['p1'], three, everyProviderEligible, err, rateLimited(0))).toMatchObject({ action: 'fail' });
  });

  it('a refused connection (no wait asked for) backs off from 500 ms, doubling, capped at maxWaitMs', () => {
    const refused = { provider: 'p1', retryAfterMs: null, policy: { attempts: 10, maxWaitMs: 3_000 } };
    const delays = [1, 2, 3, 4, 5].map((n) => {
      const attempts = Array.from({ length: n }, (_, i) => att(i + 1, 'failed', 'p1'));
      return (decideAfterSettle(['p1', 'p2'], attempts, everyProviderEligible, err, refused) as { delayMs: number }).delayMs;
    });
    expect(delays).toEqual([500, 1_000, 2_000, 3_000, 3_000]);
  });

  it('never while another attempt is active (the guards of §2), and not to a provider no longer eligible', () => {
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1'), att(2, 'running', 'p2')], everyProviderEligible, err, rateLimited(0))).toEqual({ action: 'stay', state: 'running' });
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1'), att(2, 'unknown', 'p2')], everyProviderEligible, err, rateLimited(0))).toEqual({ action: 'stay', state: 'unknown' });
    const p1Gone = (p: string) => (p === 'p1' ? 'not_certified' : null);
    expect(decideAfterSettle(['p1', 'p2'], [att(1, 'failed', 'p1')], p1Gone, err, rateLimited(0))).toMatchObject({ action: 'failover', provider: 'p2' });
  });
});
