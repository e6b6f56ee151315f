/**
 * One source per owner for the `GET /v1/events` feeds of a process: however
 * many feeds an owner holds open, the process reads that owner's event log
 * once per wake-up (one poll loop per owner, one subscription to the store's
 * change notices for the whole process) and hands every batch to each of
 * the owner's feeds. A feed that starts behind (a reconnect with
 * `Last-Event-ID`) catches up with reads of its own, then follows the
 * shared source. At most `maxPerOwner` feeds per owner: one more is `429
 * too_many_requests`.
 *
 * Every event reaches a feed once and in id order: a feed joins the source
 * before it catches up, keeps what the source hands it meanwhile, and writes
 * only events past the last id it wrote.
 */
import type { JobEvent } from '../core/types.ts';
import type { JobState } from '../core/states.ts';
import type { Store } from '../store/store.ts';
import { coalescedRun } from './job-watch.ts';
import { tooManyOpen } from './owner-slots.ts';

/** Events read per statement. */
const PAGE = 200;

/** What one open feed is told. */
export interface FeedListener {
  /** Events of the owner's log, in id order (may repeat ids the feed already has: skip those). */
  readonly onEvents: (events: readonly JobEvent[]) => void;
  /** A change this process made to one of the owner's jobs. */
  readonly onChange: (jobId: string, state: JobState | null) => void;
}

/** One open feed of an owner, joined to the owner's source. */
export interface FeedSubscription {
  /** The newest event id the source has seen (the start of a feed that asks for "only new events"). */
  readonly sourceCursor: () => Promise<number>;
  /** Starts delivery to `listener` (what arrived since the feed opened first). */
  start(listener: FeedListener): void;
  /** Leaves the source; the last feed of an owner stops its reads. */
  close(): void;
}

/** Options of {@link EventFeedHub}. */
export interface EventFeedHubOptions {
  readonly store: Store;
  /** Re-read interval (changes made by other processes). */
  readonly pollMs: number;
  /** Open feeds per owner. */
  readonly maxPerOwner: number;
  /** A read of the log failed (it is tried again at the next wake-up). */
  readonly onError?: (error: unknown) => void;
}

interface Member {
  listener: FeedListener | null;
  /** Batches and notices that came before `start`. */
  readonly early: (() => void)[];
}

class OwnerSource {
  readonly members = new Set<Member>();
  #cursor = 0;
  /** The first read of the log's end (`lastEventId`); tried again after a failure. */
  #init: Promise<number> | null = null;
  readonly #timer: NodeJS.Timeout;
  readonly read: () => Promise<void>;

  constructor(readonly owner: string, readonly store: Store, pollMs: number, onError: (e: unknown) => void) {
    this.read = coalescedRun(async () => {
      try {
        await this.cursor();
        let page: number;
        do {
          if (this.members.size === 0) return;
          const events = await store.insights.eventsSince(owner, this.#cursor, PAGE);
          page = events.length;
          if (page === 0) return;
          this.#cursor = events[events.length - 1]!.id;
          for (const m of this.members) deliver(m, (l) => l.onEvents(events));
        } while (page === PAGE);
      } catch (error) {
        onError(error);
      }
    });
    this.#timer = setInterval(() => void this.read(), pollMs);
    this.#timer.unref();
  }

  /** The newest event id this source has read (the log's end when it started). */
  cursor(): Promise<number> {
    this.#init ??= this.store.insights.lastEventId(this.owner).then(
      (id) => (this.#cursor = Math.max(this.#cursor, id)),
      (error: unknown) => {
        this.#init = null;
        throw error;
      },
    );
    return this.#init.then(() => this.#cursor);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

function deliver(m: Member, f: (l: FeedListener) => void): void {
  if (m.listener === null) m.early.push(() => f(m.listener!));
  else f(m.listener);
}

/** The feeds of one process (one per app). */
export class EventFeedHub {
  readonly #o: EventFeedHubOptions;
  readonly #sources = new Map<string, OwnerSource>();
  #unsubscribe: (() => void) | null = null;

  constructor(options: EventFeedHubOptions) {
    this.#o = options;
  }

  /** Feeds open now for `owner`. */
  openFeeds(owner: string): number {
    return this.#sources.get(owner)?.members.size ?? 0;
  }

  /**
   * Opens a feed of `owner`: joins (or starts) the owner's source.
   *
   * @throws OnejobError `too_many_requests` when the owner already holds `maxPerOwner` feeds here.
   */
  open(owner: string): FeedSubscription {
    let source = this.#sources.get(owner);
    if (source !== undefined && source.members.size >= this.#o.maxPerOwner) {
      throw tooManyOpen('event feeds', this.#o.maxPerOwner, 'eventFeeds.maxPerOwner');
    }
    if (source === undefined) {
      source = new OwnerSource(owner, this.#o.store, this.#o.pollMs, (e) => this.#o.onError?.(e));
      this.#sources.set(owner, source);
    }
    this.#unsubscribe ??= this.#o.store.onJobChanged((changedOwner, jobId, state) => {
      const s = this.#sources.get(changedOwner);
      if (s === undefined) return;
      for (const m of s.members) deliver(m, (l) => l.onChange(jobId, state ?? null));
      void s.read();
    });
    const member: Member = { listener: null, early: [] };
    source.members.add(member);
    const s = source;
    let closed = false;
    return {
      sourceCursor: () => s.cursor(),
      start: (listener) => {
        if (closed) return;
        member.listener = listener;
        for (const f of member.early.splice(0)) f();
      },
      close: () => {
        if (closed) return;
        closed = true;
        s.members.delete(member);
        if (s.members.size > 0) return;
        s.stop();
        if (this.#sources.get(owner) === s) this.#sources.delete(owner);
        if (this.#sources.size === 0 && this.#unsubscribe !== null) {
          this.#unsubscribe();
          this.#unsubscribe = null;
        }
      },
    };
  }

  /** Stops every source (the app closes; its feeds end on their own). */
  close(): void {
    for (const s of this.#sources.values()) s.stop();
    this.#sources.clear();
    this.#unsubscribe?.();
    this.#unsubscribe = null;
  }
}
