/**
 * better-sqlite3 is an optional dependency (STYLE §18): an install without
 * it (`npm install --omit=optional`) serves PostgreSQL, and a `sqlite:` URL
 * then runs on node:sqlite where this Node has it (22.13+, 24, 26), else
 * fails with one line that says what to install. The install is made
 * for real: a copy of the package whose node_modules holds every dependency
 * but better-sqlite3 (links to this checkout's), so the module cannot be
 * found from it, and `bin/onejob` is run from there.
 */
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeSqliteExpected } from '../../src/store/sqlite/sqlite-engine.ts';
import { freePort } from '../support/free-port.ts';
import { createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';

const ROOT = resolve(import.meta.dirname, '../..');

function run(bin: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [bin, ...args], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('an install without better-sqlite3 (npm install --omit=optional)', () => {
  let dir: string;
  let bin: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-no-sqlite-'));
    for (const part of ['src', 'bin', 'migrations', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
    mkdirSync(join(dir, 'node_modules'));
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (name === 'better-sqlite3' || name === '.bin' || name.startsWith('.')) continue;
      symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
    }
    bin = join(dir, 'bin', 'onejob');
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  if (nodeSqliteExpected()) {
    it('a sqlite: URL runs on node:sqlite (this Node has it): migrate applies, ONEJOB_SQLITE_ENGINE=better-sqlite3 says what to install', async () => {
      const r = await run(bin, ['migrate'], { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^0001_\w+: applied$/m);
      const forced = await run(bin, ['migrate'], { DATABASE_URL: `sqlite:${join(dir, 'y.db')}`, ONEJOB_SQLITE_ENGINE: 'better-sqlite3' });
      expect(forced.code, forced.stderr).not.toBe(0);
      expect(forced.stderr).toMatch(/^onejob: .*needs the optional dependency better-sqlite3, which is not installed.*npm install better-sqlite3/);
    });
  } else {
    it('a sqlite: URL fails with one line naming the missing module and what to do', async () => {
      const r = await run(bin, ['migrate'], { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` });
      expect(r.code, r.stderr).not.toBe(0);
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^onejob: .*needs the optional dependency better-sqlite3, which is not installed.*npm install better-sqlite3/);
    });
  }

  it.skipIf(postgresSkipReason() !== null)('PostgreSQL is served: migrate, then serve answers /readyz 200', async () => {
    const db = await createPostgresDatabase();
    try {
      const migrated = await run(bin, ['migrate'], { DATABASE_URL: db.url });
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.stdout).toMatch(/^0001_\w+: applied$/m);
      const port = await freePort();
      const child = spawn(process.execPath, [bin, 'serve', '--port', String(port), '--host', '127.0.0.1'], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: db.url, ONEJOB_API_KEYS: 'tok_x=alice', LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      try {
        let status = 0;
        for (let i = 0; i < 150 && status !== 200; i++) {
          await new Promise((r) => setTimeout(r, 200));
          status = await fetch(`http://127.0.0.1:${port}/readyz`).then((res) => res.status, () => 0);
        }
        expect(status, stderr).toBe(200);
      } finally {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    } finally {
      await db.drop();
    }
  });
});
