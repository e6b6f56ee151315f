/**
 * The client side of resumable streams (CONTRACT §13), against a real
 * `onejob serve` on both engines: `OnejobClient.streamChatCompletions`
 * resumes a connection that breaks mid-stream by itself, with the same key
 * and the last event id it saw; a streaming `IntentSession` (the logic under
 * `useIntent({ stream: true })`) survives a "page reload" mid-answer: the
 * new session continues the text after the last event, it does not restart.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IntentSession, OnejobClient, type IntentSnapshot, type IntentStorage } from '../../src/client/index.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { TOKEN, startOnejobServe, type OnejobServe } from './onejob-serve.ts';

const CHUNKS = ['A ', 'stream ', 'that ', 'breaks ', 'and ', 'resumes, ', 'once.'];
const TEXT = CHUNKS.join('');

function memoryStorage(): IntentStorage & { map: Map<string, string> } {
  const map = new Map<string, string>();
  return { map, getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v), removeItem: (k) => void map.delete(k) };
}

function until(session: IntentSession, test: (s: IntentSnapshot) => boolean): Promise<IntentSnapshot> {
  return new Promise((ok) => {
    const check = (): void => {
      const s = session.getSnapshot();
      if (test(s)) {
        unsubscribe();
        ok(s);
      }
    };
    const unsubscribe = session.subscribe(check);
    check();
  });
}

/** What a `fetch` sent and received: each request's `Last-Event-ID`, and the ids of the events that reached the caller. */
interface Tap {
  readonly lastEventIds: (string | null)[];
  readonly delivered: string[];
}

/**
 * A `fetch` whose first stream answer is cut (the body errors, as a dropped
 * connection does) right after `cutAfter` events reached the caller.
 */
function cuttingFetch(cutAfter: number, tap: Tap): typeof fetch {
  let answers = 0;
  return async (input, init) => {
    if (String(input).endsWith('/v1/chat/completions')) tap.lastEventIds.push(new Headers(init?.headers).get('last-event-id'));
    const res = await fetch(input, init);
    if (!res.body || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return res;
    const cut = ++answers === 1;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = '';
    let passed = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const r = await reader.read();
        if (r.done) return controller.close();
        buffer += decoder.decode(r.value, { stream: true });
        // Whole events only, so the cut falls between two events.
        for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
          const event = buffer.slice(0, i + 2);
          buffer = buffer.slice(i + 2);
          if (cut && passed === cutAfter) {
            await reader.cancel();
            return controller.error(new TypeError('connection reset (test)'));
          }
          if (/^data: /m.test(event)) {
            passed++;
            const id = /^id: (.*)$/m.exec(event)?.[1];
            if (id !== undefined) tap.delivered.push(id);
          }
          controller.enqueue(encoder.encode(event));
        }
      },
      cancel: () => reader.cancel(),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`resumable streams from onejob/client (${db.name})`, () => {
    let server: OnejobServe;
    beforeAll(async () => {
      server = await startOnejobServe(db, { chatMaxWaitMs: 10_000 });
    });
    afterAll(async () => {
      await server?.close();
    });
    beforeEach(() => server.resetFakes());

    it('streamChatCompletions resumes a cut connection by itself after the last id it saw: the text once, every event once', async () => {
      server.primary.script([{ chunks: CHUNKS, chunkDelayMs: 30 }]);
      const tap: Tap = { lastEventIds: [], delivered: [] };
      const client = new OnejobClient({ baseUrl: server.url, token: TOKEN, fetch: cuttingFetch(3, tap), retry: { baseDelayMs: 10 } });
      const ids: (string | null)[] = [];
      let text = '';
      for await (const e of client.streamChatCompletions({ model: 'summarize', messages: [{ role: 'user', content: 'resume me' }] })) {
        ids.push(e.id);
        text += e.data.choices[0]?.delta.content ?? '';
      }
      expect(text).toBe(TEXT);
      // Two requests: the first from the start, the second after the third event.
      expect(tap.lastEventIds).toEqual([null, '1-3']);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual(ids.map((_, i) => `1-${i + 1}`));
      expect(server.primary.calls).toHaveLength(1);
    });

    it('a streaming IntentSession reloaded mid-answer continues the text after the last event, not from the start', async () => {
      server.primary.script([{ chunks: CHUNKS, streamGate: { afterChunks: 3, gate: 'reload' } }]);
      const storage = memoryStorage();
      const client = new OnejobClient({ baseUrl: server.url, token: TOKEN });
      const input = { messages: [{ role: 'user', content: 'reload me' }] };
      const page1 = new IntentSession({ client, route: 'summarize', storage, stream: true });
      page1.start(input);
      await until(page1, (s) => s.text === 'A stream that ');
      const key = page1.getSnapshot().key;
      page1.pause(); // the page goes away mid-answer

      const tap: Tap = { lastEventIds: [], delivered: [] };
      const page2 = new IntentSession({ client: new OnejobClient({ baseUrl: server.url, token: TOKEN, fetch: cuttingFetch(Infinity, tap) }), route: 'summarize', storage, stream: true });
      // What the page shows at once after the reload: the text so far, kept with the held intent.
      expect(page2.getSnapshot()).toMatchObject({ key, text: 'A stream that ' });
      page2.resume();
      server.primary.release('reload');
      const done = await until(page2, (s) => s.status === 'done');
      expect(done.text).toBe(TEXT);
      expect((done.job?.result as { content?: string } | null)?.content).toBe(TEXT);
      // The reloaded page asked for the events after the last one it had: none of the first three came again.
      expect(tap.lastEventIds).toEqual(['1-3']);
      expect(tap.delivered[0]).toBe('1-4');
      expect(done.key).toBeNull(); // terminal: the key is let go
      expect(server.primary.calls).toHaveLength(1);
    });
  });
}
