/**
 * Cost arithmetic (CONTRACT §8): exact integer micro-dollars from decimal
 * prices, and sums over a million attempts without float drift.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { costMicros, meterUsage, microsToUsd, toMicroUnits } from '../../src/core/usage.ts';

describe('usage and cost arithmetic', () => {
  it('reads decimal prices exactly (0.15 is 150000 micro-units, never 149999.99…)', () => {
    expect(toMicroUnits(0.15)).toBe(150_000n);
    expect(toMicroUnits(3)).toBe(3_000_000n);
    expect(toMicroUnits(0.000001)).toBe(1n);
    expect(toMicroUnits(1e-7)).toBe(0n); // finer than the sixth decimal: rounded
    expect(toMicroUnits(0.0000015)).toBe(2n);
    expect(toMicroUnits(2.5e21)).toBe(2_500_000_000_000_000_000_000_000_000n);
    expect(() => toMicroUnits(-1)).toThrow(RangeError);
    expect(() => toMicroUnits(Number.NaN)).toThrow(RangeError);
  });

  it('costs tokens × price per million tokens, rounded half up to a micro-dollar', () => {
    const u = (p: number, c: number) => ({ promptTokens: p, completionTokens: c, totalTokens: p + c });
    expect(costMicros(u(1000, 500), { inputPerMTok: 0.15, outputPerMTok: 0.6 })).toBe(450);
    expect(costMicros(u(1, 0), { inputPerMTok: 0.5, outputPerMTok: 0 })).toBe(1); // 0.5 µ$ → 1
    expect(costMicros(u(1, 0), { inputPerMTok: 0.49, outputPerMTok: 0 })).toBe(0);
    expect(costMicros(u(0, 0), { inputPerMTok: 5, outputPerMTok: 15 })).toBe(0);
  });

  it('matches an exact rational computation for any counts and six-decimal prices', () => {
    fc.assert(
      fc.property(fc.nat(10_000_000), fc.nat(10_000_000), fc.nat(100_000_000), fc.nat(100_000_000), (p, c, inMicro, outMicro) => {
        const pricing = { inputPerMTok: inMicro / 1e6, outputPerMTok: outMicro / 1e6 };
        const pico = BigInt(p) * BigInt(inMicro) + BigInt(c) * BigInt(outMicro);
        const expected = Number((pico + 500_000n) / 1_000_000n);
        expect(costMicros({ promptTokens: p, completionTokens: c, totalTokens: p + c }, pricing)).toBe(expected);
      }),
    );
  });

  it('a million attempts sum exactly in micro-dollars, where float dollars drift', () => {
    const pricing = { inputPerMTok: 0.1, outputPerMTok: 0.3 };
    let micros = 0;
    let floatUsd = 0;
    for (let i = 0; i < 1_000_000; i++) {
      const usage = { promptTokens: 1 + (i % 7), completionTokens: 1 + (i % 3), totalTokens: 0 };
      const cost = costMicros(usage, pricing);
      micros += cost;
      floatUsd += usage.promptTokens * 0.1e-6 + usage.completionTokens * 0.3e-6;
    }
    // Exact: every term is an integer, far below 2^53.
    let expected = 0n;
    for (let i = 0; i < 1_000_000; i++) expected += (BigInt(1 + (i % 7)) * 100_000n + BigInt(1 + (i % 3)) * 300_000n + 500_000n) / 1_000_000n;
    expect(BigInt(micros)).toBe(expected);
    expect(microsToUsd(micros)).toBe(micros / 1e6);
    // The float sum of dollar amounts is not even a whole number of micro-dollars.
    expect(Number.isInteger(floatUsd * 1e6)).toBe(false);
  });

  it('meters a reported usage; none reported is null, unpriced is a null cost', () => {
    expect(meterUsage({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }, { inputPerMTok: 1, outputPerMTok: 2 })).toEqual({
      usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: 11,
    });
    expect(meterUsage(null, { inputPerMTok: 1, outputPerMTok: 2 })).toEqual({ usage: null, costMicros: null });
    expect(meterUsage({ prompt_tokens: 3, completion_tokens: 4 }, null)).toEqual({ usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costMicros: null });
  });
});
