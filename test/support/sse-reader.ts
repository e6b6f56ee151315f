/**
 * Reads a `text/event-stream` answer event by event, keeping each event's
 * SSE `id:` (CONTRACT §13), for tests that drop a stream and resume it.
 */

/** One SSE event with data, as received. */
export interface ReceivedEvent {
  readonly id: string | null;
  readonly data: string;
}

/** Reads one streamed answer; {@link drop} aborts its request (the client disconnects). */
export class SseReader {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();
  #buffer = '';
  readonly #controller: AbortController;
  constructor(res: Response, controller: AbortController) {
    this.#reader = res.body!.getReader();
    this.#controller = controller;
  }
  /** The next event with data, or null at the end. */
  async next(): Promise<ReceivedEvent | null> {
    for (;;) {
      const i = this.#buffer.indexOf('\n\n');
      if (i >= 0) {
        const block = this.#buffer.slice(0, i);
        this.#buffer = this.#buffer.slice(i + 2);
        const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data === '') continue;
        return { id: /^id: (.*)$/m.exec(block)?.[1] ?? null, data };
      }
      const r = await this.#reader.read();
      if (r.done) return null;
      this.#buffer += this.#decoder.decode(r.value, { stream: true });
    }
  }
  drop(): void {
    this.#controller.abort();
  }
}

/** The text of a chat completion chunk event (`[DONE]`: none). */
export const chatChunkText = (e: ReceivedEvent): string =>
  e.data === '[DONE]' ? '' : ((JSON.parse(e.data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '');
