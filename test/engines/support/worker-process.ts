/**
 * A worker of a durable engine as its own process, for the crash tests of
 * test/engines/: started with a TypeScript file (through tsx), read as JSON
 * lines on stdout (one event each), killed with SIGKILL like a crash.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../../..');

/** One line the worker wrote. */
export type WorkerEvent = Record<string, unknown> & { readonly event: string };

/** A running worker. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly events: readonly WorkerEvent[];
  /** Resolves with the `n`th (1-based) event named `name`; rejects when the process exits first or after `timeoutMs`. */
  waitFor(name: string, n?: number, timeoutMs?: number): Promise<WorkerEvent>;
  /** SIGKILL, and waits for the exit. */
  kill9(): Promise<void>;
  /** Resolves with the exit code (or signal) once the process ended. */
  readonly exited: Promise<number | string>;
  /** What the process wrote on stderr (and stdout lines that are not events). */
  output(): string;
}

/** Starts `node [--import tsx] <file>` with `env` added to the test's environment. */
export function startWorker(file: string, env: Record<string, string>, options: { readonly node?: string } = {}): WorkerProcess {
  const child = spawn(options.node ?? process.execPath, ['--import', 'tsx', resolve(ROOT, file)], {
    cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: WorkerEvent[] = [];
  let other = '';
  let waiters: (() => void)[] = [];
  const wake = (): void => {
    const list = waiters;
    waiters = [];
    for (const w of list) w();
  };
  let buffer = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += String(d);
    for (let i = buffer.indexOf('\n'); i >= 0; i = buffer.indexOf('\n')) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      try {
        const parsed = JSON.parse(line) as WorkerEvent;
        if (parsed !== null && typeof parsed.event === 'string') events.push(parsed);
        else other += `${line}\n`;
      } catch {
        other += `${line}\n`;
      }
    }
    wake();
  });
  child.stderr!.on('data', (d: Buffer) => (other += String(d)));
  let ended = false;
  const exited = new Promise<number | string>((ok) => child.once('exit', (code, signal) => {
    ended = true;
    wake();
    ok(code ?? signal ?? 'unknown');
  }));
  return {
    child, events, exited,
    output: () => other,
    waitFor(name, n = 1, timeoutMs = 90_000) {
      const started = Date.now();
      return new Promise((ok, fail) => {
        const check = (): void => {
          const found = events.filter((e) => e.event === name)[n - 1];
          if (found !== undefined) return ok(found);
          if (ended) return fail(new Error(`${file} exited before event ${name} #${n}; events ${JSON.stringify(events)}; output:\n${other}`));
          if (Date.now() - started > timeoutMs) return fail(new Error(`${file}: no event ${name} #${n} within ${timeoutMs} ms; events ${JSON.stringify(events)}; output:\n${other}`));
          waiters.push(check);
          setTimeout(wake, 250);
        };
        check();
      });
    },
    async kill9() {
      if (!ended) child.kill('SIGKILL');
      await exited;
    },
  };
}
