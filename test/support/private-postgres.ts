/**
 * A private PostgreSQL server for tests that must stop the database: its own
 * data directory in a temp folder, its own free port, started and stopped
 * with `pg_ctl`. The shared server at 5432 is never touched.
 *
 * As root, `initdb`/`pg_ctl` run as the `postgres` user (`runuser`), which
 * owns the folder; as anyone else, as that user.
 */
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.ts';

const run = promisify(execFile);
const BIN = process.env.ONEJOB_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';

/** A running private server. */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  readonly port: number;
  /** Stops the server (`-m fast`: open connections are terminated, 57P01). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  /** Stops it (if running) and removes its folder. */
  destroy(): Promise<void>;
}

/** Runs a PostgreSQL program, as `postgres` when we are root. */
async function pgRun(program: string, args: string[]): Promise<void> {
  const isRoot = process.getuid?.() === 0;
  const [cmd, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', join(BIN, program), ...args]] : [join(BIN, program), args];
  await run(cmd, argv, { timeout: 60_000 });
}

/**
 * Creates and starts a fresh server (fsync off: it is thrown away).
 *
 * @example const pg = await startPrivatePostgres(); await pg.stop(); await pg.start(); await pg.destroy();
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-pg-'));
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const data = join(dir, 'data');
  const port = await freePort();
  await pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  let running = false;
  const start = async (): Promise<void> => {
    await pgRun('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start']);
    running = true;
  };
  const stop = async (): Promise<void> => {
    if (!running) return;
    await pgRun('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
    running = false;
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop,
    start,
    async destroy() {
      await stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
