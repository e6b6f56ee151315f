/**
 * A real `onejob serve` (bin/onejob, a child process) on a fresh database of
 * one test engine, with fake providers started in the test process: the
 * client's tests talk to it over HTTP exactly as an application would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startFakeProvider, type FakeProvider } from '../../src/testing/index.ts';
import type { TestDatabase } from '../support/databases.ts';

const BIN = resolve(import.meta.dirname, '../../bin/onejob');

/** The owner's token of the test server. */
export const TOKEN = 'tok_client_0123456789';
/** Another owner's token. */
export const OTHER_TOKEN = 'tok_other_0123456789';

/** A running server and its providers. */
export interface OnejobServe {
  readonly url: string;
  /** `summarize` route: primary (deadline 20 s) → fallback. */
  readonly primary: FakeProvider;
  /** `doubtful` route: flaky (deadline `flakyTimeoutMs`) → fallback. */
  readonly flaky: FakeProvider;
  readonly fallback: FakeProvider;
  /** Forgets every fake's script and calls. */
  resetFakes(): void;
  close(): Promise<void>;
}

/** Options of {@link startOnejobServe}. */
export interface StartOnejobServeOptions {
  /** The server's `chatMaxWaitMs`. Default 1000. */
  readonly chatMaxWaitMs?: number;
  /** The `flaky` provider's deadline. Default 800. */
  readonly flakyTimeoutMs?: number;
}

/** Starts fakes, writes a config, spawns `bin/onejob serve --port 0` and waits for its listen line. */
export async function startOnejobServe(db: TestDatabase, options: StartOnejobServeOptions = {}): Promise<OnejobServe> {
  const database = await db.create();
  const [primary, flaky, fallback] = await Promise.all([startFakeProvider(), startFakeProvider(), startFakeProvider()]);
  const dir = mkdtempSync(join(tmpdir(), 'onejob-client-'));
  const configPath = join(dir, 'onejob.config.json');
  writeFileSync(configPath, JSON.stringify({
    apiKeys: { [TOKEN]: 'client', [OTHER_TOKEN]: 'other' },
    chatMaxWaitMs: options.chatMaxWaitMs ?? 1000,
    providers: {
      primary: { type: 'openai', baseUrl: `${primary.url}/v1`, model: 'primary-model', timeoutMs: 20_000 },
      flaky: { type: 'openai', baseUrl: `${flaky.url}/v1`, model: 'flaky-model', timeoutMs: options.flakyTimeoutMs ?? 800 },
      fallback: { type: 'anthropic', baseUrl: fallback.url, model: 'fallback-model', timeoutMs: 20_000 },
    },
    routes: {
      summarize: { providers: ['primary', 'fallback'] },
      doubtful: { providers: ['flaky', 'fallback'] },
    },
  }));
  let child: ChildProcess | null = null;
  const stop = async (): Promise<void> => {
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((ok) => child!.once('exit', ok));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child?.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await Promise.all([primary.close(), flaky.close(), fallback.close()]);
    await database.cleanup();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    child = spawn(process.execPath, [BIN, 'serve', '--config', configPath, '--host', '127.0.0.1', '--port', '0'], {
      env: { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const url = await listenUrl(child);
    return {
      url, primary, flaky, fallback,
      resetFakes() {
        primary.reset();
        flaky.reset();
        fallback.reset();
      },
      close: stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Resolves with the URL of Fastify's "Server listening at" line. */
export function listenUrl(child: ChildProcess, timeoutMs = 30_000): Promise<string> {
  return new Promise((ok, fail) => {
    let out = '';
    const onData = (d: Buffer): void => {
      out += String(d);
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        ok(m[1]!);
      }
    };
    const timer = setTimeout(() => fail(new Error(`onejob serve did not listen within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d) => (out += String(d)));
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`onejob serve exited (${code}) before listening:\n${out}`));
    });
  });
}
