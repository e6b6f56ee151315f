/**
 * The command line, spawned as users run it (`bin/onejob`), against SQLite
 * and PostgreSQL databases.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.ts';
import type { Store } from '../../src/store/store.ts';
import { TEST_DATABASES } from '../support/databases.ts';

const BIN = resolve(import.meta.dirname, '../../bin/onejob');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function onejob(args: string[], env: Record<string, string> = {}, cwd?: string): Promise<Run> {
  return new Promise((done) => {
    execFile(BIN, args, { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, cwd, timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

/** Exactly one line on stderr, starting with "onejob: ". */
function expectOneLineError(run: Run, code: number, pattern: RegExp): void {
  expect(run.code, run.stderr).toBe(code);
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^onejob: /);
  expect(lines[0]).toMatch(pattern);
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`bin/onejob (${db.name})`, () => {
    let url: string;
    let cleanup: () => Promise<void>;
    let store: Store;
    let env: Record<string, string>;
    beforeAll(async () => {
      ({ url, cleanup } = await db.create());
      env = { DATABASE_URL: url };
    });
    afterAll(async () => {
      await store?.close();
      await cleanup?.();
    });

    it('migrate prints one line per migration: applied, then already applied', async () => {
      const first = await onejob(['migrate'], env);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/^0001_\w+: applied$/m);
      const second = await onejob(['migrate'], env);
      expect(second.code).toBe(0);
      expect(second.stdout).toMatch(/^0001_\w+: already applied$/m);
      expect(second.stdout).not.toMatch(/: applied$/m);
      store = await openStore(url);
    });

    it('jobs list and jobs show read the database as an admin', async () => {
      const { job } = await store.createJob({ ownerId: 'alice', idempotencyKey: 'cli-1', route: 'summarize', input: { text: 'hi' }, providers: ['p1', 'p2'] });
      await store.createJob({ ownerId: 'bob', idempotencyKey: 'cli-1', route: 'summarize', input: 1, providers: ['p1'] });

      const list = await onejob(['jobs', 'list', '--owner', 'alice'], env);
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toMatch(/^JOB\s+OWNER\s+STATE\s+ROUTE/);
      expect(list.stdout).toContain(job.id);
      expect(list.stdout.trim().split('\n')).toHaveLength(2);

      const json = await onejob(['jobs', 'list', '--owner', 'alice', '--state', 'queued', '--json'], env);
      expect(JSON.parse(json.stdout)).toMatchObject({ data: [{ id: job.id, state: 'queued', idempotency_key: 'cli-1' }], next_cursor: null });
      const none = await onejob(['jobs', 'list', '--owner', 'alice', '--state', 'failed'], env);
      expect(none.stdout.trim()).toBe('no jobs');

      const show = await onejob(['jobs', 'show', job.id, '--owner', 'alice'], env);
      expect(show.code).toBe(0);
      expect(show.stdout).toContain(`job        ${job.id}`);
      expect(show.stdout).toContain('no attempts yet');
      const showJson = await onejob(['jobs', 'show', job.id, '--owner', 'alice', '--json'], env);
      expect(JSON.parse(showJson.stdout)).toMatchObject({ id: job.id, input: { text: 'hi' }, attempts: [] });

      // Another owner's job is not found.
      expectOneLineError(await onejob(['jobs', 'show', job.id, '--owner', 'bob'], env), 4, /no job/);
    });

    it('jobs list|show and attempts resolve work across owners; --owner only narrows', async () => {
      const { job: carol } = await store.createJob({ ownerId: 'carol', idempotencyKey: 'x-1', route: 'summarize', input: 'c', providers: ['p1', 'p2'] });
      const { job: dave } = await store.createJob({ ownerId: 'dave', idempotencyKey: 'x-1', route: 'summarize', input: 'd', providers: ['p1'] });

      const all = await onejob(['jobs', 'list', '--json', '--limit', '200'], env);
      expect(all.code, all.stderr).toBe(0);
      const ids = (JSON.parse(all.stdout) as { data: { id: string }[] }).data.map((j) => j.id);
      expect(ids).toContain(carol.id);
      expect(ids).toContain(dave.id);
      expect(ids.indexOf(dave.id)).toBeLessThan(ids.indexOf(carol.id)); // newest first
      const narrowed = await onejob(['jobs', 'list', '--owner', 'carol', '--json'], env);
      expect((JSON.parse(narrowed.stdout) as { data: { id: string }[] }).data.map((j) => j.id)).toEqual([carol.id]);
      // A page across owners continues with its cursor.
      const first = JSON.parse((await onejob(['jobs', 'list', '--limit', '1', '--json'], env)).stdout) as { data: { id: string }[]; next_cursor: string | null };
      expect(first.data.map((j) => j.id)).toEqual([ids[0]]);
      expect(first.next_cursor).not.toBeNull();

      const show = await onejob(['jobs', 'show', carol.id, '--json'], env);
      expect(show.code, show.stderr).toBe(0);
      expect(JSON.parse(show.stdout)).toMatchObject({ id: carol.id, owner: 'carol', input: 'c' });

      const attempt = await store.startAttempt({ ownerId: 'carol', jobId: carol.id, kind: 'manual', hedgeAfterMs: null });
      expectOneLineError(await onejob(['attempts', 'resolve', attempt.id, '--owner', 'dave', '--state', 'cancelled'], env), 4, /not found/);
      const resolved = await onejob(['attempts', 'resolve', attempt.id, '--state', 'failed', '--json'], env);
      expect(resolved.code, resolved.stderr).toBe(0);
      expect(JSON.parse(resolved.stdout)).toMatchObject({ id: attempt.id, state: 'failed', job: { id: carol.id, state: 'running' } });
      expect((await store.getAttempt('carol', attempt.id))?.state).toBe('failed');
    }, 180_000);

    it('attempts resolve --reason keeps the reason with resolved_by operator; attempts check refuses a provider without a lookup', async () => {
      const { job } = await store.createJob({ ownerId: 'alice', idempotencyKey: 'cli-reason', route: 'summarize', input: 3, providers: ['p1', 'p2'] });
      const a = await store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'manual', hedgeAfterMs: null });
      expectOneLineError(await onejob(['attempts', 'check', a.id], env), 2, /no lookup/);
      const resolved = await onejob(['attempts', 'resolve', a.id, '--state', 'cancelled', '--reason', 'checked the console', '--json'], env);
      expect(resolved.code, resolved.stderr).toBe(0);
      expect(JSON.parse(resolved.stdout)).toMatchObject({ id: a.id, state: 'cancelled', resolved_by: 'operator' });
      const events = await store.listEvents('alice', job.id);
      expect(events.find((e) => e.type === 'attempt.cancelled' && e.attemptId === a.id)?.data).toMatchObject({ actor: 'cli', reason: 'checked the console', resolved_by: 'operator' });
    });

    it('attempts resolve: failed moves the job on, succeeded wins, a second resolve is a conflict', async () => {
      const { job } = await store.createJob({ ownerId: 'alice', idempotencyKey: 'cli-2', route: 'summarize', input: 2, providers: ['p1', 'p2'] });
      const first = await store.startAttempt({ ownerId: 'alice', jobId: job.id, kind: 'manual', hedgeAfterMs: null });

      const failed = await onejob(['attempts', 'resolve', first.id, '--owner', 'alice', '--state', 'failed', '--error', '{"code":"refused","message":"checked"}'], env);
      expect(failed.code, failed.stderr).toBe(0);
      expect(failed.stdout).toContain(`attempt ${first.id} failed; job ${job.id} is running`);
      expect(failed.stdout).toMatch(/next: attempt att_\S+ on p2 \(starting\)/);
      expect((await store.getAttempt('alice', first.id))?.error).toMatchObject({ code: 'refused', message: 'checked' });

      const second = (await store.getJob('alice', job.id))!.attempts[1]!;
      const won = await onejob(['attempts', 'resolve', second.id, '--owner', 'alice', '--state', 'succeeded', '--result', '{"summary":"ok"}', '--json'], env);
      expect(won.code, won.stderr).toBe(0);
      expect(JSON.parse(won.stdout)).toMatchObject({ id: second.id, state: 'succeeded', job: { state: 'succeeded', result: { summary: 'ok' }, completed_by: second.id } });

      expectOneLineError(await onejob(['attempts', 'resolve', second.id, '--owner', 'alice', '--state', 'cancelled'], env), 5, /finished|already/);
      expectOneLineError(await onejob(['attempts', 'resolve', 'att_nope', '--owner', 'alice', '--state', 'cancelled'], env), 4, /not found/);
    });

    it('bad input: non-zero exit and one line on stderr', async () => {
      expectOneLineError(await onejob(['jobs', 'list', '--owner', 'a', '--limit', '500'], env), 2, /--limit/);
      expectOneLineError(await onejob(['jobs', 'list', '--owner', 'a', '--state', 'done'], env), 2, /Allowed choices/);
      expectOneLineError(await onejob(['jobs', 'list', '--owner', 'a', '--cursor', 'garbage!!'], env), 2, /cursor/);
      expectOneLineError(await onejob(['frobnicate'], env), 2, /unknown command/);
      expectOneLineError(await onejob(['jobs', 'list', '--owner', 'a', '--bogus'], env), 2, /unknown option/);
      expectOneLineError(await onejob(['attempts', 'resolve', 'att_1', '--owner', 'a', '--state', 'succeeded'], env), 2, /--result/);
      expectOneLineError(await onejob(['attempts', 'resolve', 'att_1', '--owner', 'a', '--state', 'succeeded', '--result', '{x'], env), 2, /not valid JSON/);
      expectOneLineError(await onejob(['attempts', 'resolve', 'att_1', '--owner', 'a', '--state', 'failed', '--result', '1'], env), 2, /--result goes with/);
      expectOneLineError(await onejob(['attempts', 'resolve', 'att_1', '--owner', 'a', '--state', 'maybe'], env), 2, /Allowed choices/);
    });
  });
}

describe('bin/onejob without a usable database or config', () => {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an unreachable database: non-zero, one line naming it', async () => {
    for (const args of [['migrate'], ['jobs', 'list', '--owner', 'a'], ['jobs', 'show', 'job_1', '--owner', 'a']]) {
      expectOneLineError(await onejob(args, { DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' }), 3, /unreachable|ECONNREFUSED/);
    }
    const run = await onejob(['migrate'], { DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' });
    expect(run.stderr).not.toContain('secret');
  });

  it('a login the server refuses, or a database it does not have, is said so (not "unreachable")', async () => {
    const base = (process.env.ONEJOB_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test').replace(/\/[^/]*$/, '');
    const role = new URL(base);
    role.username = 'onejob_no_such_role';
    role.password = 'secret';
    const refused = await onejob(['migrate'], { DATABASE_URL: `${role.href}/postgres` });
    expectOneLineError(refused, 3, /refused the login .*DATABASE_URL.*role "onejob_no_such_role" does not exist/);
    expect(refused.stderr).not.toMatch(/unreachable|secret/);
    const missing = await onejob(['migrate'], { DATABASE_URL: `${base}/onejob_no_such_database` });
    expectOneLineError(missing, 3, /has no such database .*"onejob_no_such_database" does not exist/);
    expect(missing.stderr).not.toMatch(/unreachable/);
  });

  it('an unsupported DATABASE_URL, a missing or invalid config file: exit 2 with the precise reason', async () => {
    expectOneLineError(await onejob(['migrate'], { DATABASE_URL: 'mysql://x' }), 2, /DATABASE_URL/);
    expectOneLineError(await onejob(['migrate', '--config', join(dir, 'missing.json')]), 2, /file not found/);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ providers: { p: { type: 'grpc', baseUrl: 'x', model: 'm' } }, routes: { r: { providers: ['q'] } }, typo: 1 }));
    const run = await onejob(['--config', bad, 'migrate'], { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` });
    expectOneLineError(run, 2, /\/typo: is not a known setting/);
    expect(run.stderr).toContain('/providers/p/type: must be one of "openai", "anthropic"');
    // A hedge that could never start (issue 35) is refused at load, naming both values.
    writeFileSync(bad, JSON.stringify({
      providers: { a: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', timeoutMs: 5000 }, b: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } },
      routes: { r: { providers: ['a', 'b'], hedgeAfterMs: 5000 } },
    }));
    const hedge = await onejob(['--config', bad, 'serve', '--port', '0'], { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` });
    expectOneLineError(hedge, 2, /\/routes\/r\/hedgeAfterMs: 5000 is not below the timeoutMs of provider "a" \(5000\)/);
    writeFileSync(bad, '{not json');
    expectOneLineError(await onejob(['migrate'], { ONEJOB_CONFIG: bad }), 2, /not valid JSON/);
  });

  it('a migrated database is required for reads', async () => {
    expectOneLineError(await onejob(['jobs', 'list', '--owner', 'a'], { DATABASE_URL: `sqlite:${join(dir, 'fresh.db')}` }), 3, /onejob migrate/);
  });

  it('--help explains every command with examples; exit 0', async () => {
    const help = await onejob(['--help']);
    expect(help.code).toBe(0);
    for (const word of ['serve', 'executor', 'verify', 'fake-provider', 'migrate', 'jobs', 'attempts', 'DATABASE_URL', 'Examples:']) expect(help.stdout).toContain(word);
    const serve = await onejob(['serve', '--help']);
    expect(serve.stdout).toContain('--no-executor');
    expect(serve.stdout).toContain('onejob executor');
    expect(serve.stdout).toContain('demo');
    const show = await onejob(['jobs', 'show', '--help']);
    expect(show.stdout).toContain('admin');
  });

  it('serve answers over HTTP and stops cleanly on SIGTERM', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(BIN, ['serve', '--host', '127.0.0.1', '--port', '0', '--no-executor'], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${join(dir, 'serve.db')}`, ONEJOB_API_KEYS: 'tok_a=alice' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += String(d)));
    const port = await new Promise<number>((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`no listen line: ${out}`)), 20_000);
      child.stdout.on('data', () => {
        const m = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          ok(Number(m[1]));
        }
      });
    });
    const res = await fetch(`http://127.0.0.1:${port}/v1/jobs`, { headers: { authorization: 'Bearer tok_a' } });
    expect(res.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const exited = new Promise<number | null>((ok) => child.on('exit', (code) => ok(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).toContain('"msg":"stopped"');
  });
});
