/**
 * Child processes of the benchmark: servers that print one `READY <json>`
 * line when listening, and load workers that print one `RESULT <json>` line.
 * Every side of a comparison runs in its own process so the two cores are
 * shared the same way on both sides.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT_DIR = resolve(BENCH_DIR, '..');
/** The tsx loader, so workers written in TypeScript run under plain `node`. */
const TSX_IMPORT = ['--import', 'tsx'];

/** A started child with its announced data. */
export interface Started<T> {
  readonly child: ChildProcess;
  readonly info: T;
  /** SIGTERM, then SIGKILL after 3 s; resolves when it exited. */
  stop(): Promise<void>;
}

function waitForLine(child: ChildProcess, prefix: string, label: string, timeoutMs: number): Promise<unknown> {
  return new Promise((resolvePromise, reject) => {
    const stderr: string[] = [];
    child.stderr?.on('data', (d: Buffer) => {
      stderr.push(d.toString());
      if (stderr.length > 50) stderr.shift();
      if (process.env.BENCH_VERBOSE) process.stderr.write(`[${label} stderr] ${d.toString()}`);
    });
    const rl = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => {
      reject(new Error(`${label}: no ${prefix} line within ${timeoutMs} ms\n${stderr.join('')}`));
    }, timeoutMs);
    rl.on('line', (line) => {
      if (process.env.BENCH_VERBOSE) process.stderr.write(`[${label}] ${line}\n`);
      if (!line.startsWith(prefix + ' ')) return;
      clearTimeout(timer);
      try {
        resolvePromise(JSON.parse(line.slice(prefix.length + 1)));
      } catch (e) {
        reject(e);
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited (${code ?? signal}) before ${prefix}\n${stderr.join('')}`));
    });
  });
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise<void>((res) => {
      if (child.exitCode !== null || child.signalCode !== null) return res();
      const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
      child.once('exit', () => {
        clearTimeout(kill);
        res();
      });
      child.kill('SIGTERM');
    });
}

/**
 * Spawns `node [--import tsx] script args…` and waits for its `READY` line;
 * `opts.node` runs it on another Node binary (the Restate peer's service needs Node 22+).
 */
export async function startServer<T>(script: string, args: readonly string[], env: Record<string, string> = {}, opts: { tsx?: boolean; nodeArgs?: string[]; cwd?: string; node?: string } = {}): Promise<Started<T>> {
  const nodeArgs = [...(opts.tsx === false ? [] : TSX_IMPORT), ...(opts.nodeArgs ?? [])];
  const child = spawn(opts.node ?? process.execPath, [...nodeArgs, script, ...args], {
    cwd: opts.cwd ?? ROOT_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const info = (await waitForLine(child, 'READY', script.split('/').pop()!, 60_000).catch(async (e) => {
    child.kill('SIGKILL');
    throw e;
  })) as T;
  return { child, info, stop: stopper(child) };
}

/** Runs a worker script to completion and returns its `RESULT` JSON. */
export async function runWorker<T>(script: string, args: readonly string[], env: Record<string, string> = {}, timeoutMs = 300_000): Promise<T> {
  const child = spawn(process.execPath, [...TSX_IMPORT, script, ...args], {
    cwd: ROOT_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    return (await waitForLine(child, 'RESULT', script.split('/').pop()!, timeoutMs)) as T;
  } finally {
    await stopper(child)();
  }
}

/** Runs any command to completion; resolves with stdout, rejects with stderr on a non-zero exit. */
export function runCommand(cmd: string, args: readonly string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<string> {
  return new Promise((res, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? ROOT_DIR, env: { ...process.env, ...(opts.env ?? {}) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? res(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}\n${err.slice(-2000)}`))));
  });
}

/** Prints `RESULT <json>` (for workers) and exits. */
export function emitResult(value: unknown): void {
  process.stdout.write(`RESULT ${JSON.stringify(value)}\n`, () => process.exit(0));
}

/** Prints `READY <json>` (for servers). */
export function emitReady(value: unknown): void {
  process.stdout.write(`READY ${JSON.stringify(value)}\n`);
}

/** Parses `--name value` pairs of a worker's argv. */
export function argMap(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith('--')) {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) out[a.slice(2)] = 'true';
      else {
        out[a.slice(2)] = next;
        i++;
      }
    }
  }
  return out;
}
