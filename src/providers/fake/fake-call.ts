/**
 * The fake provider's record of one call (`FakeProvider.calls`, `GET
 * /calls`): what arrived, which behaviour it got, and what was done with it.
 */
import type { FakeCallSource } from './fake-api-context.ts';
import type { FakeBehaviour, FakeProtocol } from './fake-behaviour.ts';

/**
 * What the fake did with a call: `pending` (waiting on a gate or delay),
 * `hanging`, then one of `replied` (streamed or not), `stream-error` (an
 * error event sent mid-stream), `error` (a status ≥ 300), `malformed`,
 * `raw`, `reset`, `rejected` (a bad request, answered 400/401 without using
 * the script), `client-closed` (the client went away first), `server-closed`.
 */
export type FakeCallResult =
  | 'pending'
  | 'hanging'
  | 'replied'
  | 'stream-error'
  | 'error'
  | 'malformed'
  | 'raw'
  | 'reset'
  | 'rejected'
  | 'client-closed'
  | 'server-closed';

/** One call the fake received (a JSON-safe record; `GET /calls` returns these). */
export interface FakeCall {
  /** 1, 2, … in order of arrival (the whole body received). */
  readonly seq: number;
  readonly protocol: FakeProtocol;
  readonly method: string;
  readonly path: string;
  /** Request headers, names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** The `Idempotency-Key` header, or null. */
  readonly idempotencyKey: string | null;
  /** The `Onejob-Job-Id` header, or null. */
  readonly jobId: string | null;
  /** The `Onejob-Attempt-Id` header, or null. */
  readonly attemptId: string | null;
  /** The parsed JSON body, or the raw text when it is not JSON. */
  readonly body: unknown;
  /** ISO time the body was received. */
  readonly receivedAt: string;
  /** Where the behaviour came from; null for a rejected call. */
  readonly source: FakeCallSource | null;
  /** The behaviour applied; null for a rejected call. */
  readonly behaviour: FakeBehaviour | null;
  /** What was done so far. */
  readonly result: FakeCallResult;
  /** The status sent, when headers were sent. */
  readonly status: number | null;
  /** ISO time the fake finished with the call, or null. */
  readonly finishedAt: string | null;
  /** Whether the request asked for a stream (`"stream": true`). */
  readonly stream: boolean;
  /** Streaming: how many content events (text pieces, tool-call argument pieces, a refusal) were sent. */
  readonly chunksSent: number;
}

/** A call record while the fake works on it. */
export type MutableCall = { -readonly [K in keyof FakeCall]: FakeCall[K] };

/** The results that end a call (anything but `pending` and `hanging`). */
export const FINAL_RESULTS: ReadonlySet<FakeCallResult> = new Set<FakeCallResult>(['replied', 'stream-error', 'error', 'malformed', 'raw', 'reset', 'rejected', 'client-closed', 'server-closed']);

/**
 * The calls received, in order, and the waits on them
 * (`waitForCalls`, `waitForResult`).
 *
 * @example const call = log.add({ … }); log.finish(call, 'replied', 200);
 */
export class FakeCallLog {
  readonly #calls: MutableCall[] = [];
  #seq = 0;
  #callWaiters: { count: number; resolve: (calls: readonly FakeCall[]) => void }[] = [];
  readonly #resultWaiters = new Map<number, ((call: FakeCall) => void)[]>();

  /** Every call, oldest first (a snapshot). */
  get calls(): readonly FakeCall[] {
    return this.#calls.map((c) => ({ ...c }));
  }

  /** Records a call that has arrived (its body read), numbering it. */
  add(call: Omit<MutableCall, 'seq'>): MutableCall {
    const recorded: MutableCall = { seq: ++this.#seq, ...call };
    this.#calls.push(recorded);
    const ready = this.#callWaiters.filter((w) => this.#calls.length >= w.count);
    if (ready.length > 0) {
      this.#callWaiters = this.#callWaiters.filter((w) => this.#calls.length < w.count);
      const snapshot = this.calls;
      for (const w of ready) w.resolve(snapshot);
    }
    return recorded;
  }

  /** Records how a call ended, and wakes who waits for it. */
  finish(call: MutableCall, result: FakeCallResult, status?: number): void {
    call.result = result;
    if (status !== undefined) call.status = status;
    call.finishedAt = new Date().toISOString();
    if (!this.#calls.includes(call)) return; // forgotten by reset(): its seq may be reused
    const waiters = this.#resultWaiters.get(call.seq);
    if (waiters !== undefined) {
      this.#resultWaiters.delete(call.seq);
      for (const resolve of waiters) resolve({ ...call });
    }
  }

  /** Resolves once at least `count` calls have arrived, with all calls so far. */
  waitForCalls(count: number): Promise<readonly FakeCall[]> {
    if (this.#calls.length >= count) return Promise.resolve(this.calls);
    return new Promise((resolve) => this.#callWaiters.push({ count, resolve }));
  }

  /** Resolves once call `seq` is finished, with its record. */
  waitForResult(seq: number): Promise<FakeCall> {
    const call = this.#calls.find((c) => c.seq === seq);
    if (call !== undefined && FINAL_RESULTS.has(call.result)) return Promise.resolve({ ...call });
    return new Promise((resolve) => {
      const list = this.#resultWaiters.get(seq) ?? [];
      list.push(resolve);
      this.#resultWaiters.set(seq, list);
    });
  }

  /** Forgets the calls and restarts `seq` at 1 (calls in progress carry on unrecorded). */
  reset(): void {
    this.#calls.length = 0;
    this.#seq = 0;
  }
}
