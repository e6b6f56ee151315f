#!/usr/bin/env node
/**
 * Starts `bin/onejob serve` (the demo config, a fresh SQLite file) and exits
 * once GET /healthz answers 200: the time this script takes is the CLI's
 * time to first 200. Run under hyperfine, e.g.
 * `hyperfine 'node scripts/time-to-first-200.mjs'` (see docs/packaging.md).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// ONEJOB_BIN names another entry point to time (e.g. an older bin/onejob).
const bin = process.env.ONEJOB_BIN ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'onejob');
const port = await new Promise((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const dir = mkdtempSync(join(tmpdir(), 'onejob-first-200-'));
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'onejob.db')}`, LOG_LEVEL: 'warn' };
delete env.ONEJOB_CONFIG;
const child = spawn(process.execPath, [bin, 'serve', '--port', String(port), '--host', '127.0.0.1'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
let stderr = '';
child.stderr.on('data', (d) => (stderr += d));
let exited = false;
child.on('exit', () => (exited = true));
const deadline = Date.now() + 30_000;
let ok = false;
while (!ok && !exited && Date.now() < deadline) {
  ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status === 200, () => false);
  if (!ok) await new Promise((r) => setTimeout(r, 5));
}
child.kill('SIGTERM');
await new Promise((r) => (exited ? r() : child.on('exit', r)));
rmSync(dir, { recursive: true, force: true });
if (!ok) {
  process.stderr.write(`serve did not answer 200 on /healthz\n${stderr}`);
  process.exit(1);
}
