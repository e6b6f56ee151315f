/**
 * useIntent() in a real browser: headless Chromium (Debian's /usr/bin/chromium,
 * driven by playwright-core) on the example app (examples/summarize), started
 * as `npm run example` starts it: fake providers, `onejob serve`, the page.
 * Double clicks, clicks during a stalled request, a reload in the middle and
 * the fallback button each end with ONE job in onejob's database (read back
 * through its API) and one provider call per attempt (the fakes count them).
 *
 * Skipped, loudly, only when /usr/bin/chromium is absent
 * (`apt-get install -y chromium`).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OnejobClient, type Job } from '../../src/client/index.ts';
import type { FakeProvider } from '../../src/testing/index.ts';
import { STORYTELLER_SCRIPT, startSummarizeExample, type SummarizeExample } from '../../examples/summarize/start-example.ts';

const CHROMIUM = '/usr/bin/chromium';
const SKIP_REASON = existsSync(CHROMIUM) ? null : `${CHROMIUM} is absent: install it with \`apt-get install -y chromium\` (CI: .ci/run must)`;
if (SKIP_REASON !== null) {
  console.warn(`\n*** SKIPPED: the browser tests of useIntent() (test/client/browser.test.ts): ${SKIP_REASON} ***\n`);
}
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const SCREENSHOT = resolve(import.meta.dirname, '../../docs/screenshots/summarize-example.png');
const INTENT_STORAGE_KEY = 'onejob:intent:summarize';

describe.skipIf(SKIP_REASON !== null)(`useIntent() in headless Chromium on examples/summarize${SKIP_REASON ? ` — SKIPPED: ${SKIP_REASON}` : ''}`, () => {
  let example: SummarizeExample;
  let context: BrowserContext;
  let profile: string;
  let onejob: OnejobClient;
  let page: Page;
  /** The Idempotency-Key of every `POST /v1/jobs` the page sent. */
  let creates: string[];
  let before: Set<string>;

  beforeAll(async () => {
    // The primary's deadline is longer than the stalls the tests release by hand, shorter than their patience.
    example = await startSummarizeExample({ primaryTimeoutMs: 6000 });
    profile = mkdtempSync(join(tmpdir(), 'onejob-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: ARGS, headless: true });
    onejob = new OnejobClient({ baseUrl: example.onejobUrl, token: example.token });
  }, 120_000);
  afterAll(async () => {
    await context?.close();
    await example?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });
  beforeEach(async () => {
    example.primary.reset();
    example.fallback.reset();
    before = new Set((await allJobs()).map((j) => j.id));
    creates = [];
    page = await context.newPage(); // a new tab: an empty sessionStorage
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/jobs') creates.push(r.headers()['idempotency-key'] ?? '(none)');
    });
    await page.goto(example.url);
    await page.locator('#summarize').waitFor();
    return async () => {
      await page.close();
    };
  });

  async function allJobs(): Promise<Job[]> {
    const jobs: Job[] = [];
    for await (const job of onejob.allJobs({ limit: 200 })) jobs.push(job);
    return jobs;
  }
  /** The jobs this test made, read from onejob. */
  async function newJobs(): Promise<Job[]> {
    return (await allJobs()).filter((j) => !before.has(j.id));
  }
  function callsFor(fake: FakeProvider, jobId: string): number {
    return fake.calls.filter((c) => c.jobId === jobId).length;
  }
  /** Waits until the page shows the status (a regular expression source). */
  async function status(value: string, timeout = 30_000): Promise<void> {
    await page.locator('[data-testid=status]', { hasText: new RegExp(`^(${value})$`) }).waitFor({ timeout });
  }
  const PENDING = 'queued|running';
  const text = (testId: string): Promise<string> => page.locator(`[data-testid=${testId}]`).innerText();

  it('a double click: two requests with one key, one job, one provider call', async () => {
    example.primary.setDefault({ delayMs: 1500, reply: 'summary after a double click' });
    await page.dblclick('#summarize');
    await status('done');
    expect(await text('result')).toBe('summary after a double click');
    expect(creates.length).toBe(2); // the button is not disabled: the key is what saves the second click
    expect(new Set(creates).size).toBe(1);
    const jobs = await newJobs();
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.idempotency_key).toBe(creates[0]);
    expect(jobs[0]!.attempts).toHaveLength(1);
    expect(callsFor(example.primary, jobs[0]!.id)).toBe(1);
  });

  it('clicks while the provider stalls: the same job, no new work; one provider call when it answers', async () => {
    example.primary.setDefault({ gate: 'stall', reply: 'summary after the stall' });
    await page.click('#summarize');
    await example.primary.waitForCalls(1);
    await status(PENDING);
    await page.click('#summarize');
    await page.click('#summarize');
    await expect.poll(() => creates.length).toBe(3);
    await status(PENDING);
    example.primary.release('stall');
    await status('done');
    expect(await text('result')).toBe('summary after the stall');
    expect(new Set(creates).size).toBe(1);
    const jobs = await newJobs();
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.state).toBe('succeeded');
    expect(callsFor(example.primary, jobs[0]!.id)).toBe(1);
  });

  it('a reload in the middle: the key survives in sessionStorage, the page follows the same job; the key is let go when it ends', async () => {
    example.primary.setDefault({ gate: 'stall', reply: 'summary after a reload' });
    await page.click('#summarize');
    await example.primary.waitForCalls(1);
    await status(PENDING);
    const key = await text('key');
    const jobId = await text('job-id');
    await page.reload();
    await status(PENDING);
    expect(await text('key')).toBe(key);
    expect(await text('job-id')).toBe(jobId);
    example.primary.release('stall');
    await status('done');
    expect(await text('result')).toBe('summary after a reload');
    expect(creates).toEqual([key]); // the reloaded page knew the job from sessionStorage: it read it instead of creating
    expect(await page.evaluate((k) => sessionStorage.getItem(k), INTENT_STORAGE_KEY)).toBeNull();
    const jobs = await newJobs();
    expect(jobs.map((j) => j.id)).toEqual([jobId]);
    expect(callsFor(example.primary, jobId)).toBe(1);

    // The job is terminal, so the key is gone: the next click is a new intent, a new job.
    await page.click('#summarize');
    await expect.poll(() => text('job-id'), { timeout: 30_000 }).not.toBe(jobId);
    await status('done');
    expect(creates).toHaveLength(2);
    expect(creates[1]).not.toBe(key);
    expect(await newJobs()).toHaveLength(2);
  });

  it('a reload in the middle of a streamed answer: the text goes on from where it was, it does not start again', async () => {
    const streams: (string | null)[] = [];
    const watch = (p: Page) => p.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/chat/completions') streams.push(r.headers()['last-event-id'] ?? null);
    });
    watch(page);
    await page.click('#story');
    await page.locator('[data-testid=story-text]', { hasText: /fox jumped/ }).waitFor({ timeout: 30_000 });
    const before = await text('story-text');
    await page.reload();
    // At once, before any new event: the text kept with the held intent.
    await page.locator('[data-testid=story-text]').waitFor();
    expect((await text('story-text')).startsWith(before.trim())).toBe(true);
    await page.locator('[data-testid=story-status]', { hasText: /^done$/ }).waitFor({ timeout: 30_000 });
    const story = STORYTELLER_SCRIPT.default!.chunks!.join('');
    expect(await text('story-text')).toBe(story.trim());
    // The reloaded page resumed after the last event it had (React may mount it twice): it never asked from the start again.
    expect(streams.length).toBeGreaterThanOrEqual(2);
    expect(streams[0]).toBeNull();
    for (const id of streams.slice(1)) expect(id).toMatch(/^1-\d+$/);
  });

  it('the problem statement: a stalled first request, a reload, a click, "Try the fallback": one job, two attempts, one call each', async () => {
    example.primary.setDefault({ hang: true });
    example.fallback.setDefault({ delayMs: 300, reply: 'A quick fox leaps a lazy dog; the dog sleeps on. (fallback)' });
    await page.click('#summarize');
    await example.primary.waitForCalls(1);
    await page.reload();
    await page.click('#summarize');
    await status('in_doubt'); // the primary's 6 s deadline passed without an answer
    expect(await page.locator('#fallback').isEnabled()).toBe(true);
    await page.click('#fallback');
    await status('done');
    expect(await text('job-state')).toBe('succeeded');
    expect(await text('result')).toContain('(fallback)');
    const rows = await page.locator('[data-testid=attempt]').allInnerTexts();
    expect(rows.map((r) => r.split('\t').map((c) => c.trim()))).toEqual([
      ['1', 'primary', 'first', 'cancelled'],
      ['2', 'fallback', 'failover', 'succeeded'],
    ]);
    expect(new Set(creates).size).toBe(1);
    const jobs = await newJobs();
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.attempts.map((a) => [a.provider, a.state])).toEqual([['primary', 'cancelled'], ['fallback', 'succeeded']]);
    expect(callsFor(example.primary, jobs[0]!.id)).toBe(1);
    expect(callsFor(example.fallback, jobs[0]!.id)).toBe(1);
    if (process.env.ONEJOB_SCREENSHOTS === '1') {
      mkdirSync(resolve(SCREENSHOT, '..'), { recursive: true });
      await page.setViewportSize({ width: 900, height: 620 });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
    }
  });
});
