/**
 * The fake provider's stored Chat Completions (CONTRACT §11's `openai` with
 * `lookup: "stored-completions"`): a chat request with `store: true` is kept
 * with its `metadata` once the work is done, whether or not its answer
 * arrives, and `GET /v1/chat/completions?metadata[k]=v` lists the ones whose
 * metadata has every given pair, in OpenAI's list shape.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FakeApiContext } from './fake-api-context.ts';
import { sendJson } from './fake-http.ts';

/**
 * The stored completions, and their listing.
 *
 * @example stored.keep(completion, requestBody); stored.list(req, res);
 */
export class FakeStoredCompletions {
  readonly #context: FakeApiContext;
  readonly #stored: Record<string, unknown>[] = [];
  readonly #ignoreFilter: boolean;

  /**
   * @param ignoreFilter Lists every stored completion, newest first, whatever
   *   the `metadata[…]` filter asks (as several OpenAI-compatible servers do):
   *   a lookup must still take only its own (CONTRACT §15).
   */
  constructor(context: FakeApiContext, ignoreFilter = false) {
    this.#context = context;
    this.#ignoreFilter = ignoreFilter;
  }

  /** Every completion stored, oldest first. */
  get all(): readonly Record<string, unknown>[] {
    return [...this.#stored];
  }

  /** Keeps `completion` when the request asked for it (`store: true`), with the request's `metadata`. */
  keep(completion: Record<string, unknown>, request: unknown): void {
    const requested = (request ?? {}) as { store?: unknown; metadata?: unknown };
    if (requested.store !== true) return;
    this.#stored.push({ ...completion, object: 'chat.completion', metadata: typeof requested.metadata === 'object' && requested.metadata !== null ? requested.metadata : {} });
  }

  /** Forgets them all. */
  reset(): void {
    this.#stored.length = 0;
  }

  /** `GET /v1/chat/completions?metadata[k]=v`: the stored completions whose metadata has every given pair (all of them when the filter is ignored). */
  list(req: IncomingMessage, res: ServerResponse): void {
    this.#context.countLookup();
    const query = new URL(req.url ?? '/', 'http://fake').searchParams;
    const wanted: [string, string][] = [];
    for (const [k, v] of query) {
      const m = /^metadata\[(.+)\]$/.exec(k);
      if (m) wanted.push([m[1]!, v]);
    }
    const data = this.#ignoreFilter
      ? [...this.#stored].reverse()
      : this.#stored.filter((c) => wanted.every(([k, v]) => (c.metadata as Record<string, unknown> | undefined)?.[k] === v));
    sendJson(res, 200, { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false });
  }
}
