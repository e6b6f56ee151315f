/**
 * The first hour of a new user: `onejob serve` with no config at all (the
 * demo, what `npm start` runs), used the way the banner says, with the
 * official SDKs:
 * - the banner names the dashboard and the base URLs for the OpenAI and
 *   Anthropic SDKs, in one block no log line cuts into;
 * - logs are JSON lines when stdout is not a terminal, pino-pretty's lines
 *   when it is (a pseudo-terminal from `script`);
 * - `GET /` leads to the dashboard;
 * - a request with tools gets a tool call, one with a JSON schema JSON that
 *   fits it (the demo's fakes, `fitRequest`), on both SDKs;
 * - the demo has prices: a job costs more than $0;
 * - a "hang" becomes `unknown`, then `succeeded` by lookup within seconds
 *   (the primary is a fake Responses API in background mode, so onejob can
 *   ask it what became of the request).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { intentFetch } from '../../src/client/index.ts';

const BIN = resolve(import.meta.dirname, '../../bin/onejob');
const TOKEN = 'demo-token';

const weather = {
  type: 'object' as const,
  properties: { city: { type: 'string', minLength: 2 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};

const summary = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 3 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
    score: { type: 'number', minimum: 0.5, maximum: 1 },
    published: { type: 'string', format: 'date-time' },
    author: { anyOf: [{ $ref: '#/$defs/person' }, { type: 'null' }] },
  },
  required: ['title', 'tags', 'score', 'published', 'author'],
  additionalProperties: false,
  $defs: { person: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false } },
} as const;

const ajv = new Ajv({ strict: false });

/** `serve` on a free port in `cwd`, with stdout and stderr kept apart. */
function startDemo(cwd: string): Promise<{ child: ChildProcess; url: string; stdout: () => string; stderr: () => string }> {
  const child = spawn(BIN, ['serve', '--port', '0'], { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: `sqlite:${join(cwd, 'demo.db')}` } });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no banner: ${out}${err}`)), 60_000);
    child.stderr!.on('data', (d) => {
      err += String(d);
      // The banner's last line: the whole block has arrived.
      const m = /at (http:\/\/127\.0\.0\.1:\d+)\n[\s\S]*please fail/.exec(err);
      if (m) {
        clearTimeout(timer);
        ok({ child, url: m[1]!, stdout: () => out, stderr: () => err });
      }
    });
    child.on('exit', (code) => fail(new Error(`exited ${code}: ${out}${err}`)));
  });
}

describe('the demo a new user starts (onejob serve, no config)', () => {
  let dir: string;
  let demo: Awaited<ReturnType<typeof startDemo>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-demo-'));
    demo = await startDemo(dir);
  });
  afterAll(async () => {
    if (demo && demo.child.exitCode === null) {
      const exited = new Promise((ok) => demo.child.on('exit', ok));
      demo.child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('the banner names the dashboard and both SDK base URLs, in one block; stdout (not a terminal) is JSON lines only', () => {
    const url = demo.url;
    const banner = demo.stderr();
    expect(banner).toContain(`${url}/ui/`);
    expect(banner).toContain(`new OpenAI({ baseURL: '${url}/v1', apiKey: '${TOKEN}', fetch: intentFetch() })`);
    expect(banner).toContain(`new Anthropic({ baseURL: '${url}', apiKey: '${TOKEN}', fetch: intentFetch() })`);
    expect(banner).toContain("import { intentFetch } from 'onejob/client'");
    // Nothing but the banner on stderr: no log line inside it.
    expect(banner.split('\n').filter((l) => l.startsWith('{'))).toEqual([]);
    const lines = demo.stdout().split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  });

  it('a hang becomes unknown, then succeeded by lookup within seconds: the primary speaks the Responses API in background mode', async () => {
    const banner = demo.stderr();
    expect(banner).toContain('it speaks the');
    expect(banner).toContain('Responses API in background mode, so onejob asks it');
    expect(banner).toContain('resolved_by "lookup"');
    expect(banner).toContain('a plain "openai" provider has nothing to ask');
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await fetch(`${demo.url}/v1/jobs`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': 'demo-hang' },
      body: JSON.stringify({ route: 'demo', input: { messages: [{ role: 'user', content: 'please hang' }] } }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    type Job = { state: string; attempts: { provider: string; state: string; resolved_by: string | null; provider_request_id: string | null }[] };
    const read = async (wait: number): Promise<Job> => (await (await fetch(`${demo.url}/v1/jobs/${id}?wait=${wait}`, { headers })).json()) as Job;
    // The long-poll answers once the job is in doubt: the 3 s deadline passed, nothing came back.
    const unknown = await read(10);
    expect(unknown.state).toBe('unknown');
    expect(unknown.attempts).toMatchObject([{ provider: 'primary', state: 'unknown', provider_request_id: expect.stringMatching(/^resp_/) }]);
    const unknownAt = Date.now();
    let job = unknown;
    while (job.state === 'unknown' && Date.now() - unknownAt < 20_000) {
      await new Promise((r) => setTimeout(r, 250));
      job = await read(0);
    }
    // Resolved by asking the provider (GET /v1/responses/{id}), not by a person, not by failing over.
    expect(job.state).toBe('succeeded');
    expect(job.attempts.map((a) => [a.provider, a.state, a.resolved_by])).toEqual([['primary', 'succeeded', 'lookup']]);
    expect(Date.now() - unknownAt).toBeLessThan(15_000);
  });

  it('GET / leads to the dashboard', async () => {
    const res = await fetch(`${demo.url}/`, { redirect: 'manual' });
    expect([res.status, res.headers.get('location')]).toEqual([302, '/ui/']);
    expect((await fetch(`${demo.url}/`)).headers.get('content-type')).toMatch(/^text\/html/);
  });

  it('the OpenAI SDK: tools get a tool call whose arguments fit the tool, a JSON schema gets JSON that fits it', async () => {
    const openai = new OpenAI({ baseURL: `${demo.url}/v1`, apiKey: TOKEN, fetch: intentFetch() });
    const tools = await openai.chat.completions.create({
      model: 'demo',
      messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather } }],
    });
    const choice = tools.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const call = choice.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    expect(call.function.name).toBe('get_weather');
    const args = JSON.parse(call.function.arguments) as unknown;
    expect(ajv.validate(weather, args), JSON.stringify(ajv.errors)).toBe(true);

    // The tool's result goes back: the model answers in words, no second call.
    const after = await openai.chat.completions.create({
      model: 'demo',
      messages: [
        { role: 'user', content: 'What is the weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: choice.message.tool_calls! },
        { role: 'tool', tool_call_id: (call as unknown as { id: string }).id, content: '{"temp": 3}' },
      ],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather } }],
    });
    expect(after.choices[0]!.finish_reason).toBe('stop');

    const structured = await openai.chat.completions.create({
      model: 'demo',
      messages: [{ role: 'user', content: 'Summarize the news.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'summary', strict: true, schema: summary } },
    });
    const value = JSON.parse(structured.choices[0]!.message.content!) as unknown;
    expect(ajv.validate(summary, value), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('the Anthropic SDK: tools get a tool_use block that fits the tool (the primary answers, through the Responses API)', async () => {
    const anthropic = new Anthropic({ baseURL: demo.url, apiKey: TOKEN, fetch: intentFetch() });
    const message = await anthropic.messages.create({
      model: 'demo',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ name: 'get_weather', input_schema: weather }],
    });
    expect(message.stop_reason).toBe('tool_use');
    const block = message.content.find((b) => b.type === 'tool_use');
    expect(block).toMatchObject({ type: 'tool_use', name: 'get_weather' });
    expect(ajv.validate(weather, (block as { input: unknown }).input), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('the demo has prices: a job costs more than $0, and GET /v1/usage sums it', async () => {
    const created = await fetch(`${demo.url}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'demo-cost', 'content-type': 'application/json' },
      body: JSON.stringify({ route: 'demo', input: { messages: [{ role: 'user', content: 'hello there, how much do I cost?' }] } }),
    });
    const job = (await created.json()) as { id: string };
    const done = (await (await fetch(`${demo.url}/v1/jobs/${job.id}?wait=10`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { state: string; cost_usd: number | null };
    expect(done.state).toBe('succeeded');
    expect(done.cost_usd).toBeGreaterThan(0);
    const usage = (await (await fetch(`${demo.url}/v1/usage?since=2000-01-01T00:00:00Z`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { data: { cost_usd: number }[] };
    expect(usage.data.reduce((s, r) => s + r.cost_usd, 0)).toBeGreaterThan(0);
  });
});

describe('logs on a terminal', () => {
  it('are pino-pretty lines (a level word and the message), not JSON, when stdout is a terminal', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-tty-'));
    try {
      // `script` gives the child a pseudo-terminal; `migrate` logs nothing, so the first lines of serve are used, then it is stopped.
      const cmd = `${BIN} serve --port 0 --no-executor & pid=$!; sleep 6; kill -TERM $pid; wait $pid`;
      const run = spawnSync('script', ['-qec', cmd, '/dev/null'], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TERM: 'dumb', DATABASE_URL: `sqlite:${join(dir, 'tty.db')}`, ONEJOB_API_KEYS: 'tok_a=alice' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      // eslint-disable-next-line no-control-regex
      const text = run.stdout.replace(/\u001b\[[0-9;]*m/g, '');
      expect(text, text).toMatch(/INFO.*: migration/);
      expect(text).toMatch(/INFO.*Server listening at http:\/\/127\.0\.0\.1:\d+/);
      expect(text).not.toMatch(/^\{"level"/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('LOG_FORMAT=json keeps JSON on a terminal; another LOG_FORMAT is refused by name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-tty-'));
    try {
      const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: `sqlite:${join(dir, 'tty.db')}`, ONEJOB_API_KEYS: 'tok_a=alice' };
      const cmd = `${BIN} serve --port 0 --no-executor & pid=$!; sleep 6; kill -TERM $pid; wait $pid`;
      const json = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: dir, env: { ...env, LOG_FORMAT: 'json' }, encoding: 'utf8', timeout: 60_000 });
      expect(json.stdout).toMatch(/^\{"level":30,.*"msg":"migration"/m);
      const bad = spawnSync(BIN, ['serve', '--port', '0'], { cwd: dir, env: { ...env, LOG_FORMAT: 'yaml' }, encoding: 'utf8', timeout: 60_000 });
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(/LOG_FORMAT must be json or pretty, got "yaml"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
