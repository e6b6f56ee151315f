/**
 * The one group-commit queue of the store (docs/store.md, "Group commit").
 *
 * Calls wait in a queue while at most `maxInFlight` batches are on their way;
 * whatever waits when a slot frees leaves together as one batch (`many`),
 * at most `maxBatch` calls. Under low load nothing waits: a batch of one runs
 * `one`, the single-call statement, at once. Nothing here knows SQL: the
 * drivers give `many` (one statement, or one transaction, for many calls)
 * and `one`; {@link batchedQueries} puts this queue in front of them.
 *
 * - Calls with the same share key, queued together, wait for one run and
 *   share its answer (replays of one Idempotency-Key reading the same job).
 *   A call never joins a batch that was already sent when it was made, so a
 *   read sees everything committed before its call.
 * - `many` answers each call in order: a value, or an {@link ItemFailed}
 *   that fails that call alone.
 * - If `many` fails as a whole, `failsAll(e)` decides: every call fails with
 *   it (a lost connection), or each call is run again alone with `one`, so
 *   an error reaches only the call that caused it.
 * - At most `maxQueued` distinct calls wait; one more is refused at once with
 *   `refusal(queued)`, before anything reaches the database.
 * - A batch's slot is given back as soon as its answer is in, before its
 *   callers are answered: the next batch leaves first, and what the callers
 *   then do (reading rows into jobs, answering HTTP) overlaps with it
 *   (docs/performance.md §13: without it the group commit was 5–12 % slower).
 * - `whenReady` (optional) delays taking a batch until the resource is free
 *   (SQLite's transaction gate); calls arriving meanwhile join that batch.
 * - `spareAfterMs` (optional): the batches beyond the first on their way are
 *   spares, for a slow statement. Another batch leaves beside those on their
 *   way only once that long has passed since the last batch left; until then the
 *   calls wait and leave together when a slot frees. Each statement written to
 *   the database wakes a backend, and on a busy machine those wake-ups cost
 *   more than the statement (docs/performance.md §17): one batch at a time
 *   under steady load, a second as soon as one is slow.
 */

/** A call of a batch that failed alone (the others of the batch did not). */
export class ItemFailed {
  constructor(readonly error: unknown) {}
}

/** Options of {@link Batcher}. */
export interface BatcherOptions<T, R> {
  /** Many calls at once: one answer per call, in order (a value or an {@link ItemFailed}). */
  readonly many: (calls: readonly T[]) => Promise<ArrayLike<R | ItemFailed>>;
  /** One call alone (a batch of one, and each call again when `many` failed as a whole). */
  readonly one: (call: T) => Promise<R>;
  /** Calls with equal keys (queued together) share one run; undefined: the call shares nothing. */
  readonly shareKey?: ((call: T) => string | undefined) | undefined;
  /** Most batches on their way at once. */
  readonly maxInFlight: number;
  /** Most calls in one batch. Default: no limit. */
  readonly maxBatch?: number | undefined;
  /** Most distinct calls waiting. */
  readonly maxQueued: number;
  /** Whether an error of `many` fails every call of the batch (else each is run again alone). */
  readonly failsAll: (e: unknown) => boolean;
  /** The error of a call refused because `queued` calls already wait. */
  readonly refusal: (queued: number) => Error;
  /** Calls `go` once the next batch may be taken (a gate); default: at once. */
  readonly whenReady?: ((go: () => void) => void) | undefined;
  /** A batch leaves beside others on their way only once this long (ms) has passed since the last batch left; default: at once. */
  readonly spareAfterMs?: number | undefined;
  /** The clock and timer of `spareAfterMs` (tests order by hand); default: `performance.now` and an unref'd `setTimeout`. */
  readonly clock?: { readonly now: () => number; readonly after: (ms: number, fn: () => void) => void } | undefined;
}

const REAL_CLOCK = {
  now: () => performance.now(),
  after: (ms: number, fn: () => void) => void setTimeout(fn, ms).unref(),
};

interface Entry<T, R> {
  readonly call: T;
  readonly share: string | undefined;
  readonly waiters: { resolve: (r: R) => void; reject: (e: unknown) => void }[];
}

/** See the module comment. */
export class Batcher<T, R> {
  readonly #o: BatcherOptions<T, R>;
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  readonly #maxQueued: number;
  /** Calls not yet sent, in arrival order. */
  #queue: Entry<T, R>[] = [];
  /** The queued calls that others may share, by their share key. */
  readonly #shared = new Map<string, Entry<T, R>>();
  #inFlight = 0;
  /** A batch slot is taken and waits for `whenReady`. */
  #waitingForGate = false;
  readonly #spareAfterMs: number | undefined;
  readonly #clock: NonNullable<BatcherOptions<T, R>['clock']>;
  /** When the last batch left ({@link BatcherOptions.spareAfterMs}). */
  #lastLeftAt = 0;
  /** A pump is scheduled for when a spare may leave. */
  #spareTimer = false;

  constructor(options: BatcherOptions<T, R>) {
    this.#o = options;
    this.#maxInFlight = Math.max(1, options.maxInFlight);
    this.#maxBatch = Math.max(1, options.maxBatch ?? Number.POSITIVE_INFINITY);
    this.#maxQueued = Math.max(1, options.maxQueued);
    this.#spareAfterMs = options.spareAfterMs;
    this.#clock = options.clock ?? REAL_CLOCK;
  }

  /** Distinct calls waiting to be sent. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Runs `call` in the next batch. Rejects with `refusal` at once when `maxQueued` calls already wait. */
  submit(call: T): Promise<R> {
    const share = this.#o.shareKey?.(call);
    const joined = share === undefined ? undefined : this.#shared.get(share);
    if (!joined && this.#queue.length >= this.#maxQueued) return Promise.reject(this.#o.refusal(this.#queue.length));
    return new Promise<R>((resolve, reject) => {
      if (joined) {
        joined.waiters.push({ resolve, reject });
        return;
      }
      const entry: Entry<T, R> = { call, share, waiters: [{ resolve, reject }] };
      this.#queue.push(entry);
      if (share !== undefined) this.#shared.set(share, entry);
      this.#pump();
    });
  }

  #pump(): void {
    while (!this.#waitingForGate && this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      if (this.#inFlight > 0 && this.#spareAfterMs !== undefined && !this.#spareMayLeave()) return;
      this.#inFlight++;
      const whenReady = this.#o.whenReady;
      if (!whenReady) {
        this.#take();
        continue;
      }
      this.#waitingForGate = true;
      whenReady(() => {
        this.#waitingForGate = false;
        this.#take();
        this.#pump();
      });
    }
  }

  /** Whether a spare batch may leave now; if not, a pump is scheduled for when it may. */
  #spareMayLeave(): boolean {
    const wait = this.#lastLeftAt + this.#spareAfterMs! - this.#clock.now();
    if (wait <= 0) return true;
    if (!this.#spareTimer) {
      this.#spareTimer = true;
      this.#clock.after(Math.ceil(wait), () => {
        this.#spareTimer = false;
        this.#pump();
      });
    }
    return false;
  }

  /** Sends the first `maxBatch` waiting calls (the slot is already counted in `#inFlight`). */
  #take(): void {
    if (this.#spareAfterMs !== undefined) this.#lastLeftAt = this.#clock.now();
    const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
    this.#queue = batch === this.#queue ? [] : this.#queue.slice(batch.length);
    if (this.#shared.size > 0) for (const e of batch) if (e.share !== undefined) this.#shared.delete(e.share);
    let released = false;
    // The slot is given back as soon as the answer is in, before anyone is answered: the next batch leaves first.
    const release = () => {
      if (released) return;
      released = true;
      this.#inFlight--;
      this.#pump();
    };
    void this.#run(batch, release).finally(release);
  }

  async #run(batch: readonly Entry<T, R>[], release: () => void): Promise<void> {
    if (batch.length === 1) return this.#alone(batch[0]!, release);
    let answers: ArrayLike<R | ItemFailed>;
    try {
      answers = await this.#o.many(batch.map((e) => e.call));
    } catch (e) {
      if (this.#o.failsAll(e)) for (const entry of batch) for (const w of entry.waiters) w.reject(e);
      // Run again alone, holding the slot meanwhile.
      else await Promise.all(batch.map((entry) => this.#alone(entry)));
      return;
    }
    release();
    batch.forEach((entry, i) => {
      const a = i < answers.length ? answers[i]! : new ItemFailed(new Error(`a batch of ${batch.length} calls was answered ${answers.length} times`));
      for (const w of entry.waiters) {
        if (a instanceof ItemFailed) w.reject(a.error);
        else w.resolve(a);
      }
    });
  }

  async #alone(entry: Entry<T, R>, release?: () => void): Promise<void> {
    let r: R;
    try {
      r = await this.#o.one(entry.call);
    } catch (e) {
      release?.();
      for (const w of entry.waiters) w.reject(e);
      return;
    }
    release?.();
    for (const w of entry.waiters) w.resolve(r);
  }
}
