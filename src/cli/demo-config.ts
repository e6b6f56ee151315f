/**
 * The demo that `npm start` serves when there is no config at all: two
 * embedded fake providers behind one route, so a new user sees a job, a
 * timeout becoming unknown, a resolve and a failover within a minute.
 */
import { DEFAULT_IDLE_TIMEOUT_MS, type OnejobConfig } from '../config/config.ts';
import { redactCredentials as redact } from '../core/redact-credentials.ts';
import type { SqliteEngineInUse } from '../store/sqlite/sqlite-engine.ts';

/** The demo's API token (owner `demo`). */
export const DEMO_TOKEN = 'demo-token';

/** Whether `config` configures nothing to call (no file, no providers, no routes). */
export function isUnconfigured(config: OnejobConfig): boolean {
  return config.configPath === null && Object.keys(config.providers).length === 0 && Object.keys(config.routes).length === 0;
}

/**
 * `config` plus the demo route `demo` on providers `primary` and `fallback`
 * (embedded fake servers speaking the OpenAI and Anthropic protocols). The
 * primary answers in 200 ms, hangs past its 3 s deadline when a message says
 * "hang", and answers 503 (overloaded: a definite failure) when it says
 * "fail"; the fallback always answers. Both answer a request with tools
 * with a tool call and one with a JSON schema with JSON that fits it
 * (`fitRequest`), and have prices, so usage and spend are not $0.
 */
export function withDemo(config: OnejobConfig): OnejobConfig {
  return {
    ...config,
    apiKeys: Object.keys(config.apiKeys).length > 0 ? config.apiKeys : { [DEMO_TOKEN]: 'demo' },
    providers: {
      primary: {
        type: 'fake', protocol: 'openai', model: 'demo-primary', apiKey: null, timeoutMs: 3000, idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: null,
        // Prices of a mid-size model, so that the dashboard's Spend page shows what a day of calls costs.
        pricing: { inputPerMTok: 2.5, outputPerMTok: 10 },
        script: {
          rules: [
            { match: { contains: 'hang' }, behaviour: { hang: true } },
            { match: { contains: 'fail' }, behaviour: { status: 503 } },
          ],
          default: { delayMs: 200, fitRequest: true },
        },
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
    '  # a timeout becomes unknown (content "hang"), then a resolve moves it on to the fallback:',
    `  curl -s ${url}/v1/jobs ${auth} -H 'Idempotency-Key: demo-2' -H 'Content-Type: application/json' \\`,
    `    -d '{"route":"demo","input":{"messages":[{"role":"user","content":"please hang"}]}}'`,
    `  curl -s -X POST ${url}/v1/attempts/<attempt id>/resolve ${auth} -H 'Content-Type: application/json' -d '{"state":"failed"}'`,
    '',
    '  # a definite failure (content "fail", a 503) fails over by itself:',
    `  curl -s ${url}/v1/jobs ${auth} -H 'Idempotency-Key: demo-3' -H 'Content-Type: application/json' \\`,
    `    -d '{"route":"demo","input":{"messages":[{"role":"user","content":"please fail"}]}}'`,
    '',
  ];
}
