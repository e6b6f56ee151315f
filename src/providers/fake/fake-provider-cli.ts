/**
 * `onejob fake-provider`: runs the fake provider server as its own process
 * until SIGTERM or SIGINT, for chaos tests and for trying onejob by hand.
 *
 * The first line on stdout is the server's URL and nothing else, so a parent
 * process can read it (useful with `--port 0`). Hints go to stderr.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseFakeScript, type FakeScript } from './fake-behaviour.ts';
import { startFakeProvider } from './fake-provider-server.ts';

/** The port `onejob fake-provider` listens on by default. */
export const FAKE_PROVIDER_DEFAULT_PORT = 4010;

/** Where the CLI writes, and what stops it; defaults are the process's. */
export interface FakeProviderCliIo {
  readonly stdout?: ((line: string) => void) | undefined;
  readonly stderr?: ((line: string) => void) | undefined;
  /** Stops the server when aborted (besides SIGTERM and SIGINT). */
  readonly signal?: AbortSignal | undefined;
}

const USAGE = `usage: onejob fake-provider [--port N] [--host H] [--script FILE.json] [--api-key KEY] [--unique-ids]
                             [--ignore-lookup-filter] [--task-callback-url URL --task-callback-secret S]

Serves the OpenAI (POST /v1/chat/completions) and Anthropic (POST /v1/messages)
wire protocols with scripted behaviour; GET /calls lists what it received,
POST /script adds behaviours, POST /release opens a gate, POST /reset clears.
--port defaults to ${FAKE_PROVIDER_DEFAULT_PORT} (0 picks a free port). --unique-ids puts a token of this
start into response and task ids, so a fake restarted after a kill never hands out an id it gave before.
--ignore-lookup-filter lists every stored completion on GET /v1/chat/completions, whatever its
metadata[…] filter (as several OpenAI-compatible servers do). --task-callback-url (with {attempt}) and
--task-callback-secret make tasks call back when they end, signed Onejob-Signature t=…,v1=….`;

/**
 * Runs the fake provider until SIGTERM/SIGINT (or `io.signal`); resolves with the exit code.
 *
 * @example process.exitCode = await runFakeProviderCli(['--port', '4010', '--script', 'script.json']);
 */
export async function runFakeProviderCli(argv: readonly string[], io: FakeProviderCliIo = {}): Promise<number> {
  const out = io.stdout ?? ((line: string) => process.stdout.write(`${line}\n`));
  const err = io.stderr ?? ((line: string) => process.stderr.write(`${line}\n`));

  let values: { port?: string; host?: string; script?: string; 'api-key'?: string; 'unique-ids'?: boolean; 'ignore-lookup-filter'?: boolean; 'task-callback-url'?: string; 'task-callback-secret'?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        script: { type: 'string' },
        'api-key': { type: 'string' },
        'unique-ids': { type: 'boolean' },
        'ignore-lookup-filter': { type: 'boolean' },
        'task-callback-url': { type: 'string' },
        'task-callback-secret': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    err(`onejob fake-provider: ${(e as Error).message}`);
    return 2;
  }
  if (values.help === true) {
    out(USAGE);
    return 0;
  }
  if ((values['task-callback-url'] === undefined) !== (values['task-callback-secret'] === undefined)) {
    err('onejob fake-provider: --task-callback-url and --task-callback-secret go together');
    return 2;
  }
  const port = values.port === undefined ? FAKE_PROVIDER_DEFAULT_PORT : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    err(`onejob fake-provider: --port must be an integer from 0 to 65535 (got ${JSON.stringify(values.port)})`);
    return 2;
  }

  let script: FakeScript | undefined;
  if (values.script !== undefined) {
    try {
      script = parseFakeScript(JSON.parse(await readFile(values.script, 'utf8')), values.script);
    } catch (e) {
      err(`onejob fake-provider: cannot use --script ${values.script}: ${(e as Error).message}`);
      return 2;
    }
  }

  let fake;
  try {
    fake = await startFakeProvider({
      port,
      host: values.host ?? '127.0.0.1',
      ...(script === undefined ? {} : { script }),
      ...(values['api-key'] === undefined ? {} : { apiKey: values['api-key'] }),
      ...(values['unique-ids'] === true ? { uniqueIds: true } : {}),
      ...(values['ignore-lookup-filter'] === true ? { ignoreLookupFilter: true } : {}),
      ...(values['task-callback-url'] === undefined ? {} : { taskCallback: { url: values['task-callback-url'], secret: values['task-callback-secret']! } }),
    });
  } catch (e) {
    err(`onejob fake-provider: cannot listen on ${values.host ?? '127.0.0.1'}:${port}: ${(e as Error).message}`);
    return 1;
  }

  out(fake.url);
  err(`fake provider listening: OpenAI baseUrl ${fake.url}/v1, Anthropic baseUrl ${fake.url}; calls at ${fake.url}/calls. Stop with Ctrl-C.`);

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      io.signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    if (io.signal?.aborted === true) stop();
    else io.signal?.addEventListener('abort', stop, { once: true });
  });
  await fake.close();
  return 0;
}
