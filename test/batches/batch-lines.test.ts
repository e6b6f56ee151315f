/**
 * A large batch against a fake provider that fails 5 % of the lines and
 * hangs 1 %, on both engines (CONTRACT §17): exactly one provider call per
 * line, the failed lines in the error file with the body their endpoint
 * answers, the hung ones in doubt holding the batch `in_progress` until
 * they are resolved; batch lines never take more than `batch.maxShare` of
 * the executor and interactive work runs beside a full batch.
 * `BATCH_LINES` sets the size (default 1,000; the final proof ran 10,000).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isBatchLine } from '../../src/executor/batch-share.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { chatLines, eventually, startBatchGateway, TOKEN, type BatchGateway } from './batch-harness.ts';

const N = Number(process.env.BATCH_LINES ?? 1_000);
const kind = (i: number): 'fail' | 'hang' | 'ok' => (i % 100 === 13 ? 'hang' : i % 20 === 7 ? 'fail' : 'ok');

async function api(gw: BatchGateway, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.origin}${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
}

async function uploadText(gw: BatchGateway, text: string): Promise<string> {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([text]), 'lines.jsonl');
  const res = await fetch(`${gw.origin}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form });
  const body = (await res.json()) as { id: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.id;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`a batch of ${N} lines (${db.name})`, () => {
    let gw: BatchGateway | undefined;
    afterEach(async () => {
      await gw?.close();
      gw = undefined;
    });

    it('one provider call per line; failed lines in the error file; hung lines in doubt hold the batch until resolved; never over maxShare', async () => {
      gw = await startBatchGateway(db, { timeoutMs: 1_000, concurrency: 16, maxShare: 0.5 });
      const g = gw;
      g.openaiFake.when({ contains: 'FAIL-' }, { status: 400, error: { message: 'refused by the fake' } });
      g.openaiFake.when({ contains: 'HANG-' }, { hang: true });
      let inFlight = 0;
      let most = 0;
      g.executor.events.on('attempt:claimed', (c) => {
        if (isBatchLine(c.job)) most = Math.max(most, ++inFlight);
      });
      const batchAttempts = new Set<string>();
      g.executor.events.on('attempt:claimed', (c) => void (isBatchLine(c.job) && batchAttempts.add(c.attempt.id)));
      g.executor.events.on('attempt:finished', (a) => void (batchAttempts.delete(a.id) && inFlight--));

      const text = chatLines(N, (i) => `${kind(i) === 'ok' ? 'line' : kind(i).toUpperCase()}-${i}`);
      const fileId = await uploadText(g, text);
      const created = await api(g, 'POST', '/v1/batches', { input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }, { 'idempotency-key': `big-${db.name}` });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const fails = Array.from({ length: N }, (_, i) => i).filter((i) => kind(i) === 'fail').length;
      const hangs = Array.from({ length: N }, (_, i) => i).filter((i) => kind(i) === 'hang').length;

      // Everything but the hung lines ends; the batch waits for them.
      const waiting = await eventually(() => api(g, 'GET', `/v1/batches/${id}`), (r) => r.body.request_counts.completed + r.body.request_counts.failed === N - hangs, 600_000, 500);
      expect(waiting.body.request_counts).toEqual({ total: N, completed: N - fails - hangs, failed: fails });
      await new Promise((r) => setTimeout(r, 500));
      expect((await api(g, 'GET', `/v1/batches/${id}`)).body.status).toBe('in_progress');
      expect(most).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(8);

      // Exactly one provider call per line.
      const perJob = new Map<string, number>();
      for (const c of g.openaiFake.calls) perJob.set(c.jobId!, (perJob.get(c.jobId!) ?? 0) + 1);
      expect(perJob.size).toBe(N);
      expect([...perJob.values()].every((n) => n === 1)).toBe(true);

      // The hung lines are in doubt; resolving them lets the batch finish.
      const doubt = await eventually(() => g.store.insights.doubtQueue({ ownerId: 'alice', limit: 200 }), (r) => r.rows.length >= hangs, 30_000, 300);
      expect(doubt.rows).toHaveLength(hangs);
      for (const d of doubt.rows) {
        expect(d.job.idempotencyKey.startsWith(`batch:${id}:`)).toBe(true);
        expect(JSON.stringify(d.job.input)).toContain('HANG-');
        const r = await api(g, 'POST', `/v1/attempts/${d.attempt.id}/resolve`, { state: 'succeeded', result: { content: 'resolved by hand' } });
        expect(r.status).toBe(200);
      }
      const done = await eventually(() => api(g, 'GET', `/v1/batches/${id}`), (r) => r.body.status === 'completed', 120_000, 300);
      expect(done.body.request_counts).toEqual({ total: N, completed: N - fails, failed: fails });

      const output = (await api(g, 'GET', `/v1/files/${done.body.output_file_id}/content`)).body as string;
      const outLines = output.trim().split('\n').map((l) => JSON.parse(l));
      expect(outLines).toHaveLength(N - fails);
      expect(outLines.filter((l) => l.response.body.choices[0].message.content === 'resolved by hand')).toHaveLength(hangs);
      const errors = ((await api(g, 'GET', `/v1/files/${done.body.error_file_id}/content`)).body as string).trim().split('\n').map((l) => JSON.parse(l));
      expect(errors).toHaveLength(fails);
      for (const e of errors) {
        expect(kind(Number(String(e.custom_id).slice(4)))).toBe('fail');
        expect(e.response.status_code).toBe(502);
        expect(e.response.body.code).toBe('job_failed');
        expect(e.response.body.error.code).toBe('job_failed');
      }
      // Every custom_id exactly once across both files.
      expect(new Set([...outLines, ...errors].map((l) => l.custom_id)).size).toBe(N);
      // No call after the end either.
      expect(g.openaiFake.calls.length).toBe(N);
    }, 900_000);

    it('interactive work runs beside a batch that fills its share; the share holds while the lines wait', async () => {
      gw = await startBatchGateway(db, { concurrency: 4, maxShare: 0.5 });
      const g = gw;
      g.openaiFake.when({ contains: 'gated-' }, { gate: 'share', reply: 'batch done' });
      const fileId = await uploadText(g, chatLines(10, (i) => `gated-${i}`));
      const created = await api(g, 'POST', '/v1/batches', { input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }, { 'idempotency-key': `share-${db.name}` });
      expect(created.status).toBe(201);
      await eventually(async () => g.openaiFake.calls.length, (n) => n >= 2, 20_000);
      await new Promise((r) => setTimeout(r, 500));
      // Half of concurrency 4: two lines at the provider, no more.
      expect(g.openaiFake.calls.length).toBe(2);
      const chat = await api(g, 'POST', '/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'interactive' }] }, { 'idempotency-key': `interactive-${db.name}` });
      expect(chat.status).toBe(200);
      expect(chat.body.choices[0].message.content).toBe('interactive');
      g.openaiFake.release('share');
      const done = await eventually(() => api(g, 'GET', `/v1/batches/${created.body.id}`), (r) => r.body.status === 'completed', 30_000, 200);
      expect(done.body.request_counts).toEqual({ total: 10, completed: 10, failed: 0 });
    }, 60_000);
  });
}
