/**
 * Backpressure (CONTRACT §3: a server that cannot serve now answers `503
 * unavailable` with a `Retry-After`, and has created nothing it did not
 * acknowledge). A load far above what small bounds allow, while the database
 * stops answering for a while (PostgreSQL: a TCP proxy that stalls every
 * byte; SQLite: another process holding the write lock): memory stays
 * bounded, every answer is 2xx, 4xx or 503, and every acknowledged job exists.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../../src/http/build-app.ts';
import type { Driver } from '../../src/store/driver.ts';
import { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { createPostgresDriver } from '../../src/store/postgres/postgres-driver.ts';
import { openSqliteDriver } from '../../src/store/sqlite/sqlite-driver.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { ALICE, testConfig } from './http-test-app.ts';

const REQUESTS = 2_500;
const CONCURRENCY = 200;
const MAX_QUEUED = 100;

interface Answer {
  readonly status: number;
  readonly key: string;
  readonly body: Record<string, unknown>;
  readonly retryAfter: string | null;
}

/** Fires `REQUESTS` creates with `CONCURRENCY` clients; `fault` runs once a tenth of them were answered. */
async function load(baseUrl: string, fault: () => Promise<void>): Promise<{ answers: Answer[]; peakHeapMb: number; baseHeapMb: number }> {
  const answers: Answer[] = [];
  let next = 0;
  let faultStarted: Promise<void> | null = null;
  globalThis.gc?.();
  const baseHeapMb = process.memoryUsage().heapUsed / 2 ** 20;
  let peakHeapMb = baseHeapMb;
  const sampler = setInterval(() => {
    peakHeapMb = Math.max(peakHeapMb, process.memoryUsage().heapUsed / 2 ** 20);
  }, 50);
  const client = async (): Promise<void> => {
    while (next < REQUESTS) {
      const i = next++;
      if (i === REQUESTS / 10) faultStarted = fault();
      const key = `bp-${i}`;
      const res = await fetch(`${baseUrl}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ALICE}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'summarize', input: { n: i, pad: 'x'.repeat(200) } }),
      });
      answers.push({ status: res.status, key, body: (await res.json()) as Record<string, unknown>, retryAfter: res.headers.get('retry-after') });
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, client));
    await faultStarted;
  } finally {
    clearInterval(sampler);
  }
  return { answers, peakHeapMb, baseHeapMb };
}

/** With ONEJOB_TEST_FIGURES=1, one line of figures per run (for notes; nothing is asserted on them). */
function figures(name: string, answers: readonly Answer[], heap?: { peakHeapMb: number; baseHeapMb: number }): void {
  if (process.env.ONEJOB_TEST_FIGURES !== '1') return;
  const by: Record<number, number> = {};
  for (const a of answers) by[a.status] = (by[a.status] ?? 0) + 1;
  const mem = heap ? `, heap ${heap.baseHeapMb.toFixed(0)} → peak ${heap.peakHeapMb.toFixed(0)} MiB` : '';
  process.stderr.write(`[figures] ${name}: ${JSON.stringify(by)}${mem}\n`);
}

function checkAnswers(answers: readonly Answer[]): { created: Answer[]; unavailable: Answer[] } {
  expect(answers).toHaveLength(REQUESTS);
  const bad = answers.filter((a) => !(a.status < 500 || a.status === 503));
  expect(bad.map((a) => `${a.status} ${String(a.body.code)}`)).toEqual([]);
  const unavailable = answers.filter((a) => a.status === 503);
  for (const a of unavailable) {
    expect(a.body.code).toBe('unavailable');
    expect(Number(a.retryAfter)).toBeGreaterThan(0);
  }
  const created = answers.filter((a) => a.status === 201 || a.status === 200);
  expect(answers.filter((a) => a.status >= 400 && a.status < 500)).toEqual([]);
  return { created, unavailable };
}

describe('backpressure', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  async function serve(driver: Driver): Promise<string> {
    const store = new JobStore(driver);
    const app = buildApp({ store, config: testConfig() });
    await app.listen({ port: 0, host: '127.0.0.1' });
    cleanups.push(async () => {
      await app.close();
      await store.close();
    });
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }

  it.skipIf(Boolean(postgresSkipReason()))('postgres: load far above the bounds while the database stalls for 3 s: 2xx or 503 only, bounded memory, every acknowledged job exists', async () => {
    const db = await createPostgresDatabase();
    cleanups.push(() => db.drop());
    const direct = await openStore(db.url);
    cleanups.push(() => direct.close());
    await direct.migrate();
    const u = new URL(db.url);
    const proxy: FaultProxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    cleanups.push(() => proxy.close());
    const driver = await createPostgresDriver({
      connectionString: proxy.via(db.url), max: 4, maxQueued: MAX_QUEUED, maxWaiting: 20,
      statementTimeoutMs: 1_000, queryTimeoutMs: 1_500, connectTimeoutMs: 1_000,
    });
    const baseUrl = await serve(driver);

    const { answers, peakHeapMb, baseHeapMb } = await load(baseUrl, async () => {
      proxy.stall();
      await new Promise((r) => setTimeout(r, 3_000));
      proxy.cutAll();
      proxy.heal();
    });
    figures('postgres stall', answers, { peakHeapMb, baseHeapMb });
    const { created, unavailable } = checkAnswers(answers);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(created.length).toBeGreaterThan(0);
    // Every acknowledged job is there, read around the proxy.
    for (const a of created) {
      const job = await direct.getJob('alice', String(a.body.id));
      expect(job?.idempotencyKey).toBe(a.key);
    }
    // Bounded: far from holding 2,500 requests' worth of queued work and buffers.
    expect(peakHeapMb - baseHeapMb).toBeLessThan(256);
    // The server serves again once the database answers.
    const after = await fetch(`${baseUrl}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'idempotency-key': 'bp-after', 'content-type': 'application/json' },
      body: JSON.stringify({ route: 'summarize', input: {} }),
    });
    expect(after.status).toBe(201);
  }, 120_000);

  it('sqlite: load far above the bounds while another process holds the write lock for 3 s: 2xx or 503 only, every acknowledged job exists', async () => {
    const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;
    const { url, cleanup } = await sqlite.create();
    cleanups.push(cleanup);
    const path = url.slice('sqlite:'.length);
    const direct = await openStore(url);
    cleanups.push(() => direct.close());
    await direct.migrate();
    const driver = await openSqliteDriver({ path, busyTimeoutMs: 300, maxBusyAttempts: 2, maxQueued: MAX_QUEUED });
    const baseUrl = await serve(driver);

    const { answers } = await load(baseUrl, async () => {
      const other = new Database(path);
      other.pragma('busy_timeout = 5000');
      other.exec('BEGIN IMMEDIATE');
      await new Promise((r) => setTimeout(r, 3_000));
      other.exec('COMMIT');
      other.close();
    });
    figures('sqlite locked', answers);
    const { created, unavailable } = checkAnswers(answers);
    expect(unavailable.length).toBeGreaterThan(0);
    for (const a of created) {
      const job = await direct.getJob('alice', String(a.body.id));
      expect(job?.idempotencyKey).toBe(a.key);
    }
  }, 120_000);
});
