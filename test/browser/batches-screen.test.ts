/**
 * The dashboard's Batches screen in headless Chromium (CONTRACT §17, §10):
 * a batch with its progress and cost; its id opens its lines, each a job
 * keyed `batch:<id>:<custom_id>`, each linking to its job.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { chatLines, eventually, startBatchGateway, TOKEN, type BatchGateway } from '../batches/batch-harness.ts';
import { CHROMIUM, CHROMIUM_ARGS, ensureDashboardBuilt } from './dashboard-harness.ts';

const SKIP = existsSync(CHROMIUM) ? null : `SKIPPED: ${CHROMIUM} is absent`;

describe.skipIf(SKIP !== null)('the Batches screen', () => {
  let gw: BatchGateway;
  let context: BrowserContext;
  let profile: string;
  let batchId: string;

  beforeAll(async () => {
    ensureDashboardBuilt();
    gw = await startBatchGateway(TEST_DATABASES.find((d) => d.name === 'sqlite')!);
    gw.openaiFake.when({ contains: 'FAIL-' }, { status: 400 });
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([chatLines(5, (i) => (i === 3 ? 'FAIL-3' : `line-${i}`))]), 'lines.jsonl');
    const file = (await (await fetch(`${gw.origin}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form })).json()) as { id: string };
    const res = await fetch(`${gw.origin}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': 'ui-batch' },
      body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    });
    batchId = ((await res.json()) as { id: string }).id;
    await eventually(async () => ((await (await fetch(`${gw.origin}/v1/batches/${batchId}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { status: string }).status, (s) => s === 'completed');
    profile = mkdtempSync(join(tmpdir(), 'onejob-chromium-batches-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, viewport: { width: 1280, height: 860 } });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await gw?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('lists the batch with its progress and cost; its id opens its lines, each linking to its job', async () => {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${gw.origin}/ui/`);
    await page.getByLabel('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('heading', { name: 'Batches', level: 1 }).waitFor();
    const row = page.locator('table.batches tbody tr', { hasText: batchId });
    await expect(row.textContent()).resolves.toContain('completed');
    await expect(row.textContent()).resolves.toContain('4 answered · 1 failed · 0 to come');
    expect(Number((await row.locator('td').nth(3).textContent())?.replace(/[^0-9.]/g, ''))).toBeGreaterThan(0);
    await row.getByRole('link', { name: batchId }).click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    // The batch's lines, each a job under its key batch:<id>:<custom_id>, each linking to its job.
    await page.waitForFunction(() => document.querySelectorAll('tr[data-job]').length === 5, undefined, { timeout: 15_000 });
    const titles = await page.locator('tr[data-job] a').evaluateAll((as) => as.map((a) => a.getAttribute('title')));
    expect(titles.sort()).toEqual([0, 1, 2, 3, 4].map((i) => `Idempotency-Key batch:${batchId}:req-${i}`));
    const first = page.locator('tr[data-job]').first();
    const jobId = await first.getAttribute('data-job');
    await first.locator('a').click();
    await page.waitForURL(new RegExp(`#/jobs/${jobId}`));
  }, 60_000);
});
