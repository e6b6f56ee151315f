/**
 * Group commit, once, above the drivers (docs/store.md, "Group commit").
 *
 * The autocommit calls that many requests make at once (a job insert, the
 * fast path's create and winning settle, a stream claim, the replay reads by
 * key) are queued by one {@link Batcher} per lane and leave together. A
 * driver says only what its engine can do with many calls at once: its lanes,
 * each a set of {@link BatchableMethod}s and a `many` that runs a list of
 * such calls as one statement (PostgreSQL) or one transaction (SQLite). The
 * rest is decided here, the same for every engine:
 * - a batch of one is the driver's own single-call query;
 * - the reads by key share one read between callers queued together, and
 *   each caller gets its own copy of the answer;
 * - inside a transaction nothing is batched (the driver's transaction
 *   queries never pass through here).
 */
import type { DriverQueries } from './driver.ts';
import { Batcher, ItemFailed } from './batcher.ts';

/** The driver methods a lane may batch. */
export type BatchableMethod =
  | 'jobInsert'
  | 'jobInsertKeyless'
  | 'jobInsertLeased'
  | 'attemptSettleWon'
  | 'jobStreamClaim'
  | 'attemptMarkRunning'
  | 'jobGetByKey'
  | 'attemptListByJob';

/**
 * One call of a batchable method: its name, its arguments, and what the
 * lane's `prepare` made of them when the call was made.
 */
export type BatchedCall = {
  [M in BatchableMethod]: { readonly method: M; readonly args: Parameters<DriverQueries[M]>; readonly prepared: unknown };
}[BatchableMethod];

/** One queue of a driver: the methods it carries and how the engine runs many of their calls at once. */
export interface BatchLane {
  readonly methods: readonly BatchableMethod[];
  /** The calls (any of `methods`, mixed) at once: one answer per call, in order; an {@link ItemFailed} fails that call alone. */
  readonly many: (calls: readonly BatchedCall[]) => Promise<ArrayLike<unknown>>;
  /** Most batches of this lane on their way at once. */
  readonly maxInFlight: number;
  /** Beyond the first, a batch leaves only once this long (ms) has passed since the last one left (the batcher's spares). Default: at once. */
  readonly spareAfterMs?: number | undefined;
  /** Most calls in one batch. Default: no limit. */
  readonly maxBatch?: number | undefined;
  /**
   * Runs when a call is made, not when its batch is taken: what can be done
   * per call (SQLite: its script) is done while the batch before it is on
   * its way, instead of between two batches. Its answer is the call's
   * `prepared`.
   */
  readonly prepare?: ((call: BatchedCall) => unknown) | undefined;
  /**
   * A call's answer from what `many` gave for it, worked out by the caller
   * once answered (so it is not done between two batches). Default: that
   * value itself. (`one` answers in full.)
   */
  readonly answer?: ((call: BatchedCall, raw: unknown) => unknown) | undefined;
  /** One call alone (a batch of one). Default: the driver's own single-call query. */
  readonly one?: ((call: BatchedCall) => Promise<unknown>) | undefined;
  /** Waits for the engine before a batch is taken (SQLite's transaction gate). */
  readonly whenReady?: ((go: () => void) => void) | undefined;
}

/** How a driver's lanes batch. */
export interface BatchingOptions {
  readonly lanes: readonly BatchLane[];
  /** Most calls waiting in each lane; one more is refused at once with `refusal`. */
  readonly maxQueued: number;
  /** Whether an error of a whole batch fails all its calls (a lost connection) rather than running each again alone. */
  readonly failsAll: (e: unknown) => boolean;
  readonly refusal: (queued: number) => Error;
  /** Wraps every call (SQLite: retried while another process holds the write lock). */
  readonly around?: (<T>(op: () => Promise<T>) => Promise<T>) | undefined;
}

/** A value `many` gave for a call, still to be worked out into its answer by the lane's `answer`. */
class FromMany {
  constructor(readonly value: unknown) {}
}

/** One string for a pair of strings (an owner and a key or job id), equal only for equal pairs. */
export const pairKey = (a: string, b: string): string => `${a.length}:${a}\u0000${b}`;

/** The reads that callers queued together share, by what they read: (owner, key) and (owner, job). */
const SHARED_READS: ReadonlySet<BatchableMethod> = new Set(['jobGetByKey', 'attemptListByJob']);

/** Each caller of a shared read gets its own copy. */
function copyOf(method: BatchableMethod, answer: unknown): unknown {
  if (method === 'jobGetByKey') return answer && { ...(answer as object) };
  if (method === 'attemptListByJob') return (answer as object[]).map((a) => ({ ...a }));
  return answer;
}

/** `base` (the driver's autocommit queries) with the lanes' methods going through their batchers. */
export function batchedQueries(base: DriverQueries, options: BatchingOptions): DriverQueries {
  const out: DriverQueries = { ...base };
  const around = options.around ?? (<T>(op: () => Promise<T>) => op());
  for (const lane of options.lanes) {
    const answerOf = lane.answer;
    const many = lane.many as (calls: readonly BatchedCall[]) => Promise<ArrayLike<unknown>>;
    const batcher = new Batcher<BatchedCall, unknown>({
      // What `many` gave is marked, so that the caller works out its answer (`one` answers in full).
      many: answerOf ? async (calls) => Array.from(await many(calls), (v) => (v instanceof ItemFailed ? v : new FromMany(v))) : many,
      one: lane.one ?? ((c) => (base[c.method] as (...a: unknown[]) => Promise<unknown>)(...c.args)),
      shareKey: (c) => (SHARED_READS.has(c.method) ? pairKey(...(c.args as [string, string])) : undefined),
      maxInFlight: lane.maxInFlight,
      spareAfterMs: lane.spareAfterMs,
      maxBatch: lane.maxBatch,
      maxQueued: options.maxQueued,
      failsAll: options.failsAll,
      refusal: options.refusal,
      whenReady: lane.whenReady,
    });
    const { prepare } = lane;
    for (const method of lane.methods) {
      const shared = SHARED_READS.has(method);
      const call = (...args: unknown[]) => {
        const made = { method, args, prepared: undefined as unknown };
        const c = made as unknown as BatchedCall;
        if (prepare) made.prepared = prepare(c);
        return around(async () => {
          const raw = await batcher.submit(c);
          const answer = raw instanceof FromMany ? answerOf!(c, raw.value) : raw;
          return shared ? copyOf(method, answer) : answer;
        });
      };
      (out as unknown as Record<string, unknown>)[method] = call;
    }
  }
  return out;
}
