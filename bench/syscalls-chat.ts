/**
 * `node --import tsx bench/syscalls-chat.ts [--engine postgres|sqlite] [--n 4000] [--connections 32] [--path chat|jobs]`
 *
 * System calls per request of the onejob server process (all its threads),
 * under the bench's chat load: the server and the fake provider as
 * bench/cpu-chat.ts starts them, a warm-up, then `strace -f -c` attached to
 * the server for exactly `--n` requests (autocannon's `amount`). Prints the
 * calls per request by system call. Socket writes (`writev`, `write`) are the
 * largest item of the chat path's profile (docs/performance.md §17): each is
 * a loopback delivery to its reader, paid in the writer's time.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { runAutocannon } from './lib/autocannon.ts';
import { BENCH_DIR, ROOT_DIR, argMap, startServer } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';

const args = argMap(process.argv.slice(2));
const ENGINE = String(args.engine ?? 'postgres');
const N = Number(args.n ?? 4000);
const CONNECTIONS = Number(args.connections ?? 32);
const JOBS = args.path === 'jobs';
const ROOT = String(args.root ?? ROOT_DIR);
const MESSAGES = [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }];
const BODY = JSON.stringify(JOBS ? { route: 'summarize', input: { messages: MESSAGES } } : { model: 'summarize', messages: MESSAGES });
const PATH = JOBS ? '/v1/jobs' : '/v1/chat/completions';

const fake = await startServer<{ url: string }>(resolve(BENCH_DIR, 'workers', 'fake-provider.ts'), ['--forget']);
const dbName = 'onejob_bench_syscalls';
const db = ENGINE === 'postgres' ? await recreateDatabase(dbName) : `sqlite:${resolve(BENCH_DIR, '.scratch', 'syscalls.db')}`;
if (ENGINE !== 'postgres') for (const s of ['', '-wal', '-shm']) rmSync(resolve(BENCH_DIR, '.scratch', `syscalls.db${s}`), { force: true });
const server = await startServer<{ url: string; pid: number }>(resolve(ROOT, 'bench', 'workers', 'onejob-server.ts'),
  ['--db', db, '--provider-url', fake.info.url, ...(JOBS ? [] : ['--executor']), '--pool', '10'], {}, { cwd: ROOT });
const load = (amount: number, tag: string) => runAutocannon({
  url: `${server.info.url}${PATH}`, connections: CONNECTIONS, seconds: 60, amount, method: 'POST',
  headers: { authorization: 'Bearer tok_bench', 'content-type': 'application/json', 'idempotency-key': `${tag}-[<id>]` }, body: BODY, idReplacement: true,
});
try {
  await load(3000, 'warm');
  const strace = spawn('strace', ['-f', '-c', '-U', 'name,calls', '-p', String(server.child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let out = '';
  strace.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  await new Promise((r) => setTimeout(r, 1000));
  const s = await load(N, 'count');
  strace.kill('SIGINT');
  await new Promise((r) => strace.once('close', r));
  const answered = s.answered2xx;
  console.log(`${ENGINE} ${PATH}: ${answered} requests answered 2xx (${s.non2xx} other), ${CONNECTIONS} connections; system calls per request:`);
  const rows = [...out.matchAll(/^\s*(\w+)\s+(\d+)\s*$/gm)].map((m) => [m[1]!, Number(m[2])] as const).filter(([n]) => n !== 'total');
  rows.sort((a, b) => b[1] - a[1]);
  for (const [name, calls] of rows.slice(0, 14)) console.log(`  ${name.padEnd(16)} ${(calls / answered).toFixed(2)}`);
  const total = rows.reduce((a, [, c]) => a + c, 0);
  console.log(`  ${'all'.padEnd(16)} ${(total / answered).toFixed(2)}`);
} finally {
  await server.stop();
  await fake.stop();
  if (ENGINE === 'postgres') await dropDatabase(dbName);
}
process.exit(0);
