/**
 * The chaos rules of budgets (CONTRACT §16, docs/limits.md): what the
 * checker asserts about an owner's spend limits from samples taken during a
 * run and the database read after it.
 *
 * - `budget_overrun`: a sample of an owner's window with spent + reserved
 *   above its limit, or the window's final spend above it, beyond what the
 *   owner's attempts cost above their own reservations (the estimate's error,
 *   which a settle may add after the reservation was made: docs/limits.md
 *   "The estimate and its error").
 * - `reservation_leak`: a window's reserved is not exactly the reserves of
 *   its attempts still `starting`, `running` or `unknown` (an ended attempt
 *   left its reservation behind, or one in flight holds none), or its spent
 *   is not exactly the sum of its attempts' costs.
 *
 * Pure: plain records in, violations out. Not yet fed by the chaos run (the
 * workload has no limited owner yet; chaos/records.ts would carry the samples
 * and the snapshot's `reserve_micros` and `spend_windows`): its planted
 * violations are tested in test/chaos/limits-checker.test.ts.
 */

/** The two rules. */
export type LimitViolationKind = 'budget_overrun' | 'reservation_leak';

/** One broken promise about a budget. */
export interface LimitViolation {
  readonly kind: LimitViolationKind;
  readonly owner: string;
  readonly window: string;
  readonly message: string;
}

/** A window's key: `day:YYYY-MM-DD` or `month:YYYY-MM-01`. */
export type WindowKey = `${'day' | 'month'}:${string}`;

/** One reading of an owner's window during the run. */
export interface SpendSample {
  readonly at: string;
  readonly owner: string;
  readonly window: WindowKey;
  readonly spentMicros: number;
  readonly reservedMicros: number;
}

/** An attempt as the snapshot has it (only those reserved under a limit: `reserve_micros` set). */
export interface ReservedAttempt {
  readonly id: string;
  readonly owner: string;
  readonly state: string;
  readonly startedAt: string;
  readonly reserveMicros: number;
  readonly costMicros: number | null;
}

/** A `spend_windows` row after the run. */
export interface WindowRow {
  readonly owner: string;
  readonly window: WindowKey;
  readonly spentMicros: number;
  readonly reservedMicros: number;
}

/** What {@link checkLimits} reads. */
export interface LimitsCheckInput {
  /** Each limited owner's limits in micro-dollars (null: unlimited). */
  readonly limits: Readonly<Record<string, { readonly dayMicros: number | null; readonly monthMicros: number | null }>>;
  readonly samples: readonly SpendSample[];
  readonly attempts: readonly ReservedAttempt[];
  readonly windows: readonly WindowRow[];
}

const HOLDING = new Set(['starting', 'running', 'unknown']);

/** The windows (UTC) an attempt is charged to. */
function windowsOf(startedAt: string): WindowKey[] {
  const iso = new Date(startedAt).toISOString();
  return [`day:${iso.slice(0, 10)}`, `month:${iso.slice(0, 7)}-01`];
}

function limitOf(input: LimitsCheckInput, owner: string, window: WindowKey): number | null {
  const l = input.limits[owner];
  if (!l) return null;
  return window.startsWith('day:') ? l.dayMicros : l.monthMicros;
}

/** The budget rules over one run's records. */
export function checkLimits(input: LimitsCheckInput): LimitViolation[] {
  const out: LimitViolation[] = [];
  // Per (owner, window): the reserves held, the costs, and how far costs went above their own reserves.
  const ledger = new Map<string, { owner: string; window: WindowKey; held: number; cost: number; over: number }>();
  for (const a of input.attempts) {
    for (const window of windowsOf(a.startedAt)) {
      const k = `${a.owner}\u0000${window}`;
      const e = ledger.get(k) ?? { owner: a.owner, window, held: 0, cost: 0, over: 0 };
      if (HOLDING.has(a.state)) e.held += a.reserveMicros;
      e.cost += a.costMicros ?? 0;
      e.over += Math.max(0, (a.costMicros ?? 0) - a.reserveMicros);
      ledger.set(k, e);
    }
  }
  const allowance = (owner: string, window: WindowKey) => ledger.get(`${owner}\u0000${window}`)?.over ?? 0;
  for (const s of input.samples) {
    const limit = limitOf(input, s.owner, s.window);
    if (limit === null) continue;
    const used = s.spentMicros + s.reservedMicros;
    if (used > limit + allowance(s.owner, s.window)) {
      out.push({ kind: 'budget_overrun', owner: s.owner, window: s.window, message: `at ${s.at} ${s.owner}'s ${s.window} held ${used} µ$ spent + reserved, above its limit of ${limit} µ$` });
    }
  }
  for (const w of input.windows) {
    const limit = limitOf(input, w.owner, w.window);
    if (limit !== null && w.spentMicros > limit + allowance(w.owner, w.window)) {
      out.push({ kind: 'budget_overrun', owner: w.owner, window: w.window, message: `${w.owner}'s ${w.window} spent ${w.spentMicros} µ$ in the end, above its limit of ${limit} µ$` });
    }
    const e = ledger.get(`${w.owner}\u0000${w.window}`) ?? { held: 0, cost: 0 };
    if (w.reservedMicros !== e.held) {
      out.push({ kind: 'reservation_leak', owner: w.owner, window: w.window, message: `${w.owner}'s ${w.window} has ${w.reservedMicros} µ$ reserved, but its attempts in flight or in doubt hold ${e.held} µ$` });
    }
    if (w.spentMicros !== e.cost) {
      out.push({ kind: 'reservation_leak', owner: w.owner, window: w.window, message: `${w.owner}'s ${w.window} has ${w.spentMicros} µ$ spent, but its attempts cost ${e.cost} µ$` });
    }
  }
  return out;
}
