/**
 * Long-lived streams one owner may hold open on one process (issue 35): the
 * rule `GET /v1/events` set (`eventFeeds.maxPerOwner`, one more is `429
 * too_many_requests`), in one place for every kind of stream: the event
 * feeds (src/http/event-feed-hub.ts counts its own members and refuses with
 * {@link tooManyOpen}), `GET /mcp` notification streams, and the SSE
 * followers of a job's stream (a duplicate or a resume on chat, messages and
 * Responses, `GET /v1/responses/{id}?stream=true`). Read-only tokens count
 * like any other: the owner is the same.
 */
import { OnejobError } from '../core/errors.ts';

/**
 * The refusal of one stream too many.
 *
 * @example throw tooManyOpen('event feeds', 20, 'eventFeeds.maxPerOwner')
 */
export function tooManyOpen(what: string, max: number, setting: string): OnejobError {
  return new OnejobError('too_many_requests', `this token's owner already has ${max} ${what} open here (${setting}); close one first`, {
    details: { max_per_owner: max, setting },
  });
}

/** Counts one kind of stream per owner and refuses past `max`. */
export class OwnerSlots {
  readonly #open = new Map<string, number>();

  constructor(readonly what: string, readonly max: number, readonly setting: string) {}

  /** Streams open now for `owner`. */
  count(owner: string): number {
    return this.#open.get(owner) ?? 0;
  }

  /**
   * Takes a slot for `owner`; the returned function gives it back (once, however often it is called).
   *
   * @throws OnejobError `too_many_requests` when the owner already holds `max`.
   */
  take(owner: string): () => void {
    const n = this.count(owner);
    if (n >= this.max) throw tooManyOpen(this.what, this.max, this.setting);
    this.#open.set(owner, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.count(owner) - 1;
      if (left <= 0) this.#open.delete(owner);
      else this.#open.set(owner, left);
    };
  }
}
