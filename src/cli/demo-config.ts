/**
 * The demo that `npm start` serves when there is no config at all: two
 * fake providers behind one route, so a new user sees a job, a timeout
 * becoming unknown and then resolved by asking the provider, and a failover
 * within a minute.
 */
import { DEFAULT_IDLE_TIMEOUT_MS, type OnejobConfig } from '../config/config.ts';
import type { FakeScript } from '../providers/fake/fake-behaviour.ts';
import type { FakeProvider } from '../providers/fake/fake-provider-server.ts';
import { redactCredentials as redact } from '../core/redact-credentials.ts';
import type { SqliteEngineInUse } from '../store/sqlite/sqlite-engine.ts';

/** The demo's API token (owner `demo`). */
export const DEMO_TOKEN = 'demo-token';

/** Whether `config` configures nothing to call (no file, no providers, no routes). */
export function isUnconfigured(config: OnejobConfig): boolean {
  return config.configPath === null && Object.keys(config.providers).length === 0 && Object.keys(config.routes).length === 0;
}

/** How long the demo's primary works on a request that says "hang": past its 3 s deadline, so the attempt becomes `unknown`. */
export const DEMO_HANG_RUN_MS = 5_000;

/**
 * The script of the demo's primary, a fake OpenAI Responses API (background
 * mode) that {@link startDemoPrimary} serves: it answers in 200 ms; a request
 * that says "hang" loses its answer (the stream is cut after the response's
 * id, and so is every resume: `loseAnswer`) and runs {@link DEMO_HANG_RUN_MS}
 * upstream, past the 3 s deadline, so the attempt becomes `unknown`; the
 * reconciler's lookup, `GET /v1/responses/{id}`, then finds it completed
 * and the job succeeds (resolved by `lookup`, not by its own late answer);
 * one that says "fail" is answered 503 (overloaded: a definite failure).
 * A request with tools gets a tool call, one with a JSON schema JSON that
 * fits it (`fitRequest`).
 */
export const DEMO_PRIMARY_SCRIPT: FakeScript = {
  rules: [
    { match: { contains: 'hang' }, behaviour: { task: { runMs: DEMO_HANG_RUN_MS }, loseAnswer: true, fitRequest: true } },
    { match: { contains: 'fail' }, behaviour: { status: 503 } },
  ],
  default: { delayMs: 200, task: { runMs: 200 }, fitRequest: true },
};

/** Starts the demo's primary upstream: onejob's fake server, whose Responses API the primary calls (close it on shutdown). */
export async function startDemoPrimary(): Promise<FakeProvider> {
  // Loaded here: no other command needs the fake server.
  const { startFakeProvider } = await import('../providers/fake/fake-provider-server.ts');
  return startFakeProvider({ script: DEMO_PRIMARY_SCRIPT });
}

/**
 * `config` plus the demo route `demo` on providers `primary` and `fallback`.
 * The primary is an `openai-responses` provider (background mode, so every
 * attempt can be asked about: CONTRACT §11) calling the fake Responses API
 * at `primaryBaseUrl` ({@link startDemoPrimary}); the fallback an embedded
 * fake speaking the Anthropic protocol, which always answers. Both have
 * prices, so usage and spend are not $0.
 */
export function withDemo(config: OnejobConfig, primaryBaseUrl: string): OnejobConfig {
  return {
    ...config,
    apiKeys: Object.keys(config.apiKeys).length > 0 ? config.apiKeys : { [DEMO_TOKEN]: 'demo' },
    providers: {
      primary: {
        type: 'openai-responses', baseUrl: primaryBaseUrl, model: 'demo-primary', apiKey: null, timeoutMs: 3000, idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: 60_000,
        // Prices of a mid-size model, so that the dashboard's Spend page shows what a day of calls costs.
        pricing: { inputPerMTok: 2.5, outputPerMTok: 10 },
      },
      fallback: {
        type: 'fake', protocol: 'anthropic', model: 'demo-fallback', apiKey: null, timeoutMs: 3000, idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: null,
        pricing: { inputPerMTok: 3, outputPerMTok: 15 },
        script: { default: { delayMs: 100, fitRequest: true } },
      },
    },
    routes: { demo: { providers: ['primary', 'fallback'], hedgeAfterMs: null, contract: null } },
  };
}

/** The database the demo runs on, for its banner. */
export interface DemoDatabase {
  readonly databaseUrl: string;
  /** The SQLite library in use (null: not SQLite). */
  readonly sqliteEngine: SqliteEngineInUse | null;
}

/** The banner's database line(s): the URL and, on SQLite, the library and why when it is the fallback. */
function databaseLines(db: DemoDatabase | undefined): string[] {
  if (db === undefined) return [];
  const url = redact(db.databaseUrl);
  if (db.sqliteEngine === null) return [`  database:       ${url}`];
  const lines = [`  database:       ${url} (SQLite on ${db.sqliteEngine.name})`];
  // The whole cause, every line of it (a native module's says why in its later lines), indented under the URL.
  for (const line of db.sqliteEngine.fallbackReason?.split('\n') ?? []) lines.push(`                  ${line.trim()}`);
  return lines;
}

/** What `serve` prints in demo mode once listening. */
export function demoBanner(url: string, token: string, db?: DemoDatabase): string[] {
  const auth = `-H 'Authorization: Bearer ${token}'`;
  return [
    '',
    `onejob demo: no config found, serving route "demo" on two embedded fake providers at ${url}`,
    '',
    `  dashboard:      ${url}/ui/  (sign in with the token ${token})`,
    ...databaseLines(db),
    `  OpenAI SDK:     new OpenAI({ baseURL: '${url}/v1', apiKey: '${token}', fetch: intentFetch() }), model 'demo'`,
    `  Anthropic SDK:  new Anthropic({ baseURL: '${url}', apiKey: '${token}', fetch: intentFetch() }), model 'demo'`,
    "                  (import { intentFetch } from 'onejob/client': one Idempotency-Key per call, kept across the SDK's retries)",
    '  (the fakes answer a request with tools with a tool call, one with a JSON schema with JSON that fits it)',
    '',
    '  # a job (the primary answers in 200 ms):',
    `  curl -s ${url}/v1/jobs ${auth} -H 'Idempotency-Key: demo-1' -H 'Content-Type: application/json' \\`,
    `    -d '{"route":"demo","input":{"messages":[{"role":"user","content":"hello"}]}}'`,
    `  curl -s '${url}/v1/jobs/<id>?wait=10' ${auth}`,
    '',
    '  # a timeout becomes unknown (content "hang": the primary loses its answer and works 5 s, its deadline is 3 s); it speaks the',
    '  # Responses API in background mode, so onejob asks it what became of the request and the job succeeds by lookup:',
    `  curl -s ${url}/v1/jobs ${auth} -H 'Idempotency-Key: demo-2' -H 'Content-Type: application/json' \\`,
    `    -d '{"route":"demo","input":{"messages":[{"role":"user","content":"please hang"}]}}'`,
    `  curl -s '${url}/v1/jobs/<id>?wait=10' ${auth}   # "unknown"; a few seconds later "succeeded", resolved_by "lookup"`,
    '  # (a plain "openai" provider has nothing to ask: its unknown waits for a person, POST /v1/attempts/<id>/resolve)',
    '',
    '  # a definite failure (content "fail", a 503) fails over by itself:',
    `  curl -s ${url}/v1/jobs ${auth} -H 'Idempotency-Key: demo-3' -H 'Content-Type: application/json' \\`,
    `    -d '{"route":"demo","input":{"messages":[{"role":"user","content":"please fail"}]}}'`,
    '',
  ];
}
