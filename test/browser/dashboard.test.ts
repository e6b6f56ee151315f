/**
 * The dashboard in a real browser (CONTRACT §10, issue 13): Debian's headless
 * Chromium driven by playwright-core against a real `bin/onejob serve` with
 * fake providers. Signs in, lists and searches jobs, opens a job and reads its
 * attempts on the timeline, resolves an `unknown` attempt and watches the job
 * move on (live, no reload), cancels one with a reason, reads the spend and
 * the certifications, and checks the phone layout and the keyboard path.
 *
 * With ONEJOB_SCREENSHOTS=<dir> it saves a screenshot of every screen there
 * (`npm run screenshots` writes docs/screenshots/).
 *
 * Skipped, loudly, only when /usr/bin/chromium is absent
 * (`apt-get install -y chromium`; CI installs it).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE_TOKEN, BOB_TOKEN, CHROMIUM, CHROMIUM_ARGS, ROOT, ensureDashboardBuilt, startDashboardServer, startDemoServer, type DashboardServer } from './dashboard-harness.ts';
import { DEMO_TOKEN } from '../../src/cli/demo-config.ts';

const SKIP = existsSync(CHROMIUM) ? null : `SKIPPED dashboard browser tests: ${CHROMIUM} is absent (apt-get update && apt-get install -y chromium)`;
if (SKIP) console.warn(`\n*** ${SKIP} ***\n`);

const SHOTS = process.env.ONEJOB_SCREENSHOTS ? resolve(ROOT, process.env.ONEJOB_SCREENSHOTS) : null;

describe.skipIf(SKIP !== null)('dashboard in headless Chromium', () => {
  let server: DashboardServer;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const jobs: Record<string, any> = {};

  /** Signs `p` in (a new tab has its own sessionStorage, so its own sign-in). */
  const signIn = async (p: Page) => {
    await p.goto(`${server.url}/ui/`);
    await p.getByLabel('API token').fill(ALICE_TOKEN);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  };
  const money = async (text: Promise<string | null>) => Number((await text)?.replace(/[^0-9.]/g, ''));

  const shoot = async (name: string, p: Page = page) => {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  };

  beforeAll(async () => {
    ensureDashboardBuilt();
    server = await startDashboardServer();
    // Jobs as an application would make them, each settled before the next.
    jobs.hello = await server.settle((await server.createJob('checkout-1001', 'demo', 'hello')).id);
    jobs.failover = await server.settle((await server.createJob('checkout-1002', 'demo', 'please fail')).id);
    // The hedge race, whose loser answered as the hedge won, is seeded deterministically (see seedHedgeRace).
    jobs.hedge = (await server.api('GET', `/v1/jobs/${server.hedgeRaceJobId}`)).body;
    jobs.summary = await server.settle((await server.createJob('report-3001', 'summary', 'Please summarize the incident report.')).id);
    jobs.resolveMe = await server.settle((await server.createJob('refund-4001', 'demo', 'please hang')).id);
    jobs.cancelMe = await server.settle((await server.createJob('refund-4002', 'demo', 'please hang again')).id);
    jobs.bob = await server.settle((await server.createJob('bob-secret-1', 'demo', 'hello from bob', BOB_TOKEN)).id, BOB_TOKEN);
    profile = mkdtempSync(join(tmpdir(), 'onejob-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1280, height: 860 },
    });
    page = context.pages()[0] ?? (await context.newPage());
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await server?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  }, 60_000);

  it('the fixtures are what the tests below expect', () => {
    expect(jobs.hello.state).toBe('succeeded');
    expect(jobs.hedge.attempts.map((a: any) => [a.provider, a.state, a.cost_usd])).toEqual([['primary', 'superseded', 0.0105], ['fallback', 'succeeded', 0.0078]]);
    expect(jobs.failover.attempts.map((a: any) => a.state)).toEqual(['failed', 'succeeded']);
    expect(jobs.resolveMe.state).toBe('unknown');
    expect(jobs.cancelMe.state).toBe('unknown');
  });

  it('signs in with an API token (a wrong one is refused) and lists only that owner\'s jobs', async () => {
    await page.goto(`${server.url}/ui/`);
    await page.getByLabel('API token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/not valid/);
    await shoot('sign-in');
    await page.getByLabel('API token').fill(ALICE_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page.locator(`tr[data-job="${jobs.hello.id}"]`).waitFor();
    expect(await page.locator('tr[data-job]').count()).toBe(6);
    expect(await page.locator(`tr[data-job="${jobs.bob.id}"]`).count()).toBe(0);
    expect(await page.evaluate(() => sessionStorage.getItem('onejob.token'))).toBe(ALICE_TOKEN);
    await page.locator('.live.is-live').waitFor();
    // The search's placeholder is read whole: its text fits the field's content box.
    const [text, room] = await page.getByLabel('Search').evaluate((el) => {
      const input = el as HTMLInputElement;
      const style = getComputedStyle(input);
      const ctx = document.createElement('canvas').getContext('2d')!;
      ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
      return [ctx.measureText(input.placeholder).width, input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)];
    });
    expect(text).toBeLessThanOrEqual(room!);
    await shoot('jobs');
  });

  it('filters by state and route, and searches by idempotency key', async () => {
    // Clear re-renders the form from the URL: wait for that (every job listed, the filters empty)
    // before choosing the next filter, or the re-render resets a choice made in between.
    const clear = async () => {
      await page.getByRole('button', { name: 'Clear' }).click();
      await expect.poll(() => page.locator('tr[data-job]').count()).toBe(6);
      expect(await page.getByLabel('State').inputValue()).toBe('');
      expect(await page.getByLabel('Route').inputValue()).toBe('');
    };
    await page.getByLabel('State').selectOption('unknown');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('tr[data-job]').count()).toBe(2);
    await clear();
    await page.getByLabel('Route').selectOption('hedged');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual([jobs.hedge.id]);
    await clear();
    await page.getByLabel('Search').fill('checkout-');
    await page.getByLabel('Search').press('Enter');
    await expect.poll(() => page.locator('tr[data-job]').count()).toBe(2);
    await clear();
  });

  it('opens a job: attempts on one time axis, the winner marked, the superseded loser greyed with its cost, the event log', async () => {
    await page.locator(`tr[data-job="${jobs.hedge.id}"] a`).click();
    await page.locator('.timeline-row').nth(1).waitFor();
    const rows = await page.locator('.timeline-row').evaluateAll((els) => els.map((e) => [e.getAttribute('data-state'), e.classList.contains('is-winner')]));
    expect(rows).toEqual([['superseded', false], ['succeeded', true]]);
    expect(await page.locator('.timeline-row[data-state="superseded"]').textContent()).toMatch(/superseded: payload discarded/);
    // The loser's usage and cost are shown although its payload was discarded: 1800 × $2.5/M + 600 × $10/M = $0.0105.
    const loser = page.locator('.attempts-table tr[data-state="superseded"]');
    expect(await loser.textContent()).toMatch(/1,800.*600.*\$0\.0105/);
    expect(await page.getByTestId('job-cost').textContent()).toMatch(/on attempts that did not win/);
    expect(await page.locator('tr[data-event="race.lost"]').count()).toBe(1);
    await shoot('job-timeline');
  });

  it('resolves an unknown attempt from its job page and the job moves on live, without a reload', async () => {
    await page.goto(`${server.url}/ui/#/jobs/${jobs.resolveMe.id}`);
    await page.locator('section[data-job-state="unknown"]').waitFor();
    await page.locator('.timeline-row[data-state="unknown"] .doubt-mark').waitFor();
    // The attempt's error in the event log reads as the attempts table shows it: code and message, not a quoted JSON string.
    const unknownEvent = page.locator('tr[data-event="attempt.unknown"] td').nth(3);
    await unknownEvent.waitFor();
    expect(await unknownEvent.textContent()).toMatch(/^deadline_exceeded no answer from primary within \d+ ms\s*$/);
    // The deadline it passed (the deadline in force when it went into doubt) is marked on its bar.
    expect(await page.locator('.timeline-row[data-state="unknown"] .timeline-deadline').count()).toBe(1);
    await shoot('job-in-doubt');
    const attemptId = jobs.resolveMe.attempts[0].id;
    await page.getByTestId(`resolve-failed-${attemptId}`).click();
    const dialog = page.getByRole('dialog', { name: /Resolve attempt #1 on primary as failed/ });
    await dialog.waitFor();
    // A reason is required before it can be confirmed.
    expect(await dialog.getByRole('button', { name: 'Resolve as failed' }).isDisabled()).toBe(true);
    await dialog.getByLabel(/Reason/).fill('primary status page: request never reached the model');
    await shoot('resolve-dialog');
    await dialog.getByRole('button', { name: 'Resolve as failed' }).click();
    // Failover to the fallback, which answers: the page follows through the live feed.
    await page.locator('section[data-job-state="succeeded"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('.timeline-row').evaluateAll((els) => els.map((e) => e.getAttribute('data-state')))).toEqual(['failed', 'succeeded']);
    await page.locator('tr[data-event="attempt.failed"] .reason').filter({ hasText: 'request never reached the model' }).waitFor();
    // The timeline keeps the doubt: the deadline it passed, the time it spent in doubt, who resolved it and why.
    const resolved = page.locator(`.timeline-row[data-attempt="${attemptId}"]`);
    expect(await resolved.locator('.timeline-deadline').count()).toBe(1);
    expect(await resolved.locator('.timeline-doubt').count()).toBe(1);
    expect(await page.getByTestId(`doubt-time-${attemptId}`).textContent()).toMatch(/in doubt \d/);
    expect(await resolved.locator('.resolution[data-resolved-by="operator"]').textContent()).toBe('resolved by operator: “primary status page: request never reached the model”');
    await shoot('job-resolved');
    const api = (await server.api('GET', `/v1/jobs/${jobs.resolveMe.id}/events`)).body.data;
    expect(api.find((e: any) => e.type === 'attempt.failed').data).toMatchObject({ actor: 'api', reason: 'primary status page: request never reached the model' });
  });

  it('the doubt queue: each attempt with its key, route, input line, provider id, whether onejob asks the provider, its checks and age', async () => {
    // Two renders on a task service (a provider with a lookup) that outlast their deadline: in doubt, and asked about by onejob.
    jobs.render1 = await server.settle((await server.createJob('render-6001', 'render', 'a fox in the snow, watercolour')).id);
    jobs.render2 = await server.settle((await server.createJob('render-6002', 'render', 'a heron at dawn, ink')).id);
    expect([jobs.render1.state, jobs.render2.state]).toEqual(['unknown', 'unknown']);
    await page.getByRole('link', { name: /In doubt/ }).click();
    await page.getByRole('heading', { name: 'In doubt', level: 1 }).waitFor();
    const rows = page.locator('.doubt-table tbody tr');
    await expect.poll(() => rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-job')))).toEqual([jobs.cancelMe.id, jobs.render1.id, jobs.render2.id]);
    const plain = page.locator(`.doubt-table tr[data-job="${jobs.cancelMe.id}"]`);
    expect(await plain.getAttribute('data-can-check')).toBe('false');
    expect((await plain.textContent())!.replace(/\s+/g, ' ')).toMatch(/refund-4002.*demo.*please hang again.*#1 primary.*deadline_exceeded.*none.*no: its protocol keeps nothing to ask.*\d+ (s|min)$/);
    // What would make it askable: its provider type and the setting.
    expect((await page.getByTestId(`ask-hint-${jobs.cancelMe.attempts[0].id}`).textContent())!.replace(/\s+/g, ' '))
      .toMatch(/^To make it askable: provider primary is type fake, which has no lookup: point a provider of type "openai-responses", or "openai" with "lookup": "stored-completions", at the fake server/);
    const render = page.locator(`.doubt-table tr[data-job="${jobs.render1.id}"]`);
    expect(await render.getAttribute('data-can-check')).toBe('true');
    expect(await render.textContent()).toMatch(/render-6001.*render.*a fox in the snow, watercolour.*#1 renderer.*deadline_exceeded/);
    expect(await render.locator('.doubt-pid').textContent()).toBe(jobs.render1.attempts[0].provider_request_id);
    expect(jobs.render1.attempts[0].provider_request_id).toMatch(/^task_/);
    // onejob asks the task service by itself (about a second after the doubt began, then with backoff): the last check shows, and the next.
    const ask = page.getByTestId(`ask-${jobs.render1.attempts[0].id}`);
    await expect.poll(() => ask.textContent(), { timeout: 15_000 }).toMatch(/✓ yes\s*last \d+ s ago\s*next (in \d+ s|due now)/);
    // Ask now: the task is still rendering.
    await page.getByTestId(`check-${jobs.render1.attempts[0].id}`).click();
    await ask.getByRole('status').filter({ hasText: 'still running' }).waitFor();
    await shoot('in-doubt');
  });

  it('the doubt queue: selects several and resolves them at once with one reason, then cancels a job', async () => {
    const r1 = jobs.render1.attempts[0].id;
    const r2 = jobs.render2.attempts[0].id;
    expect(await page.getByTestId('bulk-failed').isDisabled()).toBe(true);
    await page.getByLabel('Select attempt #1 of render-6001').check();
    await page.getByLabel('Select attempt #1 of render-6002').check();
    expect(await page.getByTestId('doubt-selected').textContent()).toBe('2 of 3 selected');
    await page.getByTestId('bulk-failed').click();
    const dialog = page.getByRole('dialog', { name: 'Resolve 2 attempts as failed' });
    await dialog.waitFor();
    await dialog.getByLabel(/Reason/).fill('render farm outage: both renders were dropped');
    await shoot('doubt-bulk-dialog');
    await dialog.getByRole('button', { name: 'Resolve 2 as failed' }).click();
    await dialog.waitFor({ state: 'hidden' });
    // Both left the queue; each attempt was resolved with the one reason, and its job (a chain of one) failed.
    await expect.poll(() => page.locator('.doubt-table tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-job')))).toEqual([jobs.cancelMe.id]);
    for (const [job, attempt] of [[jobs.render1, r1], [jobs.render2, r2]]) {
      const after = (await server.api('GET', `/v1/jobs/${job.id}`)).body;
      expect(after.state).toBe('failed');
      expect(after.attempts[0]).toMatchObject({ id: attempt, state: 'failed', resolved_by: 'operator' });
      const events = (await server.api('GET', `/v1/jobs/${job.id}/events`)).body.data;
      expect(events.find((e: any) => e.type === 'attempt.failed').data).toMatchObject({ actor: 'api', resolved_by: 'operator', reason: 'render farm outage: both renders were dropped' });
    }
    // Select all (one left), cancel its job, with a reason.
    await page.getByLabel('Select all').check();
    await page.getByTestId('bulk-cancel-jobs').click();
    const cancel = page.getByRole('dialog', { name: 'Cancel 1 job' });
    await cancel.getByLabel(/Reason/).fill('customer abandoned the refund');
    await cancel.getByRole('button', { name: 'Cancel 1 job' }).click();
    await page.getByTestId('doubt-empty').waitFor();
    const job = (await server.api('GET', `/v1/jobs/${jobs.cancelMe.id}`)).body;
    expect(job.state).toBe('cancelled');
    const events = (await server.api('GET', `/v1/jobs/${jobs.cancelMe.id}/events`)).body.data;
    expect(events.find((e: any) => e.type === 'job.cancelled').data).toEqual({ actor: 'api', reason: 'customer abandoned the refund' });
  });

  it('reads the spend per route and provider, with the share that did not win', async () => {
    await page.getByRole('link', { name: 'Spend' }).click();
    await page.locator('.spend-table tr[data-route="hedged"][data-provider="primary"]').waitFor();
    const usage = (await server.api('GET', '/v1/usage')).body.data as any[];
    const total = usage.reduce((s, r) => s + (r.cost_usd ?? 0), 0);
    const lost = usage.filter((r) => r.outcome !== 'succeeded').reduce((s, r) => s + (r.cost_usd ?? 0), 0);
    expect(lost).toBeGreaterThan(0);
    await expect.poll(() => money(page.getByTestId('spend-total').textContent())).toBeCloseTo(total, 6);
    expect(await money(page.getByTestId('spend-lost').textContent())).toBeCloseTo(lost, 6);
    expect(await page.locator('.spend-table tr[data-route="hedged"][data-provider="primary"]').textContent()).toMatch(/100\.0%/);
    await page.locator('.spend-chart canvas').waitFor();
    await shoot('spend');
  });

  it("shows an owner's limits on the Spend page: each window against its limit, spent and reserved", async () => {
    const p = await context.newPage();
    await p.goto(`${server.url}/ui/`);
    await p.getByLabel('API token').fill(BOB_TOKEN);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await p.getByRole('link', { name: 'Spend' }).click();
    const limits = (await server.api('GET', '/v1/limits', undefined, undefined, BOB_TOKEN)).body;
    expect(limits.spend_usd.day.limit).toBe(5);
    expect(limits.spend_usd.day.spent).toBeGreaterThan(0);
    await p.locator('.limit-row[data-window="day"]').waitFor();
    expect(await p.locator('.limit-row[data-window="day"] .limit-label').textContent()).toContain('limit $5');
    await expect.poll(() => money(p.getByTestId('limit-day-spent').textContent())).toBeCloseTo(limits.spend_usd.day.spent, 6);
    expect(await p.locator('.limit-row[data-window="month"] .limit-label').textContent()).toContain('unlimited');
    const bar = await p.locator('.limit-row[data-window="day"] .limit-bar').getAttribute('aria-label');
    expect(bar).toMatch(/spent and .* reserved of \$5/);
    expect(await p.getByTestId('limit-concurrency').textContent()).toBe('0');
    await shoot('spend-limits', p);
    await p.close();
  });

  it('shows the certifications: route × provider, passed and failed, model and fingerprint', async () => {
    await page.getByRole('link', { name: 'Certifications' }).click();
    await page.locator('.cert-table tr[data-route="summary"][data-provider="budget"]').waitFor();
    expect(await page.locator('tr[data-route="summary"][data-provider="primary"]').getAttribute('data-status')).toBe('passed');
    expect(await page.locator('tr[data-route="summary"][data-provider="budget"]').getAttribute('data-status')).toBe('failed');
    expect(await page.locator('tr[data-route="demo"][data-provider="primary"]').getAttribute('data-status')).toBe('not_required');
    expect(await page.locator('tr[data-route="summary"][data-provider="primary"]').textContent()).toMatch(/fast-primary-1.*sha256:/);
    await shoot('certifications');
  });

  it('is usable from the keyboard and live: skip link, focus on each screen\'s heading, new jobs appear, dialogs close with Escape', async () => {
    await page.goto(`${server.url}/ui/#/jobs`);
    await page.reload();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');
    await page.goto(`${server.url}/ui/#/jobs/${jobs.hello.id}`);
    await page.locator('.timeline-row').first().waitFor();
    expect(await page.locator('[data-testid^="cancel-"]').count()).toBe(0); // terminal: nothing to cancel
    await page.goto(`${server.url}/ui/#/jobs`);
    await page.locator('tr[data-job]').first().waitFor();
    const link = page.locator(`tr[data-job="${jobs.hello.id}"] a`);
    await link.focus();
    await page.keyboard.press('Enter');
    await page.locator(`h1:has-text("${jobs.hello.id}")`).waitFor();

    // Live: a job made meanwhile appears in the open list without a reload.
    await page.goto(`${server.url}/ui/#/jobs`);
    await page.locator('tr[data-job]').first().waitFor();
    const extra = await server.createJob('refund-4003', 'demo', 'hang once more');
    await page.locator(`tr[data-job="${extra.id}"]`).waitFor();
    await server.settle(extra.id);
    // A dialog opens from the keyboard with the focus in its reason field, and Escape closes it changing nothing.
    await page.goto(`${server.url}/ui/#/jobs/${extra.id}`);
    const cancel = page.getByTestId(`cancel-${extra.id}`);
    await cancel.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: /Cancel job/ });
    await dialog.waitFor();
    expect(await page.evaluate(() => document.activeElement?.getAttribute('name'))).toBe('reason');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect((await server.api('GET', `/v1/jobs/${extra.id}`)).body.state).toBe('unknown');
  });

  it('reads on a phone: no horizontal scroll of the page, the timeline stacks', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await signIn(phone);
    await phone.goto(`${server.url}/ui/#/jobs/${jobs.hedge.id}`);
    await phone.locator('.timeline-row').first().waitFor();
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(1);
    await shoot('phone-job', phone);
    await phone.goto(`${server.url}/ui/#/jobs`);
    await phone.locator('tr[data-job]').first().waitFor();
    // The filters do not fill the first screen: the search and a toggle, then the jobs.
    const first = (await phone.locator('tr[data-job]').first().boundingBox())!;
    expect(first.y + first.height).toBeLessThan(844);
    await shoot('phone-jobs', phone);
    // Folded filters are one tap away, and what they set survives the fold.
    await phone.getByRole('button', { name: /^Filters/ }).click();
    await phone.getByLabel('State').selectOption('cancelled');
    await phone.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => phone.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual([jobs.cancelMe.id]);
    await phone.getByRole('button', { name: 'Fewer ▴' }).click();
    await phone.getByRole('button', { name: 'Filters (1 set) ▾' }).waitFor();
    await phone.getByLabel('Search').fill('refund-');
    await phone.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => phone.evaluate(() => location.hash)).toMatch(/state=cancelled.*|q=refund-.*state=cancelled/);
    await expect.poll(() => phone.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual([jobs.cancelMe.id]);
    // The doubt queue on a phone: its table scrolls in its own box, the page does not.
    await phone.goto(`${server.url}/ui/#/doubt`);
    await phone.locator('.doubt-table tbody tr').first().waitFor();
    expect(await phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(1);
    await shoot('phone-doubt', phone);
    await phone.close();
  });

  it('a long result wraps inside the page instead of running off its right edge', async () => {
    const long = `${'x'.repeat(300)} and then a sentence that goes on for a while ${'y'.repeat(200)}`;
    const job = await server.settle((await server.createJob('long-5001', 'demo', long)).id);
    expect(job.state).toBe('succeeded');
    for (const width of [1280, 390]) {
      const p = await context.newPage();
      await p.setViewportSize({ width, height: 844 });
      await signIn(p);
      await p.goto(`${server.url}/ui/#/jobs/${job.id}`);
      await p.getByText('Result', { exact: true }).click();
      const result = p.getByTestId('job-result');
      await result.waitFor();
      expect(await result.evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(1);
      expect(await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(1);
      if (width === 1280) await shoot('job-long-result', p);
      await p.close();
    }
  });

  it('the demo (no config at all) has prices: a few calls make its Spend page show what they cost, not a flat $0', async () => {
    const demo = await startDemoServer();
    const p = await context.newPage();
    try {
      const call = async (key: string, content: string) => {
        const res = await fetch(`${demo.url}/v1/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${DEMO_TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ route: 'demo', input: { messages: [{ role: 'user', content }] } }),
        });
        expect(res.status).toBe(201);
        const { id } = (await res.json()) as { id: string };
        const done = await fetch(`${demo.url}/v1/jobs/${id}?wait=10`, { headers: { authorization: `Bearer ${DEMO_TOKEN}` } });
        return (await done.json()) as { state: string; cost_usd: number | null };
      };
      const jobsMade = [await call('demo-1', 'hello'), await call('demo-2', 'please fail'), await call('demo-3', 'write me a haiku about retries')];
      expect(jobsMade.map((j) => j.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      for (const j of jobsMade) expect(j.cost_usd).toBeGreaterThan(0);
      const total = jobsMade.reduce((sum, j) => sum + (j.cost_usd ?? 0), 0);
      await p.goto(`${demo.url}/ui/`);
      await p.getByLabel('API token').fill(DEMO_TOKEN);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
      await p.getByRole('link', { name: 'Spend' }).click();
      await p.locator('.spend-table tr[data-route="demo"][data-provider="primary"]').waitFor();
      await expect.poll(() => money(p.getByTestId('spend-total').textContent())).toBeCloseTo(total, 6);
      expect(await money(p.getByTestId('spend-total').textContent())).toBeGreaterThan(0);
      await p.locator('.spend-chart canvas').waitFor();
      await shoot('demo-spend', p);
    } finally {
      await p.close();
      await demo.close();
    }
  }, 60_000);
  it('shows a tool call made through /mcp with its arguments and the tool\'s result', async () => {
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'pay.charge', arguments: { amount: 42, currency: 'EUR', note: 'blue mug' }, _meta: { 'onejob/idempotencyKey': 'mug-6001' } } };
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE_TOKEN}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify(call),
    });
    const answer = await res.json() as { result: { _meta: Record<string, string>; structuredContent: { id: string } } };
    const jobId = answer.result._meta['onejob/jobId']!;
    expect(answer.result.structuredContent.id).toMatch(/^ch_/);
    const p = await context.newPage();
    await signIn(p);
    await p.goto(`${server.url}/ui/#/jobs/${jobId}`);
    await p.getByRole('heading', { name: jobId }).waitFor();
    const args = p.locator('details', { has: p.getByText('Tool call pay.charge: arguments') });
    expect(await args.getAttribute('open')).not.toBeNull();
    expect(JSON.parse(await args.locator('pre').textContent() ?? '')).toEqual({ amount: 42, currency: 'EUR', note: 'blue mug' });
    const result = p.getByTestId('job-result');
    expect(await result.isVisible()).toBe(true);
    expect(JSON.parse(await result.textContent() ?? '')).toMatchObject({ content: [{ type: 'text', text: `charged 42 EUR (${answer.result.structuredContent.id})` }], structuredContent: { amount: 42, currency: 'EUR' } });
    await shoot('job-tool-call', p);
    await p.close();
  });

  it('serves everything from onejob itself: no request leaves the origin', async () => {
    const p = await context.newPage();
    const origins = new Set<string>();
    p.on('request', (r) => origins.add(new URL(r.url()).origin));
    await signIn(p);
    await p.goto(`${server.url}/ui/#/spend`);
    await p.locator('.spend-chart canvas').waitFor();
    expect([...origins]).toEqual([server.url]);
    await p.close();
  });
});
