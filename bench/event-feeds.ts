/**
 * `node --import tsx bench/event-feeds.ts [--seconds 10] [--engine sqlite|postgres]`:
 * what open `GET /v1/events` feeds cost the database. Opens 1, then 50
 * feeds of one owner on a real socket and counts the statements the feeds
 * issue (each `insights.eventsSince` / `insights.lastEventId` call is one
 * SQL statement) per second, first idle, then while jobs of that owner
 * change 5 times a second. Prints one line per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from '../src/config/config.ts';
import { buildApp } from '../src/http/build-app.ts';
import { openStore } from '../src/store/open-store.ts';
import { argMap } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';

const args = argMap(process.argv.slice(2));
const SECONDS = Number(args.seconds ?? 10);
const ENGINE = String(args.engine ?? 'sqlite');
const TOKEN = 'tok_bench_feeds';

async function once(feeds: number, changesPerSecond: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-feeds-'));
  const url = ENGINE === 'postgres' ? await recreateDatabase('onejob_bench_event_feeds') : `sqlite:${join(dir, 'x.db')}`;
  const store = await openStore(url);
  await store.migrate();
  let statements = 0;
  const insights = store.insights as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const name of ['eventsSince', 'lastEventId']) {
    const original = insights[name]!.bind(store.insights);
    insights[name] = (...a: unknown[]) => (statements++, original(...a));
  }
  const config = defineConfig({ apiKeys: { [TOKEN]: 'bench' }, providers: { p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' } }, routes: { r: { providers: ['p'] } }, eventFeeds: { maxPerOwner: 100 } });
  const app = buildApp({ store, config });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const controllers = Array.from({ length: feeds }, () => new AbortController());
  const opened = await Promise.all(controllers.map(async (c) => {
    const res = await fetch(`http://127.0.0.1:${address.port}/v1/events`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: c.signal });
    if (res.status !== 200) throw new Error(`feed answered ${res.status}`);
    const reader = res.body!.getReader();
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // aborted
      }
    })();
    return res;
  }));
  void opened;
  await new Promise((r) => setTimeout(r, 2500)); // every feed's first read done
  statements = 0;
  let n = 0;
  const changer = changesPerSecond === 0 ? null : setInterval(() => {
    void store.createJob({ ownerId: 'bench', idempotencyKey: `k${n++}`, route: 'r', input: { messages: [] }, providers: ['p'] });
  }, 1000 / changesPerSecond);
  const started = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const perSecond = (statements / (performance.now() - started)) * 1000;
  if (changer) clearInterval(changer);
  for (const c of controllers) c.abort();
  await app.close();
  await store.close();
  if (ENGINE === 'postgres') await dropDatabase('onejob_bench_event_feeds');
  rmSync(dir, { recursive: true, force: true });
  return perSecond;
}

for (const changes of [0, 5]) {
  for (const feeds of [1, 50]) {
    const perSecond = await once(feeds, changes);
    console.log(`${ENGINE}: ${feeds} feed(s), ${changes} job changes/s: ${perSecond.toFixed(1)} feed statements/s`);
  }
}
