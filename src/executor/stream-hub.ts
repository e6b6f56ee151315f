/**
 * The in-process stream hub (CONTRACT §7): the executor publishes the deltas
 * of the attempt that owns a job's stream, keyed by job id; every HTTP request
 * of that job in this process (the first one and its duplicates) watches it
 * and relays the same events. Each stream buffers from its first event, so a
 * watcher that joins late receives the whole stream from the start, then the
 * rest live. A stream is forgotten when it ends (the job's stored result, or
 * the next attempt's stream after a failover, is what a later request gets).
 *
 * Pure memory, no I/O; across processes the stored result is the fallback
 * (see `src/http/job-stream.ts`). See docs/chat-completions.md.
 */
import type { ChatDelta } from '../providers/provider.ts';

/** Why a stream ended without a stored result: a stable code and a message (the `event: error` data). */
export interface StreamError {
  readonly code: string;
  readonly message: string;
}

/**
 * One event of a job's stream.
 *
 * - `delta`: the next normalized piece of the owning attempt's answer.
 * - `end` with `ok: true`: the attempt won the job; `result` is the job's stored result.
 * - `end` with `ok: false`: the stream broke after output (the attempt ended `failed` or `unknown`, or lost).
 */
export type StreamEvent =
  | { readonly type: 'delta'; readonly attemptId: string; readonly delta: ChatDelta }
  | { readonly type: 'end'; readonly attemptId: string; readonly ok: true; readonly result: unknown }
  | { readonly type: 'end'; readonly attemptId: string; readonly ok: false; readonly error: StreamError };

/** Receives the events of a job's streams. Exceptions it throws are reported to the hub's `onError` and ignored. */
export type StreamListener = (event: StreamEvent) => void;

/** The publishing side of one stream (held by the executor's attempt that claimed it). */
export interface StreamWriter {
  /** Publishes a delta. Ignored after {@link end}. */
  push(delta: ChatDelta): void;
  /** Ends the stream (once; later calls are ignored). */
  end(outcome: { readonly ok: true; readonly result: unknown } | { readonly ok: false; readonly error: StreamError }): void;
  /** Whether {@link end} was called. */
  readonly ended: boolean;
}

interface LiveStream {
  readonly attemptId: string;
  readonly events: StreamEvent[];
}

/**
 * Streams by job id.
 *
 * @example
 * const w = hub.open(job.id, attempt.id);
 * const off = hub.watch(job.id, (e) => console.log(e)); // receives every event from the first
 * w.push({ type: 'text', text: 'Hi' });
 * w.end({ ok: true, result });
 * off();
 */
export class StreamHub {
  readonly #live = new Map<string, LiveStream>();
  readonly #watchers = new Map<string, Set<StreamListener>>();
  readonly #onError: (error: unknown) => void;

  constructor(options: { readonly onError?: (error: unknown) => void } = {}) {
    this.#onError = options.onError ?? (() => {});
  }

  /** How many streams are live now. */
  get liveStreams(): number {
    return this.#live.size;
  }

  /** Whether job `jobId` has a live stream in this process. */
  isLive(jobId: string): boolean {
    return this.#live.has(jobId);
  }

  /**
   * Opens the stream of `jobId` for `attemptId` (the attempt that claimed it
   * in the database). A stream still open for the job (an earlier attempt's)
   * is ended first with `stream_replaced`.
   */
  open(jobId: string, attemptId: string): StreamWriter {
    const previous = this.#live.get(jobId);
    if (previous) this.#publish(jobId, previous, { type: 'end', attemptId: previous.attemptId, ok: false, error: { code: 'stream_replaced', message: 'another attempt took over the job stream' } });
    const stream: LiveStream = { attemptId, events: [] };
    this.#live.set(jobId, stream);
    let ended = false;
    return {
      push: (delta) => {
        if (!ended) this.#publish(jobId, stream, { type: 'delta', attemptId, delta });
      },
      end: (outcome) => {
        if (ended) return;
        ended = true;
        this.#publish(jobId, stream, outcome.ok ? { type: 'end', attemptId, ok: true, result: outcome.result } : { type: 'end', attemptId, ok: false, error: outcome.error });
      },
      get ended() {
        return ended;
      },
    };
  }

  /**
   * Watches the streams of `jobId`: the live one's buffered events are handed
   * to `listener` at once (synchronously), then every later event, including
   * those of a stream opened later (after a failover). Returns the unsubscribe.
   */
  watch(jobId: string, listener: StreamListener): () => void {
    let set = this.#watchers.get(jobId);
    if (!set) this.#watchers.set(jobId, (set = new Set()));
    set.add(listener);
    const live = this.#live.get(jobId);
    if (live) for (const e of [...live.events]) this.#deliver(listener, e);
    return () => {
      const s = this.#watchers.get(jobId);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) this.#watchers.delete(jobId);
    };
  }

  #publish(jobId: string, stream: LiveStream, event: StreamEvent): void {
    if (event.type === 'end') {
      if (this.#live.get(jobId) === stream) this.#live.delete(jobId);
    } else {
      stream.events.push(event);
    }
    const set = this.#watchers.get(jobId);
    if (set) for (const l of [...set]) this.#deliver(l, event);
  }

  #deliver(listener: StreamListener, event: StreamEvent): void {
    try {
      listener(event);
    } catch (e) {
      this.#onError(e);
    }
  }
}

/** The hub of this process: shared by the executor and the HTTP app unless they are given their own. */
export const defaultStreamHub = new StreamHub();
