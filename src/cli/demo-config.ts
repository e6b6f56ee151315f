/**
 * The demo that `npm start` serves when there is no config at all: two
 * embedded fake providers behind one route, so a new user sees a job, a
 * timeout becoming unknown, a resolve and a failover within a minute.
 */
import { DEFAULT_IDLE_TIMEOUT_MS, type OnejobConfig } from '../config/config.ts';

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
 * "fail"; the fallback always answers.
 */
export function withDemo(config: OnejobConfig): OnejobConfig {
  return {
    ...config,
    apiKeys: Object.keys(config.apiKeys).length > 0 ? config.apiKeys : { [DEMO_TOKEN]: 'demo' },
    providers: {
      primary: {
        type: 'fake', protocol: 'openai', model: 'demo-primary', apiKey: null, timeoutMs: 3000, idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: null,
        script: {
          rules: [
            { match: { contains: 'hang' }, behaviour: { hang: true } },
            { match: { contains: 'fail' }, behaviour: { status: 503 } },
          ],
          default: { delayMs: 200 },
        },
      },
      fallback: {
        type: 'fake', protocol: 'anthropic', model: 'demo-fallback', apiKey: null, timeoutMs: 3000, idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: null,
        script: { default: { delayMs: 100 } },
      },
    },
    routes: { demo: { providers: ['primary', 'fallback'], hedgeAfterMs: null, contract: null } },
  };
}

/** What `serve` prints in demo mode once listening. */
export function demoBanner(url: string, token: string): string[] {
  const auth = `-H 'Authorization: Bearer ${token}'`;
  return [
    '',
    `onejob demo: no config found, serving route "demo" on two embedded fake providers at ${url}`,
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
