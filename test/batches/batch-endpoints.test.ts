/**
 * What a batch line answers on each endpoint, and a batch's window
 * (CONTRACT §17), on both engines: a `/v1/messages` line's body is the
 * Messages answer (Anthropic's error body when it failed), a `/v1/responses`
 * line's the Response; past `completion_window` the batch is `expired`, its
 * unstarted lines never start, the running ones finish and are kept.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { countRows, eventually, execSql, startBatchGateway, TOKEN, type BatchGateway } from './batch-harness.ts';

async function call(gw: BatchGateway, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.origin}${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
}

async function runBatch(gw: BatchGateway, lines: unknown[], endpoint: string, key: string): Promise<string> {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([lines.map((l) => JSON.stringify(l)).join('\n')]), 'f.jsonl');
  const up = await fetch(`${gw.origin}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form });
  const file = (await up.json()) as { id: string };
  expect(up.status, JSON.stringify(file)).toBe(200);
  const created = await call(gw, 'POST', '/v1/batches', { input_file_id: file.id, endpoint, completion_window: '24h' }, { 'idempotency-key': key });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.id as string;
}

const jsonl = (text: string): any[] => text.trim().split('\n').map((l) => JSON.parse(l));

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`batch lines per endpoint, and the window (${db.name})`, () => {
    let gw: BatchGateway | undefined;
    afterEach(async () => {
      await gw?.close();
      gw = undefined;
    });

    it('a /v1/messages line answers the Messages body; a failed one Anthropic\'s error body, in the error file', async () => {
      gw = await startBatchGateway(db);
      gw.anthropicFake.when({ contains: 'refuse' }, { status: 400, error: { message: 'no' } });
      const line = (id: string, text: string) => ({ custom_id: id, method: 'POST', url: '/v1/messages', body: { model: 'claude', max_tokens: 50, messages: [{ role: 'user', content: text }] } });
      const id = await runBatch(gw, [line('a', 'hello claude'), line('b', 'please refuse')], '/v1/messages', `msg-${db.name}`);
      const done = await eventually(() => call(gw!, 'GET', `/v1/batches/${id}`), (r) => r.body.status === 'completed');
      expect(done.body.request_counts).toEqual({ total: 2, completed: 1, failed: 1 });
      const [ok] = jsonl((await call(gw, 'GET', `/v1/files/${done.body.output_file_id}/content`)).body);
      expect(ok.custom_id).toBe('a');
      expect(ok.response.body).toMatchObject({ type: 'message', role: 'assistant', id: `msg_${ok.response.request_id}` });
      expect(ok.response.body.content[0]).toMatchObject({ type: 'text', text: 'hello claude' });
      const [bad] = jsonl((await call(gw, 'GET', `/v1/files/${done.body.error_file_id}/content`)).body);
      expect(bad.custom_id).toBe('b');
      expect(bad.response.status_code).toBe(502);
      expect(bad.response.body).toMatchObject({ type: 'error', error: { type: 'api_error' }, code: 'job_failed' });
    });

    it('a /v1/responses line answers the Response', async () => {
      gw = await startBatchGateway(db);
      const id = await runBatch(gw, [{ custom_id: 'r1', method: 'POST', url: '/v1/responses', body: { model: 'gpt', input: 'respond please' } }], '/v1/responses', `resp-${db.name}`);
      const done = await eventually(() => call(gw!, 'GET', `/v1/batches/${id}`), (r) => r.body.status === 'completed');
      const [line] = jsonl((await call(gw, 'GET', `/v1/files/${done.body.output_file_id}/content`)).body);
      expect(line.response.body).toMatchObject({ object: 'response', status: 'completed', id: `resp_${line.response.request_id}` });
      expect(JSON.stringify(line.response.body.output)).toContain('respond please');
    });

    it('past completion_window: expired, unstarted lines never start, running lines finish and are kept', async () => {
      gw = await startBatchGateway(db, { concurrency: 4, maxShare: 0.5 });
      const g = gw;
      g.openaiFake.when({ contains: 'win-' }, { gate: 'window', reply: 'made it' });
      const lines = Array.from({ length: 10 }, (_, i) => ({ custom_id: `w${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt', messages: [{ role: 'user', content: `win-${i}` }] } }));
      const id = await runBatch(g, lines, '/v1/chat/completions', `win-${db.name}`);
      await eventually(async () => g.openaiFake.calls.length, (n) => n === 2, 20_000);
      // The window ends (what 24 hours would do).
      await execSql(g.url, `UPDATE batches SET expires_at = ${db.name === 'sqlite' ? Date.now() - 1_000 : "now() - interval '1 second'"} WHERE id = '${id}'`);
      await eventually(() => call(g, 'GET', `/v1/batches/${id}`), (r) => r.body.status === 'finalizing', 20_000);
      await eventually(() => countRows(g.url, 'jobs', `batch_id = '${id}' AND state = 'queued'`), (n) => n === 0, 20_000);
      g.openaiFake.release('window');
      const done = await eventually(() => call(g, 'GET', `/v1/batches/${id}`), (r) => r.body.status === 'expired', 20_000);
      expect(done.body.request_counts).toEqual({ total: 10, completed: 2, failed: 8 });
      expect(done.body.expired_at).not.toBeNull();
      expect(g.openaiFake.calls.length).toBe(2);
      const errors = jsonl((await call(g, 'GET', `/v1/files/${done.body.error_file_id}/content`)).body);
      expect(errors).toHaveLength(8);
      expect(errors.every((e) => e.response === null && e.error.code === 'batch_expired')).toBe(true);
      expect(jsonl((await call(g, 'GET', `/v1/files/${done.body.output_file_id}/content`)).body).map((l) => l.response.body.choices[0].message.content)).toEqual(['made it', 'made it']);
    });
  });
}
