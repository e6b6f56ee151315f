/**
 * Real executor processes (`bin/onejob executor`) against real databases and
 * a fake provider: crashes (kill -9), pauses past the lease (SIGSTOP/SIGCONT),
 * and two processes sharing one PostgreSQL.
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
const TOKEN = 'tok_alice_process_0123456789';
const INPUT = { messages: [{ role: 'user', content: 'work' }] };

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`executor processes on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let dir: string;
    const children: ChildProcess[] = [];

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      dir = mkdtempSync(join(tmpdir(), 'onejob-proc-'));
      writeFileSync(
        join(dir, 'onejob.config.json'),
        JSON.stringify({
          providers: {
            primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000 },
            fallback: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake-2', timeoutMs: 60_000 },
          },
          routes: { work: { providers: ['primary', 'fallback'] } },
          apiKeys: { [TOKEN]: OWNER },
        }),
      );
    });
    afterEach(async () => {
      for (const c of children.splice(0)) {
        if (c.exitCode === null && c.signalCode === null) {
          c.kill('SIGCONT');
          c.kill('SIGKILL');
        }
      }
      await fake.close();
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    function startExecutor(args: string[] = []): ChildProcess {
      const child = spawn(process.execPath, [BIN, 'executor', '--config', join(dir, 'onejob.config.json'), ...args], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr!.setEncoding('utf8');
      children.push(child);
      return child;
    }
    function startServe(port: number, args: string[] = []): ChildProcess {
      const child = spawn(process.execPath, [BIN, 'serve', '--config', join(dir, 'onejob.config.json'), '--port', String(port), '--host', '127.0.0.1', ...args], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr!.setEncoding('utf8');
      children.push(child);
      return child;
    }
    const create = (key: string) => store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'work', input: INPUT, providers: ['primary', 'fallback'] }).then((r) => r.job);

    it('kill -9 mid-attempt: the attempt becomes unknown (never failed), the provider was called once, a restart runs nothing again', async () => {
      fake.setDefault({ hang: true });
      const exe = startExecutor(['--lease-ms', '1000']);
      const job = await create('crash');
      await fake.waitForCalls(1);
      await until('running', async () => (await store.getJob(OWNER, job.id))?.attempts[0]?.state === 'running');
      exe.kill('SIGKILL');
      await until('exit', async () => exe.signalCode === 'SIGKILL');
      await new Promise((r) => setTimeout(r, 1100));
      // The restarted executor's rescuer (every 5 s) or ours: either way the attempt must end unknown.
      startExecutor(['--lease-ms', '1000']);
      await until('rescued', async () => (await store.rescueExpiredLeases()) >= 0 && (await store.getJob(OWNER, job.id))?.state === 'unknown');
      const after = await store.getJob(OWNER, job.id);
      expect(after!.attempts.map((a) => [a.state, a.error?.code])).toEqual([['unknown', 'lease_expired']]);
      await new Promise((r) => setTimeout(r, 1500));
      expect(fake.calls).toHaveLength(1);
      expect((await store.getJob(OWNER, job.id))!.attempts).toHaveLength(1);
    });

    it('the fast path: serve killed -9 while the attempt it created with the job runs; another process rescues it to unknown, the retry is in doubt, the provider ran once', async () => {
      fake.setDefault({ hang: true });
      const [p1, p2] = [await freePort(), await freePort()];
      const first = startServe(p1, ['--lease-ms', '1000']);
      await until('serve ready', async () => (await fetch(`http://127.0.0.1:${p1}/readyz`).catch(() => null))?.status === 200, 60_000);
      const chat = (port: number) => fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'fast-crash', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'work', messages: INPUT.messages }),
      });
      const answer = chat(p1).then((r) => r.status, () => 'connection lost');
      await fake.waitForCalls(1);
      // The job and its first attempt were written together, leased to serve's own executor: no claim by anyone.
      const [job] = (await store.listJobs({ ownerId: OWNER })).jobs;
      const events = (await store.listEvents(OWNER, job!.id)).map((e) => e.type);
      expect(events).not.toContain('attempt.claimed');
      expect(job!.attempts).toHaveLength(1);
      first.kill('SIGKILL');
      expect(await answer).toBe('connection lost');
      await new Promise((r) => setTimeout(r, 1100));
      startServe(p2, ['--lease-ms', '1000']);
      await until('serve ready', async () => (await fetch(`http://127.0.0.1:${p2}/readyz`).catch(() => null))?.status === 200, 60_000);
      await until('rescued', async () => (await store.rescueExpiredLeases()) >= 0 && (await store.getJob(OWNER, job!.id))?.state === 'unknown');
      const retry = await chat(p2);
      expect(retry.status).toBe(409);
      expect(((await retry.json()) as { code?: string }).code).toBe('attempt_in_doubt');
      const after = await store.getJob(OWNER, job!.id);
      expect(after!.attempts.map((a) => [a.state, a.error?.code])).toEqual([['unknown', 'lease_expired']]);
      expect(fake.calls).toHaveLength(1);
    });

    it('SIGSTOP past the lease, then SIGCONT: rescued to unknown meanwhile, the paused executor\'s answer is recorded by its lease token as a late answer (no other lease took the attempt)', async () => {
      fake.setDefault({ gate: 'wake', reply: 'answer from a sleeper' });
      const exe = startExecutor(['--lease-ms', '800']);
      const job = await create('pause');
      await fake.waitForCalls(1);
      await until('running', async () => (await store.getJob(OWNER, job.id))?.attempts[0]?.state === 'running');
      exe.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, 1000));
      expect(await store.rescueExpiredLeases()).toBe(1);
      expect((await store.getJob(OWNER, job.id))?.attempts[0]?.state).toBe('unknown');
      fake.release('wake');
      await fake.waitForResult(1);
      exe.kill('SIGCONT');
      // The answer in hand is not thrown away (issue #20 §2): the token proves this executor ran the attempt.
      const after = await until('late answer recorded', async () => {
        const j = await store.getJob(OWNER, job.id);
        return j?.state === 'succeeded' ? j : null;
      }, 10_000);
      expect(after.result).toMatchObject({ content: 'answer from a sleeper' });
      expect(after.attempts.map((a) => [a.state, a.resolvedBy])).toEqual([['succeeded', 'late_answer']]);
      expect(fake.calls).toHaveLength(1);
      expect(exe.exitCode).toBeNull();
    });

    it('a cancel from another process stops the request at the next heartbeat; the attempt is cancelled', async () => {
      fake.setDefault({ hang: true });
      startExecutor(['--lease-ms', '900']);
      const job = await create('cancel-remote');
      await fake.waitForCalls(1);
      await until('running', async () => (await store.getJob(OWNER, job.id))?.attempts[0]?.state === 'running');
      await store.cancelJob(OWNER, job.id);
      const after = await until('attempt cancelled', async () => {
        const j = await store.getJob(OWNER, job.id);
        return j?.attempts[0]?.state === 'cancelled' ? j : null;
      }, 10_000);
      expect(after).toMatchObject({ state: 'cancelled', result: null });
      const call = await fake.waitForResult(1);
      expect(call.result).toBe('client-closed');
      expect(fake.calls).toHaveLength(1);
    });

    it.skipIf(db.name !== 'postgres')('two executor processes, 500 jobs: every job ran exactly once (provider calls = attempts), no attempt had two owners', async () => {
      fake.setDefault({ delayMs: 2, reply: 'ok' });
      startExecutor(['--concurrency', '32']);
      startExecutor(['--concurrency', '32']);
      const jobs: { id: string }[] = [];
      for (let i = 0; i < 500; i += 50) jobs.push(...(await Promise.all(Array.from({ length: 50 }, (_, j) => create(`bulk-${i + j}`)))));
      await until('all succeeded', async () => (await store.listJobs({ ownerId: OWNER, state: 'succeeded', limit: 200 })).jobs.length === 200 && countDone(store, 500), 120_000);
      const keys = fake.calls.map((c) => c.idempotencyKey);
      expect(keys).toHaveLength(500);
      expect(new Set(keys).size).toBe(500);
      const owners = new Map<string, Set<string>>();
      let cursor: string | undefined;
      let attempts = 0;
      do {
        const page = await store.listJobs({ ownerId: OWNER, limit: 200, cursor });
        for (const j of page.jobs) {
          attempts += j.attempts.length;
          expect(j.state).toBe('succeeded');
        }
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(attempts).toBe(500);
      for (const e of await store.driver.queries.eventListAll(0, 10_000)) {
        if (e.type !== 'attempt.started' && e.type !== 'attempt.claimed') continue;
        const who = String(e.data.lease_owner ?? e.data.executor ?? '');
        if (!who) continue;
        const set = owners.get(e.attemptId!) ?? new Set<string>();
        set.add(who);
        owners.set(e.attemptId!, set);
      }
      expect([...owners.values()].every((s) => s.size === 1)).toBe(true);
      const executorsUsed = new Set([...owners.values()].flatMap((s) => [...s]));
      expect(executorsUsed.size).toBe(2);
    }, 180_000);
  });
}

async function countDone(store: JobStore, n: number): Promise<boolean> {
  let cursor: string | undefined;
  let done = 0;
  do {
    const page = await store.listJobs({ ownerId: OWNER, state: 'succeeded', limit: 200, cursor });
    done += page.jobs.length;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return done === n;
}
