/**
 * Runs the example with one command (`npm run example`): two fake providers
 * (the primary's first call stalls past its deadline; the fallback answers),
 * `onejob serve` on them with a fresh SQLite database, and the page, built
 * by Vite and served with `/v1` forwarded to onejob (the proxy adds the API
 * token, as an application's own backend would).
 *
 *   npm run example            # then open the URL it prints
 *   PORT=5180 npm run example
 *
 * The browser tests (test/client/browser.test.ts) start it the same way,
 * through {@link startSummarizeExample}.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, preview } from 'vite';
import { startFakeProvider, type FakeProvider, type FakeScript } from '../../src/testing/index.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/onejob', import.meta.url));

/** The API token the page's proxy sends (owner `example`). */
export const EXAMPLE_TOKEN = 'example-token-0123456789';

/** The primary's script for a person trying the page: the first call stalls past the 5 s deadline, later ones answer. */
export const PRIMARY_SCRIPT: FakeScript = {
  queue: [{ hang: true }],
  default: { delayMs: 800, reply: 'A fox jumps over a dog, who goes back to sleep. (primary)' },
};
/** The fallback's script: it answers. */
export const FALLBACK_SCRIPT: FakeScript = {
  default: { delayMs: 400, reply: 'A quick fox leaps a lazy dog; the dog sleeps on. (fallback)' },
};

/** The storyteller's script: a streamed answer, a word every 300 ms, so a reload mid-answer is easy to try. */
export const STORYTELLER_SCRIPT: FakeScript = {
  default: {
    chunks: 'Once upon a time a fox jumped over a dog. The dog did not mind: it was asleep, and it stayed asleep, and the fox went home. The end.'
      .split(/(?<= )/),
    chunkDelayMs: 300,
  },
};

/** Options of {@link startSummarizeExample}. */
export interface StartSummarizeExampleOptions {
  /** The page's port. Default 0 (a free one). */
  readonly port?: number;
  /** The primary's deadline (past it an attempt is `unknown`). Default 5000 ms. */
  readonly primaryTimeoutMs?: number;
  /** Initial scripts. Default {@link PRIMARY_SCRIPT} and {@link FALLBACK_SCRIPT}. */
  readonly primaryScript?: FakeScript;
  readonly fallbackScript?: FakeScript;
}

/** A running example. */
export interface SummarizeExample {
  /** The page. */
  readonly url: string;
  /** onejob itself. */
  readonly onejobUrl: string;
  readonly token: string;
  readonly primary: FakeProvider;
  readonly fallback: FakeProvider;
  close(): Promise<void>;
}

/** Starts the fakes, `onejob serve` and the page; see the module comment. */
export async function startSummarizeExample(options: StartSummarizeExampleOptions = {}): Promise<SummarizeExample> {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-example-'));
  const primary = await startFakeProvider({ script: options.primaryScript ?? PRIMARY_SCRIPT });
  const fallback = await startFakeProvider({ script: options.fallbackScript ?? FALLBACK_SCRIPT });
  const storyteller = await startFakeProvider({ script: STORYTELLER_SCRIPT });
  let child: ChildProcess | null = null;
  let page: Awaited<ReturnType<typeof preview>> | null = null;
  const close = async (): Promise<void> => {
    await page?.close();
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((ok) => child!.once('exit', ok));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child?.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await Promise.all([primary.close(), fallback.close(), storyteller.close()]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const configPath = join(dir, 'onejob.config.json');
    writeFileSync(configPath, JSON.stringify({
      database: `sqlite:${join(dir, 'onejob.db')}`,
      apiKeys: { [EXAMPLE_TOKEN]: 'example' },
      providers: {
        primary: { type: 'openai', baseUrl: `${primary.url}/v1`, model: 'primary-model', timeoutMs: options.primaryTimeoutMs ?? 5000 },
        fallback: { type: 'anthropic', baseUrl: fallback.url, model: 'fallback-model', timeoutMs: 20_000 },
        storyteller: { type: 'openai', baseUrl: `${storyteller.url}/v1`, model: 'story-model', timeoutMs: 60_000 },
      },
      routes: {
        summarize: { providers: ['primary', 'fallback'], hedgeAfterMs: null, contract: null },
        story: { providers: ['storyteller'], hedgeAfterMs: null, contract: null },
      },
    }, null, 2));
    const env = { ...process.env };
    delete env.DATABASE_URL; // the config's database, not the caller's
    child = spawn(process.execPath, [BIN, 'serve', '--config', configPath, '--host', '127.0.0.1', '--port', '0'], {
      env: { ...env, LOG_LEVEL: env.LOG_LEVEL ?? 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const onejobUrl = await listenUrl(child);

    const outDir = join(dir, 'dist');
    const configFile = join(HERE, 'vite.config.ts');
    await build({ configFile, build: { outDir } });
    const proxy = { '/v1': { target: onejobUrl, headers: { authorization: `Bearer ${EXAMPLE_TOKEN}` } } };
    page = await preview({ configFile, build: { outDir }, preview: { host: '127.0.0.1', port: options.port ?? 0, strictPort: true, proxy } });
    const url = page.resolvedUrls?.local[0]?.replace(/\/$/, '');
    if (url === undefined) throw new Error('the page server reports no URL');
    return { url, onejobUrl, token: EXAMPLE_TOKEN, primary, fallback, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Resolves with the URL of Fastify's "Server listening at" line of a spawned `onejob serve`. */
function listenUrl(child: ChildProcess, timeoutMs = 30_000): Promise<string> {
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

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const example = await startSummarizeExample({ port: Number(process.env.PORT ?? 5173) });
  process.stdout.write([
    '',
    `  onejob example "summarize": open ${example.url}`,
    '',
    '  1. Click "Summarize": the primary provider stalls (it will not answer this first call).',
    '     Click again, as often as you like; reload the page: still one job, one key.',
    `  2. After 5 s the attempt is in doubt: click "Try the fallback".`,
    '  3. The job ends with two attempts: primary (cancelled), fallback (succeeded).',
    '',
    `  onejob: ${example.onejobUrl} (token ${example.token}); Ctrl-C stops everything.`,
    '',
  ].join('\n'));
  const stop = (): void => void example.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
