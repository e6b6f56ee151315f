/**
 * Spend limits across processes (CONTRACT §16, issue 37's proof): two API
 * processes (`serve --no-executor`) and two executors (`onejob executor`) on
 * one PostgreSQL database. 400 concurrent distinct creates, spread over both
 * API processes, against a day limit that affords 100 worst cases: reserved
 * + spent never above the limit at any sampled moment, every refusal a 429
 * `budget_exceeded` with no job for its key, and the sum of the final
 * `cost_usd` within the limit, with nothing left reserved.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { worstCaseMicros } from '../../src/core/limits.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const TOKEN = 'tok_alice_limits_0123456789';
const pricing = { inputPerMTok: 2, outputPerMTok: 8 };
const MAX_OUT = 500;
const messages = [{ role: 'user', content: 'spend across processes' }];
const WORST = worstCaseMicros({ messages }, pricing, MAX_OUT);
const LIMIT = 100 * WORST;

const pg = TEST_DATABASES.find((d) => d.name === 'postgres')!;

describe.skipIf(Boolean(pg.skip))('spend limits across two API processes and two executors (postgres)', () => {
  let store: JobStore;
  let url: string;
  let cleanup: () => Promise<void>;
  let fake: FakeProvider;
  let dir: string;
  const children: ChildProcess[] = [];
  let ports: number[] = [];

  function start(args: string[]): void {
    const child = spawn(process.execPath, [BIN, ...args, '--config', join(dir, 'onejob.config.json')], {
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    children.push(child);
  }

  beforeAll(async () => {
    ({ store, url, cleanup } = await createTestStore(pg));
    fake = await startFakeProvider();
    // Every answer reports its real usage: about half the worst case.
    fake.script({ default: { delayMs: 40, reply: 'ok', usage: { prompt_tokens: 20, completion_tokens: 250 } } });
    dir = mkdtempSync(join(tmpdir(), 'onejob-limits-'));
    writeFileSync(join(dir, 'onejob.config.json'), JSON.stringify({
      providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 30_000, pricing, maxOutputTokens: MAX_OUT } },
      routes: { work: { providers: ['primary'] } },
      apiKeys: { [TOKEN]: 'alice' },
      limits: { owners: { alice: { spendUsd: { day: LIMIT / 1e6 } } } },
    }));
    ports = [await freePort(), await freePort()];
    for (const port of ports) start(['serve', '--port', String(port), '--host', '127.0.0.1', '--no-executor']);
    start(['executor']);
    start(['executor']);
    for (const port of ports) {
      const deadline = Date.now() + 60_000;
      while ((await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0)) !== 200) {
        if (Date.now() > deadline) throw new Error('serve did not get ready');
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, 90_000);
  afterAll(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await fake?.close();
    await cleanup?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('400 concurrent distinct creates: never past the limit, refusals create nothing, spent within the limit', async () => {
    let sampling = true;
    let samples = 0;
    let maxSeen = 0;
    const sampler = (async () => {
      while (sampling) {
        // A sample the loaded machine cannot take in time is skipped, never counted as one.
        const read = await store.ownerUse('alice').catch(() => null);
        if (read !== null) {
          maxSeen = Math.max(maxSeen, read.use.day.spentMicros + read.use.day.reservedMicros);
          samples++;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const keys = Array.from({ length: 400 }, (_, i) => `limits-${i}`);
    const results = await Promise.all(keys.map(async (key, i) => {
      const port = ports[i % 2]!;
      const res = await fetch(`http://127.0.0.1:${port}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'work', input: { messages } }),
      });
      return { status: res.status, body: await res.json() as any };
    }));
    // Until every created job has finished on the executors.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const read = await store.ownerUse('alice').catch(() => null);
      if (read !== null && read.use.day.reservedMicros === 0) break;
      if (Date.now() > deadline) throw new Error(`still reserved: ${read?.use.day.reservedMicros}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    sampling = false;
    await sampler;

    expect(samples).toBeGreaterThan(10);
    expect(maxSeen).toBeLessThanOrEqual(LIMIT);
    const jobs = (await store.listAllJobs({ ownerId: 'alice', limit: 200 }));
    const all = [...jobs.jobs];
    for (let cursor = jobs.nextCursor; cursor !== null;) {
      const page = await store.listAllJobs({ ownerId: 'alice', limit: 200, cursor });
      all.push(...page.jobs);
      cursor = page.nextCursor;
    }
    const created = new Set(all.map((j) => j.idempotencyKey));
    let refused = 0;
    results.forEach((r, i) => {
      if (r.status === 429) {
        refused++;
        expect(r.body.code).toBe('budget_exceeded');
        expect(created.has(keys[i]!)).toBe(false);
      } else expect(r.status).toBe(201);
    });
    expect(refused).toBeGreaterThan(0);
    expect(created.size).toBe(400 - refused);
    // At most 100 worst cases at once; as answers settle below their worst case, more fit.
    expect(created.size).toBeGreaterThanOrEqual(100);
    const spent = all.flatMap((j) => j.attempts).reduce((s, a) => s + (a.costMicros ?? 0), 0);
    expect(spent).toBeLessThanOrEqual(LIMIT);
    expect((await store.ownerUse('alice')).use.day).toEqual({ spentMicros: spent, reservedMicros: 0 });
    for (const j of all) expect(j.state).toBe('succeeded');
  }, 120_000);
});
