/**
 * better-sqlite3 that cannot be loaded, for real: an install (a copy of the
 * package, every dependency linked to this checkout's) whose
 * `better_sqlite3.node` is a native module built for another Node ABI
 * (compiled here with `cc`: it registers NODE_MODULE_VERSION 999, so every
 * Node refuses it with its own "was compiled against a different Node.js
 * version" lines, as after an install made with the wrong headers).
 * - On a Node with node:sqlite (22.13+, 24, 26): `npm start`'s demo runs on
 *   node:sqlite, its banner says so with the whole cause and the fix, and a
 *   job is served; forcing better-sqlite3 fails with the whole cause and the fix.
 * - On a Node without it (20): the command fails with one line that holds
 *   the whole cause (every line of Node's message) and the fix.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeSqliteExpected } from '../../src/store/sqlite/sqlite-engine.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** A native module that registers itself for NODE_MODULE_VERSION 999 (no Node has it). */
const OTHER_ABI_ADDON = `
struct node_module { int nm_version; unsigned int nm_flags; void* nm_dso_handle; const char* nm_filename; void* nm_register_func;
  void* nm_context_register_func; const char* nm_modname; void* nm_priv; struct node_module* nm_link; };
extern void node_module_register(void*);
static struct node_module m = { 999, 0, 0, "better_sqlite3.cc", 0, 0, "better_sqlite3", 0, 0 };
__attribute__((constructor)) static void reg(void) { node_module_register(&m); }
`;

function run(bin: string, args: string[], cwd: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [bin, ...args], { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe(`better-sqlite3 built for another Node (${process.version}, node:sqlite ${nodeSqliteExpected() ? 'present' : 'absent'})`, () => {
  let dir: string;
  let bin: string;
  /** What this Node says when it loads that module: the cause the user must see, whole. */
  let cause: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-abi-'));
    for (const part of ['src', 'bin', 'migrations', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
    mkdirSync(join(dir, 'node_modules'));
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (name === 'better-sqlite3' || name.startsWith('.')) continue;
      symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
    }
    const bsq = join(dir, 'node_modules', 'better-sqlite3');
    for (const part of ['lib', 'package.json']) cpSync(join(ROOT, 'node_modules', 'better-sqlite3', part), join(bsq, part), { recursive: true });
    mkdirSync(join(bsq, 'build', 'Release'), { recursive: true });
    writeFileSync(join(dir, 'addon.c'), OTHER_ABI_ADDON);
    const addon = join(bsq, 'build', 'Release', 'better_sqlite3.node');
    // No compiler is a failure, not a skip: CI builds better-sqlite3 from source, so it has one.
    execFileSync('cc', ['-shared', '-fPIC', '-o', addon, join(dir, 'addon.c')]);
    try {
      process.dlopen({ exports: {} }, addon);
      throw new Error('the module built for NODE_MODULE_VERSION 999 loaded');
    } catch (e) {
      cause = (e as Error).message;
    }
    expect(cause).toContain('was compiled against a different Node.js version');
    expect(cause.split('\n').length).toBeGreaterThan(2);
    bin = join(dir, 'bin', 'onejob');
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every line of Node's message, in order, in `text` (joined by spaces on the CLI's one line, or indented in a banner). */
  const expectWholeCause = (text: string): void => {
    const lines = cause.split('\n').map((l) => l.trim());
    let from = 0;
    for (const line of lines) {
      const at = text.indexOf(line, from);
      expect(at, `missing "${line}" in: ${text}`).toBeGreaterThanOrEqual(0);
      from = at + line.length;
    }
  };

  if (nodeSqliteExpected()) {
    it('the demo runs on node:sqlite: the banner names it, with the whole cause and `npm rebuild better-sqlite3`; a job is served', async () => {
      const cwd = mkdtempSync(join(dir, 'demo-'));
      const child = spawn(process.execPath, [bin, 'serve', '--port', '0'], { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } });
      let err = '';
      try {
        const url = await new Promise<string>((ok, fail) => {
          const timer = setTimeout(() => fail(new Error(`no banner: ${err}`)), 60_000);
          child.stderr.on('data', (d: Buffer) => {
            err += String(d);
            const m = /at (http:\/\/127\.0\.0\.1:\d+)\n[\s\S]*please fail/.exec(err);
            if (m) {
              clearTimeout(timer);
              ok(m[1]!);
            }
          });
          child.on('exit', (code) => fail(new Error(`exited ${code}: ${err}`)));
        });
        expect(err).toContain('database:       sqlite:./onejob.db (SQLite on node:sqlite)');
        expectWholeCause(err);
        expect(err).toContain('`npm rebuild better-sqlite3` makes it the engine again');
        expect(err).not.toContain('ExperimentalWarning');
        const created = await fetch(`${url}/v1/jobs`, {
          method: 'POST',
          headers: { authorization: 'Bearer demo-token', 'idempotency-key': 'abi-1', 'content-type': 'application/json' },
          body: JSON.stringify({ route: 'demo', input: { messages: [{ role: 'user', content: 'hello' }] } }),
        });
        expect(created.status).toBe(201);
        const { id } = (await created.json()) as { id: string };
        const done = await fetch(`${url}/v1/jobs/${id}?wait=10`, { headers: { authorization: 'Bearer demo-token' } });
        expect(((await done.json()) as { state: string }).state).toBe('succeeded');
      } finally {
        child.kill('SIGTERM');
        await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(null)));
      }
    });

    it('ONEJOB_SQLITE_ENGINE=better-sqlite3 fails with one line: the whole cause and the fix', async () => {
      const r = await run(bin, ['migrate'], dir, { DATABASE_URL: `sqlite:${join(dir, 'forced.db')}`, ONEJOB_SQLITE_ENGINE: 'better-sqlite3' });
      expect(r.code, r.stderr).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^onejob: cannot open SQLite database .*forced\.db: better-sqlite3 could not be loaded by Node v/);
      expectWholeCause(lines[0]!);
      expect(lines[0]).toContain('run `npm rebuild better-sqlite3` with this Node');
    });
  } else {
    it('a sqlite: URL fails with one line: the whole cause, that this Node has no node:sqlite, and the fix', async () => {
      const r = await run(bin, ['migrate'], dir, { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` });
      expect(r.code, r.stderr).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^onejob: cannot open SQLite database .*x\.db: better-sqlite3 could not be loaded by Node v/);
      expectWholeCause(lines[0]!);
      expect(lines[0]).toContain('has no node:sqlite to fall back to');
      expect(lines[0]).toContain('run `npm rebuild better-sqlite3` with this Node');
    });
  }
});
