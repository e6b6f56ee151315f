/**
 * Time, injected. Production uses {@link systemClock}; tests use {@link ManualClock}.
 */

/** A source of the current time. */
export interface Clock {
  /** The current time. */
  now(): Date;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => new Date() };

/**
 * A clock that moves only when told to.
 *
 * @example const clock = new ManualClock(new Date('2026-01-01T00:00:00Z')); clock.advance(5_000);
 */
export class ManualClock implements Clock {
  #ms: number;
  constructor(start: Date = new Date('2026-01-01T00:00:00.000Z')) {
    this.#ms = start.getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  /** Moves the clock forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.#ms += ms;
  }
  /** Sets the clock to `at`. */
  set(at: Date): void {
    this.#ms = at.getTime();
  }
}
