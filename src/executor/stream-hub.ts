/**
 * The in-process stream hub (CONTRACT §7, §13): the executor publishes the
 * deltas of the attempt that owns a job's stream, keyed by job id; every HTTP
 * request of that job in this process (the first one and its duplicates)
 * watches it and relays the same events. Each stream buffers from its first
 * event, so a watcher that joins late receives the whole stream from the
 * start, then the rest live. A stream is forgotten when it ends.
 *
 * Every event is numbered within its attempt's stream (`seq` from 1), and,
 * when the stream is opened with a {@link StreamLog}, published to it in
 * batches: the first event at once, and the first output at once too (a
 * reader in another process sees the first token without waiting a slice,
 * also when the provider's first chunk only names its model), then whatever
 * came during one time slice (`sliceMs`) per write, the end at once. So a
 * stream costs at most 3 + duration / sliceMs writes whatever the provider's
 * chunk rate, and the
 * stored stream is event for event the one relayed here: the same numbers
 * for everyone (`src/http/job-stream.ts` turns them into SSE ids). See
 * docs/streaming.md.
 */
import { isOutputDelta, type ChatDelta } from '../providers/provider.ts';
import type { StreamBatchRow } from '../store/driver.ts';

/** Why a stream ended without a stored result: a stable code and a message (the `event: error` data). */
export interface StreamError {
  readonly code: string;
  readonly message: string;
}

/**
 * One event of a job's stream: `seq` is its number within the stream of
 * attempt `attemptNumber` (1, 2, …), the same in memory and stored.
 *
 * - `delta`: the next normalized piece of the owning attempt's answer.
 * - `end` with `ok: true`: the attempt won the job (its result is the job's; `result` is absent when read back from the store).
 * - `end` with `ok: false`: the stream broke after output (the attempt ended `failed` or `unknown`, or lost).
 */
export type StreamEvent =
  | { readonly type: 'delta'; readonly attemptId: string; readonly attemptNumber: number; readonly seq: number; readonly delta: ChatDelta }
  | { readonly type: 'end'; readonly attemptId: string; readonly attemptNumber: number; readonly seq: number; readonly ok: true; readonly result?: unknown }
  | { readonly type: 'end'; readonly attemptId: string; readonly attemptNumber: number; readonly seq: number; readonly ok: false; readonly error: StreamError };

/** Receives the events of a job's streams. Exceptions it throws are reported to the hub's `onError` and ignored. */
export type StreamListener = (event: StreamEvent) => void;

/** The publishing side of one stream (held by the executor's attempt that claimed it). */
export interface StreamWriter {
  /** Publishes a delta. Ignored after {@link end}. */
  push(delta: ChatDelta): void;
  /** Ends the stream (once; later calls are ignored). */
  end(outcome: { readonly ok: true; readonly result: unknown } | { readonly ok: false; readonly error: StreamError }): void;
  /**
   * Starts storing a stream opened without a log: every event published so
   * far, then every later one, as if the log had been given to
   * {@link StreamHub.open}. Ignored when it already stores or has ended.
   */
  keep(log: StreamLog): void;
  /** Whether {@link end} was called. */
  readonly ended: boolean;
}

/** Where a stream's batches are stored (the {@link Store}: `appendStreamBatch`). */
export interface StreamLog {
  appendStreamBatch(row: StreamBatchRow): Promise<void>;
}

/** Options of {@link StreamHub.open}. */
export interface OpenStreamOptions {
  readonly ownerId: string;
  /** The attempt's number within the job: its stream's events are stored under it. */
  readonly attemptNumber: number;
  /** Where the stream is published for other processes and later readers. None: memory only. */
  readonly log?: StreamLog | undefined;
}

/** One stored event, as in a `stream_events.events` array. */
export type StoredStreamEvent = { readonly d: ChatDelta } | { readonly end: 'ok' } | { readonly end: 'error'; readonly error: StreamError };

/** The stored form of an event. */
export function storedStreamEvent(e: StreamEvent): StoredStreamEvent {
  if (e.type === 'delta') return { d: e.delta };
  return e.ok ? { end: 'ok' } : { end: 'error', error: { code: e.error.code, message: e.error.message } };
}

/**
 * The events of one stored batch (`seq` its last event's number), as events.
 * A batch that does not parse reads as none (its readers then wait for the job's end).
 */
export function streamEventsOfBatch(row: StreamBatchRow, attemptId = ''): StreamEvent[] {
  let items: unknown;
  try {
    items = JSON.parse(row.events);
  } catch {
    return [];
  }
  if (!Array.isArray(items)) return [];
  const first = row.seq - items.length + 1;
  return (items as StoredStreamEvent[]).map((it, i): StreamEvent => {
    const base = { attemptId, attemptNumber: row.attemptNumber, seq: first + i };
    if ('d' in it) return { type: 'delta', ...base, delta: it.d };
    return it.end === 'ok' ? { type: 'end', ...base, ok: true } : { type: 'end', ...base, ok: false, error: it.error };
  });
}

/** Default of {@link StreamHubOptions.sliceMs}. */
export const DEFAULT_STREAM_SLICE_MS = 50;

/** Options of {@link StreamHub}. */
export interface StreamHubOptions {
  /** A failed publication (after its retries) or a listener's exception. */
  readonly onError?: (error: unknown) => void;
  /** One write per stream per this many milliseconds at most (after the first). Default {@link DEFAULT_STREAM_SLICE_MS}. */
  readonly sliceMs?: number;
}

interface LiveStream {
  readonly attemptId: string;
  readonly attemptNumber: number;
  readonly events: StreamEvent[];
  next: number;
}

/**
 * Streams by job id.
 *
 * @example
 * const w = hub.open(job.id, attempt.id, { ownerId: job.ownerId, attemptNumber: attempt.number, log: store });
 * const off = hub.watch(job.id, (e) => console.log(e)); // receives every event from the first
 * w.push({ type: 'text', text: 'Hi' });
 * w.end({ ok: true, result });
 * off();
 */
export class StreamHub {
  readonly #live = new Map<string, LiveStream>();
  readonly #watchers = new Map<string, Set<StreamListener>>();
  readonly #onError: (error: unknown) => void;
  readonly #sliceMs: number;

  constructor(options: StreamHubOptions = {}) {
    this.#onError = options.onError ?? (() => {});
    this.#sliceMs = options.sliceMs ?? DEFAULT_STREAM_SLICE_MS;
  }

  /** How many streams are live now. */
  get liveStreams(): number {
    return this.#live.size;
  }

  /** Whether job `jobId` has a live stream in this process. */
  isLive(jobId: string): boolean {
    return this.#live.has(jobId);
  }

  /** The attempt number of job `jobId`'s live stream in this process, or null. */
  liveAttempt(jobId: string): number | null {
    return this.#live.get(jobId)?.attemptNumber ?? null;
  }

  /**
   * Opens the stream of `jobId` for `attemptId` (the attempt that claimed it
   * in the database). A stream still open for the job (an earlier attempt's)
   * is ended first with `stream_replaced`. With `options.log`, every event is
   * also stored (see the module comment).
   */
  open(jobId: string, attemptId: string, options?: OpenStreamOptions): StreamWriter {
    const previous = this.#live.get(jobId);
    if (previous) {
      this.#publish(jobId, previous, { type: 'end', attemptId: previous.attemptId, attemptNumber: previous.attemptNumber, seq: previous.next++, ok: false, error: { code: 'stream_replaced', message: 'another attempt took over the job stream' } });
    }
    const attemptNumber = options?.attemptNumber ?? 0;
    const stream: LiveStream = { attemptId, attemptNumber, events: [], next: 1 };
    this.#live.set(jobId, stream);
    const store = (log: StreamLog) => new StreamBatcher(log, { ownerId: options?.ownerId ?? '', jobId, attemptNumber }, this.#sliceMs, this.#onError);
    let batcher = options?.log ? store(options.log) : null;
    let ended = false;
    return {
      push: (delta) => {
        if (ended) return;
        const e: StreamEvent = { type: 'delta', attemptId, attemptNumber, seq: stream.next++, delta };
        // Watchers here first (their write is the first token), the database after.
        this.#publish(jobId, stream, e);
        batcher?.add(e);
      },
      end: (outcome) => {
        if (ended) return;
        ended = true;
        const base = { attemptId, attemptNumber, seq: stream.next++ };
        const e: StreamEvent = outcome.ok ? { type: 'end', ...base, ok: true, result: outcome.result } : { type: 'end', ...base, ok: false, error: outcome.error };
        this.#publish(jobId, stream, e);
        batcher?.add(e);
      },
      keep: (log) => {
        if (ended || batcher !== null) return;
        batcher = store(log);
        batcher.addAll(stream.events);
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

/** Tries of one batch write before the stream stops being stored (its stored part stays a prefix). */
const BATCH_TRIES = 4;

/**
 * The writes of one stream: one in flight at a time, in order; the first
 * event and the end go out at once, the rest at most once per slice.
 */
type StreamKey = { readonly ownerId: string; readonly jobId: string; readonly attemptNumber: number };

class StreamBatcher {
  readonly #log: StreamLog;
  readonly #key: StreamKey;
  readonly #sliceMs: number;
  readonly #onError: (error: unknown) => void;
  #pending: StreamEvent[] = [];
  #writing = false;
  #timer: NodeJS.Timeout | null = null;
  #lastWriteAt = -Infinity;
  /** Whether a batch with output (text, refusal, a tool call) was written: until then output is written at once. */
  #outputWritten = false;
  #broken = false;

  constructor(log: StreamLog, key: StreamKey, sliceMs: number, onError: (error: unknown) => void) {
    this.#log = log;
    this.#key = key;
    this.#sliceMs = sliceMs;
    this.#onError = onError;
  }

  add(e: StreamEvent): void {
    if (this.#broken) return;
    this.#pending.push(e);
    this.#schedule(e.type === 'end');
  }

  /** Queues the events published before the stream was kept (deltas only: a stream that ended is never kept) for one write. */
  addAll(events: readonly StreamEvent[]): void {
    if (this.#broken || events.length === 0) return;
    for (const e of events) this.#pending.push(e);
    this.#schedule(false);
  }

  #schedule(now: boolean): void {
    if (this.#writing || this.#pending.length === 0) return;
    const eager = now || this.#pending.some((e) => e.type === 'end' || (!this.#outputWritten && isOutputDelta(e.delta)));
    const wait = eager ? 0 : this.#lastWriteAt + this.#sliceMs - performance.now();
    if (wait <= 0) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = null;
      void this.#write();
    } else if (this.#timer === null) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        void this.#write();
      }, wait);
    }
  }

  async #write(): Promise<void> {
    if (this.#writing || this.#pending.length === 0) return;
    this.#writing = true;
    this.#lastWriteAt = performance.now();
    const batch = this.#pending.splice(0);
    if (batch.some((e) => e.type === 'delta' && isOutputDelta(e.delta))) this.#outputWritten = true;
    const row: StreamBatchRow = { ...this.#key, seq: batch[batch.length - 1]!.seq, events: JSON.stringify(batch.map(storedStreamEvent)) };
    for (let t = 1; ; t++) {
      try {
        await this.#log.appendStreamBatch(row);
        break;
      } catch (e) {
        if (t >= BATCH_TRIES) {
          // Stop storing: what is stored stays a prefix; readers elsewhere fall back to the job's result.
          this.#broken = true;
          this.#pending = [];
          this.#onError(e);
          break;
        }
        await new Promise((r) => setTimeout(r, 50 * 2 ** t));
      }
    }
    this.#writing = false;
    this.#schedule(false);
  }
}

/** The hub of this process: shared by the executor and the HTTP app unless they are given their own. */
export const defaultStreamHub = new StreamHub();
