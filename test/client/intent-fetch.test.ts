/**
 * intentFetch() with the real `openai` SDK (its own retries on) against a
 * real `onejob serve` whose provider stalls, then answers: one logical call
 * is one job, whatever the SDK retried; a fetch that mints a key per try
 * (what an SDK does by itself) makes a job per try, which is the bug.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OnejobClient, intentFetch, newIntentKey, type Job } from '../../src/client/index.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { TOKEN, startOnejobServe, type OnejobServe } from './onejob-serve.ts';

const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

describe('intentFetch() with the openai SDK against onejob serve (sqlite)', () => {
  let server: OnejobServe;
  let onejob: OnejobClient;

  beforeAll(async () => {
    server = await startOnejobServe(sqlite);
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => {
    server.resetFakes();
    onejob = new OnejobClient({ baseUrl: server.url, token: TOKEN });
  });

  /** A fetch that records the Idempotency-Key and retry count of every try. */
  function recorded(inner: typeof fetch) {
    const tries: { key: string | null; retry: string | null }[] = [];
    const spy = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const h = new Headers(init?.headers);
      tries.push({ key: h.get('idempotency-key'), retry: h.get('x-stainless-retry-count') });
      return inner(input, init);
    };
    return { spy: spy as typeof fetch, tries };
  }

  async function jobsWithKeys(keys: Iterable<string | null>): Promise<Job[]> {
    const wanted = new Set(keys);
    const jobs: Job[] = [];
    for await (const job of onejob.allJobs()) if (wanted.has(job.idempotency_key)) jobs.push(job);
    return jobs;
  }

  it('one logical call through SDK timeouts and retries: one key on every try, one job, one provider call', async () => {
    server.primary.setDefault({ delayMs: 2000, reply: 'worth the wait' });
    const rec = recorded(fetch);
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: TOKEN, fetch: intentFetch({ fetch: rec.spy }), maxRetries: 8, timeout: 500 });
    const completion = await openai.chat.completions.create({ model: 'summarize', messages: [{ role: 'user', content: 'stall, then answer' }] });
    expect(completion.choices[0]!.message.content).toBe('worth the wait');
    // The SDK gave up on at least one try (its 500 ms timeout) and retried.
    expect(rec.tries.length).toBeGreaterThanOrEqual(2);
    expect(rec.tries.map((t) => t.retry)).toEqual(rec.tries.map((_, i) => String(i)));
    const keys = new Set(rec.tries.map((t) => t.key));
    expect(keys.size).toBe(1);
    const jobs = await jobsWithKeys(keys);
    expect(jobs).toHaveLength(1);
    expect(server.primary.calls.filter((c) => c.jobId === jobs[0]!.id)).toHaveLength(1);

    // The next logical call is a new intent: a new key, a new job.
    server.primary.setDefault({ reply: 'second' });
    const second = await openai.chat.completions.create({ model: 'summarize', messages: [{ role: 'user', content: 'stall, then answer' }] });
    expect(second.choices[0]!.message.content).toBe('second');
    const last = rec.tries.at(-1)!;
    expect(last.key).not.toBeNull();
    expect(keys.has(last.key)).toBe(false);
  });

  it('two identical logical calls at once, both retried: two keys, two jobs, each answered', async () => {
    server.primary.setDefault({ delayMs: 1500, reply: 'same' });
    const rec = recorded(fetch);
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: TOKEN, fetch: intentFetch({ fetch: rec.spy }), maxRetries: 8, timeout: 400 });
    const body = { model: 'summarize', messages: [{ role: 'user' as const, content: 'twins' }] };
    const [a, b] = await Promise.all([openai.chat.completions.create(body), openai.chat.completions.create(body)]);
    expect([a.choices[0]!.message.content, b.choices[0]!.message.content]).toEqual(['same', 'same']);
    const keys = new Set(rec.tries.map((t) => t.key));
    expect(keys.size).toBe(2);
    expect(await jobsWithKeys(keys)).toHaveLength(2);
    expect(a.id).not.toBe(b.id);
  });

  it('without the intent key (a key minted per try): every SDK retry is a new job that stalls again; the call times out having made a job per try', async () => {
    server.primary.setDefault({ delayMs: 2000, reply: 'worth the wait' });
    const rec = recorded(fetch);
    const perTry: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('idempotency-key', newIntentKey());
      return rec.spy(input as string, { ...init, headers });
    };
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: TOKEN, fetch: perTry, maxRetries: 3, timeout: 500 });
    await expect(openai.chat.completions.create({ model: 'summarize', messages: [{ role: 'user', content: 'stall, then answer' }] })).rejects.toThrow(/timed out/);
    expect(rec.tries).toHaveLength(4);
    const jobs = await jobsWithKeys(rec.tries.map((t) => t.key));
    expect(jobs).toHaveLength(4);
    await Promise.all(jobs.map((j) => onejob.waitForJob(j.id, { until: 'terminal' })));
    expect(server.primary.calls.filter((c) => jobs.some((j) => j.id === c.jobId))).toHaveLength(4);
  });

  it('a client that retries by itself (no retry count, or count 0: LangChain, the Vercel AI SDK): the same body sent again after a try that ended without a final answer keeps its key; after a final answer it is a new call', async () => {
    server.primary.setDefault({ delayMs: 1500, reply: 'resent' });
    const rec = recorded(fetch);
    // maxRetries 0: every try goes out with X-Stainless-Retry-Count 0, as under LangChain; the loop below is the framework's retry.
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: TOKEN, fetch: intentFetch({ fetch: rec.spy }), maxRetries: 0, timeout: 400 });
    const body = { model: 'summarize', messages: [{ role: 'user' as const, content: 'resend me' }] };
    let answer: string | null = null;
    for (let i = 0; i < 20 && answer === null; i++) {
      answer = await openai.chat.completions.create(body).then(
        (c) => c.choices[0]!.message.content,
        () => null,
      );
    }
    expect(answer).toBe('resent');
    expect(rec.tries.length).toBeGreaterThanOrEqual(2);
    expect(rec.tries.map((t) => t.retry)).toEqual(rec.tries.map(() => '0'));
    const keys = new Set(rec.tries.map((t) => t.key));
    expect(keys.size).toBe(1);
    const jobs = await jobsWithKeys(keys);
    expect(jobs).toHaveLength(1);
    expect(server.primary.calls.filter((c) => c.jobId === jobs[0]!.id)).toHaveLength(1);

    // Answered: the same body again is a new call, with a new key.
    server.primary.setDefault({ reply: 'again' });
    const again = await openai.chat.completions.create(body);
    expect(again.choices[0]!.message.content).toBe('again');
    expect(keys.has(rec.tries.at(-1)!.key)).toBe(false);
  });

  it('a request that already has an Idempotency-Key keeps it; GETs get none', async () => {
    const rec = recorded(fetch);
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: TOKEN, fetch: intentFetch({ fetch: rec.spy }), maxRetries: 2 });
    await openai.chat.completions.create({ model: 'summarize', messages: [{ role: 'user', content: 'mine' }] }, { headers: { 'Idempotency-Key': 'my-own-key-1' } });
    expect(rec.tries.at(-1)!.key).toBe('my-own-key-1');
    await openai.models.list().catch(() => undefined);
    expect(rec.tries.at(-1)!.key).toBeNull();
  });
});
