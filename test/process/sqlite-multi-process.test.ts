/**
 * SQLite with several processes on one file: `onejob serve` (the API) plus
 * two `onejob executor` processes, and this test process writing too. busy_timeout plus retries; the same exactly-once guarantees
 * as on PostgreSQL: one job per key, every job run once (provider calls =
 * attempts), no attempt with two owners.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const OWNER = 'alice';
const TOKEN = 'tok_alice_0123456789';
const INPUT = { messages: [{ role: 'user', content: 'work' }] };
const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function allJobs(store: JobStore) {
  const out = [];
  let cursor: string | undefined;
  do {
    const page = await store.listJobs({ ownerId: OWNER, limit: 200, cursor });
    out.push(...page.jobs);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return out;
}

describe('SQLite: serve and two executor processes on one file', () => {
  let store: JobStore;
  let url: string;
  let cleanup: () => Promise<void>;
  let fake: FakeProvider;
  let dir: string;
  const children: ChildProcess[] = [];
  const stderr: string[] = [];

  beforeEach(async () => {
    ({ store, url, cleanup } = await createTestStore(sqlite));
    fake = await startFakeProvider();
    dir = mkdtempSync(join(tmpdir(), 'onejob-sqlite-mp-'));
    writeFileSync(
      join(dir, 'onejob.config.json'),
      JSON.stringify({
        apiKeys: { [TOKEN]: OWNER },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000 } },
        routes: { work: { providers: ['primary'] } },
      }),
    );
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await fake.close();
    await cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(args: string[]): ChildProcess {
    const child = spawn(process.execPath, [BIN, ...args, '--config', join(dir, 'onejob.config.json')], {
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => stderr.push(d));
    children.push(child);
    return child;
  }

  it('150 jobs from the API and from another writer: each created once, run once, by one owner each; both executors did work', async () => {
    fake.setDefault({ delayMs: 100, reply: 'ok' });
    const port = await freePort();
    // The API process writes (creates), the executors write (claims, settles), and so does this test process.
    const serve = start(['serve', '--no-executor', '--port', String(port), '--host', '127.0.0.1']);
    start(['executor', '--concurrency', '4', '--lease-ms', '5000']);
    start(['executor', '--concurrency', '4', '--lease-ms', '5000']);
    const base = `http://127.0.0.1:${port}`;
    await until('serve ready', async () => (await fetch(`${base}/readyz`)).status === 200, 60_000);

    // 60 keys over HTTP, each sent twice at once (a double click); 90 straight into the file from this process.
    const post = (key: string) =>
      fetch(`${base}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'work', input: INPUT }),
      }).then(async (r) => ({ status: r.status, id: ((await r.json()) as { id?: string }).id }));
    const direct: Promise<unknown>[] = [];
    const viaApi: { status: number; id?: string | undefined }[][] = [];
    for (let i = 0; i < 60; i++) {
      viaApi.push(await Promise.all([post(`api-${i}`), post(`api-${i}`)]));
      if (i < 45) {
        for (const k of [`direct-${2 * i}`, `direct-${2 * i + 1}`]) {
          direct.push(store.createJob({ ownerId: OWNER, idempotencyKey: k, route: 'work', input: INPUT, providers: ['primary'] }));
        }
      }
    }
    await Promise.all(direct);
    for (const [a, b] of viaApi) {
      expect([a!.status, b!.status].sort()).toEqual([200, 201]);
      expect(a!.id).toBe(b!.id);
    }

    const jobs = await until('150 jobs succeeded', async () => {
      const all = await allJobs(store);
      return all.length === 150 && all.every((j) => j.state === 'succeeded') ? all : null;
    }, 150_000);
    expect(jobs.every((j) => j.attempts.length === 1 && j.attempts[0]!.state === 'succeeded')).toBe(true);
    const keys = fake.calls.map((c) => c.idempotencyKey);
    expect(keys).toHaveLength(150);
    expect(new Set(keys).size).toBe(150);

    const owners = new Map<string, Set<string>>();
    for (const e of await store.driver.queries.eventListAll(0, 100_000)) {
      if (e.type !== 'attempt.started' && e.type !== 'attempt.claimed') continue;
      const who = String(e.data.lease_owner ?? e.data.executor ?? '');
      if (!who || who === 'null') continue;
      owners.set(e.attemptId!, (owners.get(e.attemptId!) ?? new Set()).add(who));
    }
    expect([...owners.values()].every((s) => s.size === 1)).toBe(true);
    expect(new Set([...owners.values()].flatMap((s) => [...s])).size).toBe(2);
    expect(serve.exitCode).toBeNull();
    expect(stderr.join('')).not.toMatch(/SQLITE_BUSY|database is locked/);
  }, 240_000);
});
