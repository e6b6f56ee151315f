/**
 * The store failing under a real executor process: a TCP proxy between
 * `onejob executor` and PostgreSQL drops every connection, refuses new ones
 * and stalls all bytes, again and again, while jobs arrive. After the faults
 * stop, every job reaches an end (terminal, or `unknown` when an answer was
 * truly in doubt) within its deadlines; none is left `queued`/`running`, no
 * attempt is `running` without a live lease, every job whose provider
 * replied holds that reply (no paid answer dropped because a write failed),
 * and no attempt was executed twice.
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
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const OWNER = 'alice';
const INPUT = { messages: [{ role: 'user', content: 'work' }] };
const pgdb = TEST_DATABASES.find((d) => d.name === 'postgres')!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(Boolean(pgdb.skip))('an executor process whose database connection drops and stalls (postgres, TCP proxy)', () => {
  let store: JobStore;
  let url: string;
  let cleanup: () => Promise<void>;
  let fake: FakeProvider;
  let proxy: FaultProxy;
  let dir: string;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    ({ store, url, cleanup } = await createTestStore(pgdb));
    fake = await startFakeProvider();
    const u = new URL(url);
    proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    dir = mkdtempSync(join(tmpdir(), 'onejob-faults-'));
    writeFileSync(
      join(dir, 'onejob.config.json'),
      JSON.stringify({
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 10_000 } },
        routes: { work: { providers: ['primary'] } },
      }),
    );
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await proxy.close();
    await fake.close();
    await cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('drops, refusals and stalls while 121 jobs run: each ends, none twice, none without an owner', async () => {
    fake.setDefault({ delayMs: 40, reply: 'the answer' });
    const exe = spawn(process.execPath, [BIN, 'executor', '--config', join(dir, 'onejob.config.json'), '--lease-ms', '10000', '--concurrency', '16'], {
      env: { ...process.env, DATABASE_URL: proxy.via(url), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    exe.stderr!.resume();
    children.push(exe);

    const created: string[] = [];
    // The executor is up and working through the proxy before the faults begin.
    created.push((await store.createJob({ ownerId: OWNER, idempotencyKey: 'f-first', route: 'work', input: INPUT, providers: ['primary'] })).job.id);
    for (let t = Date.now(); (await store.getJob(OWNER, created[0]!))?.state !== 'succeeded'; await sleep(100)) {
      if (Date.now() - t > 60_000) throw new Error('the executor process did not run the first job');
    }
    const creating = (async () => {
      for (let i = 0; i < 120; i++) {
        created.push((await store.createJob({ ownerId: OWNER, idempotencyKey: `f-${i}`, route: 'work', input: INPUT, providers: ['primary'] })).job.id);
        await sleep(60);
      }
    })();
    const faults: string[] = [];
    for (let round = 0; round < 3; round++) {
      await sleep(700);
      proxy.cutAll();
      faults.push('cut');
      await sleep(500);
      proxy.refuse();
      faults.push('refuse');
      await sleep(1_000);
      proxy.heal();
      await sleep(500);
      proxy.stall();
      faults.push('stall');
      await sleep(2_000);
      proxy.cutAll();
      proxy.heal();
    }
    await creating;
    expect(proxy.stats.cut).toBeGreaterThan(0);

    // Liveness: after the faults, every job ends within its deadlines (lease 10 s, rescue every 5 s, timeout 10 s).
    const deadline = Date.now() + 60_000;
    let jobs = await Promise.all(created.map((id) => store.getJob(OWNER, id)));
    while (jobs.some((j) => j!.state === 'queued' || j!.state === 'running') && Date.now() < deadline) {
      await sleep(250);
      jobs = await Promise.all(created.map((id) => store.getJob(OWNER, id)));
    }
    const stuck = jobs.filter((j) => j!.state === 'queued' || j!.state === 'running').map((j) => ({ id: j!.id, state: j!.state, attempts: j!.attempts.map((a) => [a.state, a.leaseOwner, a.leaseExpiresAt]) }));
    expect(stuck).toEqual([]);
    expect(exe.exitCode).toBeNull();

    for (const j of jobs) {
      // Nothing here fails definitely: an attempt is never `failed` for a database fault.
      expect(['succeeded', 'unknown']).toContain(j!.state);
      for (const a of j!.attempts) expect(a.state === 'running' && a.leaseOwner === null).toBe(false);
      if (j!.state === 'succeeded') expect(j!.result).toMatchObject({ content: 'the answer', provider: 'primary' });
    }
    // A paid answer is never dropped: the faults (2 s at most) are far shorter than the lease, so
    // every job whose provider replied ends with that reply, however many writes failed on the way.
    const replied = new Set(fake.calls.filter((c) => c.result === 'replied').map((c) => c.jobId));
    const dropped = jobs.filter((j) => replied.has(j!.id) && j!.state !== 'succeeded').map((j) => ({ id: j!.id, state: j!.state, attempts: j!.attempts.map((a) => [a.state, a.error?.code]) }));
    expect(dropped).toEqual([]);
    // Most jobs got through; none was executed more often than it has attempts.
    expect(jobs.filter((j) => j!.state === 'succeeded').length).toBeGreaterThan(60);
    const calls = new Map<string, number>();
    for (const c of fake.calls) calls.set(c.idempotencyKey!, (calls.get(c.idempotencyKey!) ?? 0) + 1);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    for (const j of jobs) {
      const mine = [...calls.keys()].filter((k) => k.startsWith(`${j!.id}:`));
      expect(mine.length).toBeLessThanOrEqual(j!.attempts.length);
    }
  }, 180_000);
});
