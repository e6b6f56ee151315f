/**
 * A dead SQLite worker thread (the one that owns the connection) is started
 * again: calls waiting on it fail with `database_unavailable` (transient),
 * later ones work on the same file with every committed row; `/healthz`
 * stays 200. A worker that cannot be started again (its file is gone)
 * turns `/healthz` 503 `unavailable`, so the process gets replaced. The
 * worker is killed for real (`worker.terminate()`).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/build-app.ts';
import { JobStore } from '../../src/store/job-store.ts';
import { openSqliteDriver, sqliteWorkerOf } from '../../src/store/sqlite/sqlite-driver.ts';
import { testConfig } from '../http/http-test-app.ts';

async function eventually<T>(f: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await f();
    } catch (e) {
      if (Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

const job = (key: string) => ({ ownerId: 'alice', idempotencyKey: key, route: 'summarize', input: { k: key }, providers: ['p1'] });

describe('a dead SQLite worker', () => {
  it('is started again: waiting calls fail as database_unavailable, later ones see every committed row; /healthz stays 200', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-worker-'));
    const driver = await openSqliteDriver({ path: join(dir, 'x.db') });
    const store = new JobStore(driver);
    await store.migrate();
    const app = buildApp({ store, config: testConfig() });
    try {
      const before = await store.createJob(job('before'));
      const first = sqliteWorkerOf(driver)!;
      expect(first).not.toBeNull();
      const inFlight = store.createJob(job('in-flight')).then(() => 'done', (e: { code?: string }) => e.code);
      await first.terminate();
      expect(['done', 'database_unavailable']).toContain(await inFlight);
      // A new worker, on the same file.
      const after = await eventually(() => store.createJob(job('after')));
      expect(sqliteWorkerOf(driver)).not.toBe(first);
      expect((await store.getJob('alice', before.job.id))?.id).toBe(before.job.id);
      expect((await store.getJob('alice', after.job.id))?.idempotencyKey).toBe('after');
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
      // And again: each death is survived.
      await sqliteWorkerOf(driver)!.terminate();
      await eventually(() => store.createJob(job('after-2')));
      expect(store.liveness()).toBeNull();
    } finally {
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('that cannot be started again turns /healthz 503 unavailable (and /readyz 503)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-worker-'));
    const dbDir = join(dir, 'db');
    mkdirSync(dbDir);
    const driver = await openSqliteDriver({ path: join(dbDir, 'x.db') });
    const store = new JobStore(driver);
    await store.migrate();
    const app = buildApp({ store, config: testConfig() });
    try {
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      // The file's folder is replaced by a plain file: no worker can open the database any more.
      rmSync(dbDir, { recursive: true, force: true });
      writeFileSync(dbDir, 'not a folder');
      await sqliteWorkerOf(driver)!.terminate();
      const health = await eventually(async () => {
        const res = await app.inject({ method: 'GET', url: '/healthz' });
        if (res.statusCode === 200) throw new Error('still healthy');
        return res;
      });
      expect(health.statusCode).toBe(503);
      expect(health.json()).toMatchObject({ code: 'unavailable' });
      expect(health.json().detail).toMatch(/SQLite worker died and \d+ restarts failed/);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    } finally {
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
