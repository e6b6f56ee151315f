/**
 * `GET /v1/events` feeds under load: a cap per owner (`eventFeeds.maxPerOwner`,
 * 429 `too_many_requests` past it, other owners unaffected, a slot freed by
 * a closed feed), and one shared source per owner and process: however many
 * feeds an owner holds, each change is read from the database once (the
 * statements are counted at the store), every feed still gets every event
 * once and in order, and a feed that resumes with `Last-Event-ID` catches
 * up without a gap or a duplicate. Real sockets, SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/build-app.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const ALICE = 'tok_alice_feeds_0123456789';
const BOB = 'tok_bob_feeds_0123456789';
const MAX = 4;

interface Message {
  readonly event: string;
  readonly id?: string;
  readonly data: any;
}

/** An open feed, read in the background. */
class Feed {
  readonly messages: Message[] = [];
  readonly #controller = new AbortController();
  #waiters: (() => void)[] = [];
  status = 0;

  static async open(url: string, token: string, headers: Record<string, string> = {}): Promise<Feed> {
    const feed = new Feed();
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers }, signal: feed.#controller.signal });
    feed.status = res.status;
    if (res.status !== 200) {
      feed.messages.push({ event: 'answer', data: await res.json() });
      return feed;
    }
    void feed.#pump(res);
    return feed;
  }

  async #pump(res: Response): Promise<void> {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const m: { event: string; id?: string; data: any } = { event: 'message', data: null };
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) m.event = line.slice(7);
            else if (line.startsWith('id: ')) m.id = line.slice(4);
            else if (line.startsWith('data: ')) m.data = JSON.parse(line.slice(6));
          }
          if (block.split('\n').some((l) => !l.startsWith(':') && !l.startsWith('retry:'))) this.messages.push(m);
        }
        for (const w of this.#waiters.splice(0)) w();
      }
    } catch {
      // closed
    }
  }

  /** The job_event ids received, in order. */
  eventIds(): number[] {
    return this.messages.filter((m) => m.event === 'job_event').map((m) => Number(m.id));
  }

  async waitFor(predicate: (messages: Message[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!predicate(this.messages)) {
      if (Date.now() > until) throw new Error(`timed out; got ${JSON.stringify(this.messages).slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  close(): void {
    this.#controller.abort();
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`GET /v1/events: a cap per owner, one source per owner (${db.name})`, () => {
    let store: JobStore;
    let cleanup: () => Promise<void>;
    let app: ReturnType<typeof buildApp>;
    let url: string;
    const counts = { eventsSince: 0, lastEventId: 0 };
    let seq = 0;

    beforeAll(async () => {
      ({ store, cleanup } = await createTestStore(db));
      // Each call is one SQL statement: count them where the feeds make them.
      const insights = store.insights as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
      for (const name of ['eventsSince', 'lastEventId'] as const) {
        const original = insights[name]!.bind(store.insights);
        insights[name] = (...a: unknown[]) => (counts[name]++, original(...a));
      }
      const config = defineConfig({
        apiKeys: { [ALICE]: 'alice', [BOB]: 'bob' },
        providers: { p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' } },
        routes: { r: { providers: ['p'] } },
        // No polls during a test: every read is one woken by a change.
        eventFeeds: { maxPerOwner: MAX, pollMs: 3_600_000 },
      });
      app = buildApp({ store, config });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      url = `http://127.0.0.1:${address.port}/v1/events`;
    });
    afterAll(async () => {
      await app?.close();
      await cleanup?.();
    });

    /** A new job of `owner` and its first attempt: one event-log row (attempt.started) and two change notices. */
    const change = async (owner = 'alice') => {
      const created = await store.createJob({ ownerId: owner, idempotencyKey: `k${++seq}`, route: 'r', input: { n: seq }, providers: ['p'] });
      await store.startAttempt({ ownerId: owner, jobId: created.job.id, kind: 'first', hedgeAfterMs: null });
      return created;
    };

    it(`an owner holds at most ${MAX} feeds: one more is 429 too_many_requests; other owners are not affected; a closed feed frees its slot`, async () => {
      const feeds = await Promise.all(Array.from({ length: MAX }, () => Feed.open(url, ALICE)));
      expect(feeds.map((f) => f.status)).toEqual(Array(MAX).fill(200));
      const extra = await Feed.open(url, ALICE);
      expect(extra.status).toBe(429);
      expect(extra.messages[0]!.data).toMatchObject({ code: 'too_many_requests', status: 429 });
      const bob = await Feed.open(url, BOB);
      expect(bob.status).toBe(200);
      feeds[0]!.close();
      let again: Feed | null = null;
      for (let i = 0; i < 50 && again?.status !== 200; i++) {
        again?.close();
        await new Promise((r) => setTimeout(r, 50));
        again = await Feed.open(url, ALICE);
      }
      expect(again!.status).toBe(200);
      for (const f of [...feeds, again!, bob]) f.close();
    });

    it('many feeds of one owner share one source: each change is read once, and every feed gets every event once, in order', async () => {
      await new Promise((r) => setTimeout(r, 300)); // the previous test's feeds are gone
      const feeds = await Promise.all(Array.from({ length: MAX }, () => Feed.open(url, ALICE)));
      await Promise.all(feeds.map((f) => f.waitFor((ms) => ms.some((m) => m.event === 'ready'))));
      const before = { ...counts };
      const changes = 8;
      const jobs: string[] = [];
      for (let i = 0; i < changes; i++) {
        const { job } = await change();
        jobs.push(job.id);
        // One change at a time: its read is done before the next (no coalescing to flatter the count).
        await Promise.all(feeds.map((f) => f.waitFor((ms) => ms.some((m) => m.event === 'job_event' && m.data.job_id === job.id))));
        await new Promise((r) => setTimeout(r, 30));
      }
      const reads = counts.eventsSince - before.eventsSince;
      const notices = feeds[0]!.messages.filter((m) => m.event === 'job_changed').length;
      expect(notices).toBe(2 * changes);
      // A read per feed would be MAX × notices at least; one source reads at most twice per notice (a read and a follow-up).
      expect(reads).toBeLessThanOrEqual(2 * notices);
      expect(feeds[0]!.eventIds()).toHaveLength(changes);
      expect(counts.lastEventId - before.lastEventId).toBeLessThanOrEqual(1);
      const ids = feeds[0]!.eventIds();
      for (const f of feeds) {
        expect(f.eventIds()).toEqual(ids);
        expect(new Set(f.eventIds()).size).toBe(f.eventIds().length);
        expect([...f.eventIds()].sort((a, b) => a - b)).toEqual(f.eventIds());
        expect([...new Set(f.messages.filter((m) => m.event === 'job_changed').map((m) => m.data.job_id))]).toEqual(jobs);
      }
      for (const f of feeds) f.close();
    });

    it('a feed that resumes with Last-Event-ID while others follow the source gets exactly what came after, then the live events, once each', async () => {
      await new Promise((r) => setTimeout(r, 300));
      const live = await Feed.open(url, ALICE);
      await live.waitFor((ms) => ms.some((m) => m.event === 'ready'));
      for (let i = 0; i < 3; i++) await change();
      await live.waitFor((ms) => ms.filter((m) => m.event === 'job_event').length >= 3);
      const mark = live.eventIds()[0]!;
      const resumed = await Feed.open(url, ALICE, { 'last-event-id': String(mark) });
      await resumed.waitFor((ms) => ms.filter((m) => m.event === 'job_event').length >= live.eventIds().length - 1);
      for (let i = 0; i < 3; i++) await change();
      await live.waitFor((ms) => ms.filter((m) => m.event === 'job_event').length >= 6);
      await resumed.waitFor((ms) => ms.filter((m) => m.event === 'job_event').length >= 5);
      expect(resumed.eventIds()).toEqual(live.eventIds().filter((id) => id > mark));
      live.close();
      resumed.close();
    });
  });
}
