/**
 * Operations of real processes (`bin/onejob`), as an operator runs them:
 * - `onejob executor --metrics-port` serves its own /metrics, whose
 *   attempts_in_doubt is the database's count (it goes down when another
 *   process resolves);
 * - `onejob serve` without any configuration (the demo, whose token is
 *   public) listens on 127.0.0.1 only; a configured server keeps its address;
 * - `onejob gc` deletes finished jobs past the window and prints what it deleted.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';

const BIN = resolve(import.meta.dirname, '../../bin/onejob');
const OWNER = 'alice';

/** The first non-loopback IPv4 address of this machine, if any. */
function externalAddress(): string | null {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

/** Starts `bin/onejob args` and resolves with the child once `pattern` appears in its output. */
function startUntil(args: string[], env: Record<string, string>, cwd: string, pattern: RegExp): Promise<{ child: ChildProcess; match: RegExpExecArray; output: () => string }> {
  const child = spawn(BIN, args, { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, cwd });
  let out = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no ${pattern} in: ${out}`)), 60_000);
    const onData = (d: Buffer): void => {
      out += String(d);
      const m = pattern.exec(out);
      if (m) {
        clearTimeout(timer);
        ok({ child, match: m, output: () => out });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => fail(new Error(`exited ${code}: ${out}`)));
  });
}

/** SIGTERM, then the exit code (or the signal's name if it died of one). */
async function stop(child: ChildProcess): Promise<number | string | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | string | null>((ok) => child.on('exit', (code, signal) => ok(code ?? signal)));
  child.kill('SIGTERM');
  return exited;
}

/** Whether a TCP connection to host:port is accepted. */
async function accepts(host: string, port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((ok) => {
    const s = connect({ host, port, timeout: 3000 });
    s.once('connect', () => (s.destroy(), ok(true)));
    s.once('error', () => ok(false));
    s.once('timeout', () => (s.destroy(), ok(false)));
  });
}

/** An attempt made `unknown` the way a dead executor leaves one. */
async function unknownAttempt(store: JobStore, key: string): Promise<string> {
  const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: key, route: 'work', input: 1, providers: ['primary'] });
  const [c] = await store.claimWork({ leaseOwner: 'exe_gone', leaseMs: 60_000, limit: 1 });
  expect(c!.job.id).toBe(job.id);
  expect(await store.markUnknown({ ownerId: OWNER, attemptId: c!.attempt.id, leaseOwner: 'exe_gone', leaseToken: c!.attempt.leaseToken!, reason: { code: 'deadline', message: 'no answer' } })).toBe(true);
  return c!.attempt.id;
}

describe('operations of onejob processes (sqlite)', () => {
  let dir: string;
  let dbUrl: string;
  let store: JobStore;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-ops-'));
    dbUrl = `sqlite:${join(dir, 'onejob.db')}`;
    store = await openStore(dbUrl);
    await store.migrate();
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an executor process serves /metrics on its own port; attempts_in_doubt is the database count and goes down on a resolve elsewhere', async () => {
    const attemptId = await unknownAttempt(store, 'doubt-1');
    await unknownAttempt(store, 'doubt-2');
    const started = await startUntil(['executor', '--metrics-port', '0', '--metrics-host', '127.0.0.1'], { DATABASE_URL: dbUrl }, dir, /"metrics_url":"http:\/\/127\.0\.0\.1:(\d+)\/metrics"/);
    children.push(started.child);
    const base = `http://127.0.0.1:${started.match[1]}`;
    const scrape = async () => {
      const res = await fetch(`${base}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      return res.text();
    };
    const first = await scrape();
    expect(first).toMatch(/^onejob_attempts_in_doubt 2$/m);
    for (const name of ['onejob_attempts_total', 'onejob_races_lost_total', 'onejob_provider_latency_seconds', 'onejob_process_cpu_seconds_total']) expect(first).toContain(`# TYPE ${name}`);

    // Resolved by another process (this one): the executor's gauge follows at the next scrape.
    await store.settleAttempt({ ownerId: OWNER, attemptId, outcome: { state: 'failed', error: { code: 'checked', message: 'checked' } }, actor: 'test' });
    expect(await scrape()).toMatch(/^onejob_attempts_in_doubt 1$/m);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/v1/jobs`)).status).toBe(404);
    expect(await stop(started.child)).toBe(0);
  });

  it('onejob executor --help documents --metrics-port', async () => {
    const out = await new Promise<string>((ok) => execFile(BIN, ['executor', '--help'], { env: { PATH: process.env.PATH ?? '' } }, (_e, stdout) => ok(stdout)));
    expect(out).toContain('--metrics-port <n>');
    expect(out).toContain('/metrics');
  });

  it('the unconfigured demo listens on 127.0.0.1 only; a configured host is kept', async () => {
    const cwd = mkdtempSync(join(dir, 'demo-'));
    const demo = await startUntil(['serve', '--port', '0', '--no-executor'], { DATABASE_URL: `sqlite:${join(cwd, 'demo.db')}` }, cwd, /onejob demo: .* at http:\/\/127\.0\.0\.1:(\d+)/);
    children.push(demo.child);
    const port = Number(demo.match[1]);
    expect(await accepts('127.0.0.1', port)).toBe(true);
    const external = externalAddress();
    if (external !== null) expect(await accepts(external, port)).toBe(false);
    expect(demo.output()).not.toMatch(/Server listening at http:\/\/(?!127\.0\.0\.1)/);
    expect(await stop(demo.child)).toBe(0);

    // A configured server (here: HOST) listens where it is told, demo or not.
    const configured = await startUntil(['serve', '--port', '0', '--no-executor'], { DATABASE_URL: `sqlite:${join(cwd, 'demo.db')}`, HOST: '0.0.0.0' }, cwd, /onejob demo: .* at http:\/\/127\.0\.0\.1:(\d+)/);
    children.push(configured.child);
    if (external !== null) expect(await accepts(external, Number(configured.match[1]))).toBe(true);
    expect(await stop(configured.child), configured.output()).toBe(0);
  }, 180_000);

  it('onejob gc deletes what is past the window and prints it; --older-than overrides the config; bad durations are refused', async () => {
    // A database of its own: the jobs of the tests above must not be counted.
    const dbUrl = `sqlite:${join(dir, 'gc.db')}`;
    const store = await openStore(dbUrl);
    await store.migrate();
    try {
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'gc-old', route: 'work', input: 1, providers: ['primary'] });
      await store.cancelJob(OWNER, job.id);
      const { job: fresh } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'gc-fresh', route: 'work', input: 1, providers: ['primary'] });
      await store.cancelJob(OWNER, fresh.id);
      const db = new Database(dbUrl.slice('sqlite:'.length));
      db.pragma('busy_timeout = 5000');
      db.prepare('UPDATE jobs SET finished_at = finished_at - ? WHERE id = ?').run(40 * 86_400_000, job.id);
      db.close();
      const config = join(dir, 'gc.config.json');
      writeFileSync(config, JSON.stringify({ database: dbUrl, retention: { finishedJobsDays: 30 } }));
      const run = (args: string[]) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((ok) =>
          execFile(BIN, args, { env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 }, (e, stdout, stderr) => ok({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr })));

      const gc = await run(['gc', '--config', config]);
      expect(gc.code, gc.stderr).toBe(0);
      expect(gc.stdout.trim()).toMatch(/^deleted 1 job \(1 cancelled\), 0 attempts, \d+ events?: finished more than 30d ago$/);
      expect(await store.getJob(OWNER, job.id)).toBeNull();
      expect(await store.getJob(OWNER, fresh.id)).not.toBeNull();

      const all = await run(['gc', '--config', config, '--older-than', '0s', '--json']);
      expect(all.code, all.stderr).toBe(0);
      expect(JSON.parse(all.stdout)).toMatchObject({ deleted: { jobs: 1, by_state: { cancelled: 1 } }, older_than_ms: 0 });
      expect(await store.getJob(OWNER, fresh.id)).toBeNull();

      const bad = await run(['gc', '--config', config, '--older-than', 'soon']);
      expect(bad.code).toBe(2);
      expect(bad.stderr.trim().split('\n')).toHaveLength(1);
      expect(bad.stderr).toMatch(/^onejob: .*--older-than.*unit/);
    } finally {
      await store.close();
    }
  }, 180_000);
});
