/**
 * The budget rules of the chaos checker (chaos/limits-checker.ts), each shown
 * to fire on a planted violation and to stay quiet on a clean record.
 */
import { describe, expect, it } from 'vitest';
import { checkLimits, type LimitsCheckInput } from '../../chaos/limits-checker.ts';

const at = '2026-12-07T10:00:00.000Z';
const clean: LimitsCheckInput = {
  limits: { alice: { dayMicros: 1_000, monthMicros: null } },
  samples: [
    { at, owner: 'alice', window: 'day:2026-12-07', spentMicros: 0, reservedMicros: 1_000 },
    { at, owner: 'alice', window: 'day:2026-12-07', spentMicros: 300, reservedMicros: 500 },
  ],
  attempts: [
    { id: 'a1', owner: 'alice', state: 'succeeded', startedAt: at, reserveMicros: 500, costMicros: 300 },
    { id: 'a2', owner: 'alice', state: 'unknown', startedAt: at, reserveMicros: 500, costMicros: null },
  ],
  windows: [
    { owner: 'alice', window: 'day:2026-12-07', spentMicros: 300, reservedMicros: 500 },
    { owner: 'alice', window: 'month:2026-12-01', spentMicros: 300, reservedMicros: 500 },
  ],
};

describe('chaos budget rules', () => {
  it('a clean record has no violation', () => {
    expect(checkLimits(clean)).toEqual([]);
  });

  it('budget_overrun: a sample above the limit', () => {
    const planted = { ...clean, samples: [...clean.samples, { at, owner: 'alice', window: 'day:2026-12-07' as const, spentMicros: 600, reservedMicros: 500 }] };
    expect(checkLimits(planted)).toEqual([expect.objectContaining({ kind: 'budget_overrun', owner: 'alice', window: 'day:2026-12-07' })]);
  });

  it('budget_overrun: a final spend above the limit (beyond the estimate error of its attempts)', () => {
    const attempts = [{ id: 'a1', owner: 'alice', state: 'succeeded', startedAt: at, reserveMicros: 1_000, costMicros: 900 }, { id: 'a3', owner: 'alice', state: 'succeeded', startedAt: at, reserveMicros: 0, costMicros: 200 }];
    // a3 cost 200 above its reserve of 0: allowed as estimate error; 1,100 spent is within 1,000 + 200.
    const ok = { ...clean, samples: [], attempts, windows: [{ owner: 'alice', window: 'day:2026-12-07' as const, spentMicros: 1_100, reservedMicros: 0 }] };
    expect(checkLimits(ok)).toEqual([]);
    const planted = { ...ok, attempts: attempts.map((a) => (a.id === 'a3' ? { ...a, reserveMicros: 200 } : a)) };
    expect(checkLimits(planted).map((v) => v.kind)).toEqual(['budget_overrun']);
  });

  it('reservation_leak: an ended attempt left its reservation in the window', () => {
    const planted = { ...clean, attempts: clean.attempts.map((a) => (a.id === 'a2' ? { ...a, state: 'failed' } : a)) };
    expect(checkLimits(planted)).toEqual([
      expect.objectContaining({ kind: 'reservation_leak', window: 'day:2026-12-07' }),
      expect.objectContaining({ kind: 'reservation_leak', window: 'month:2026-12-01' }),
    ]);
  });

  it("reservation_leak: the window's spend disagrees with its attempts' costs", () => {
    const planted = { ...clean, windows: clean.windows.map((w) => (w.window.startsWith('day') ? { ...w, spentMicros: 250 } : w)) };
    expect(checkLimits(planted)).toEqual([expect.objectContaining({ kind: 'reservation_leak', window: 'day:2026-12-07', message: expect.stringContaining('attempts cost 300') })]);
  });

  it('an attempt reserved on day 1 and settled on day 2 is charged to day 1', () => {
    const late = { id: 'a4', owner: 'alice', state: 'succeeded', startedAt: '2026-12-07T23:59:59.000Z', reserveMicros: 100, costMicros: 50 };
    const input: LimitsCheckInput = {
      limits: clean.limits, samples: [], attempts: [late],
      windows: [{ owner: 'alice', window: 'day:2026-12-07', spentMicros: 50, reservedMicros: 0 }, { owner: 'alice', window: 'day:2026-12-08', spentMicros: 0, reservedMicros: 0 }, { owner: 'alice', window: 'month:2026-12-01', spentMicros: 50, reservedMicros: 0 }],
    };
    expect(checkLimits(input)).toEqual([]);
    const wrongDay = { ...input, windows: [{ owner: 'alice', window: 'day:2026-12-07' as const, spentMicros: 0, reservedMicros: 0 }, { owner: 'alice', window: 'day:2026-12-08' as const, spentMicros: 50, reservedMicros: 0 }, input.windows[2]!] };
    expect(checkLimits(wrongDay).map((v) => v.kind)).toEqual(['reservation_leak', 'reservation_leak']);
  });
});
