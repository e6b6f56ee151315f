/**
 * Retention of batches and files (CONTRACT §9, §17), on both engines: a
 * finished batch older than the window is deleted with its lines and its
 * output files, and its input file once no batch uses it; a batch still
 * running and its input file are kept.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RetentionSweeper } from '../../src/runtime/retention-sweeper.ts';
import { TEST_DATABASES } from '../support/databases.ts';
import { chatLines, countRows, eventually, startBatchGateway, TOKEN, type BatchGateway } from './batch-harness.ts';

async function call(gw: BatchGateway, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.origin}${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
}

async function upload(gw: BatchGateway, text: string): Promise<string> {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([text]), 'f.jsonl');
  const res = await fetch(`${gw.origin}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form });
  return ((await res.json()) as { id: string }).id;
}

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`retention of batches (${db.name})`, () => {
    let gw: BatchGateway | undefined;
    afterEach(async () => {
      await gw?.close();
      gw = undefined;
    });

    it('deletes a finished batch, its lines and files; keeps a running batch and its input file', async () => {
      gw = await startBatchGateway(db);
      const g = gw;
      g.openaiFake.when({ contains: 'keep-' }, { gate: 'keep', reply: 'x' });
      const doneFile = await upload(g, chatLines(3));
      const runningFile = await upload(g, chatLines(2, (i) => `keep-${i}`));
      const done = await call(g, 'POST', '/v1/batches', { input_file_id: doneFile, endpoint: '/v1/chat/completions', completion_window: '24h' }, { 'idempotency-key': 'ret-done' });
      const running = await call(g, 'POST', '/v1/batches', { input_file_id: runningFile, endpoint: '/v1/chat/completions', completion_window: '24h' }, { 'idempotency-key': 'ret-running' });
      const finished = await eventually(() => call(g, 'GET', `/v1/batches/${done.body.id}`), (r) => r.body.status === 'completed');
      await eventually(async () => g.openaiFake.calls.length, (n) => n === 5);

      const sweeper = new RetentionSweeper({ store: g.store, finishedJobsDays: 30 });
      const r = await sweeper.sweepOnce({ olderThanMs: 0 });
      expect(r?.deletedBatches).toBe(1);
      expect((await call(g, 'GET', `/v1/batches/${done.body.id}`)).status).toBe(404);
      expect((await call(g, 'GET', `/v1/files/${finished.body.output_file_id}`)).status).toBe(404);
      expect((await call(g, 'GET', `/v1/files/${doneFile}`)).status).toBe(404);
      expect(await countRows(g.url, 'batch_lines', `batch_id = '${done.body.id}'`)).toBe(0);
      expect(await countRows(g.url, 'file_lines', `file_id = '${doneFile}'`)).toBe(0);
      // The running batch and its input are kept.
      expect((await call(g, 'GET', `/v1/batches/${running.body.id}`)).body.status).toBe('in_progress');
      expect((await call(g, 'GET', `/v1/files/${runningFile}`)).status).toBe(200);
      g.openaiFake.release('keep');
      await eventually(() => call(g, 'GET', `/v1/batches/${running.body.id}`), (x) => x.body.status === 'completed');
      // The same key after its batch was deleted creates a new batch (as a job's key after retention).
      const again = await call(g, 'POST', '/v1/batches', { input_file_id: runningFile, endpoint: '/v1/chat/completions', completion_window: '24h' }, { 'idempotency-key': 'ret-done' });
      expect(again.status).toBe(201);
      expect(again.body.id).not.toBe(done.body.id);
    });
  });
}
