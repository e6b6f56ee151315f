/**
 * The official `openai` SDK drives files.* and batches.* against the
 * gateway over a real socket, on SQLite and PostgreSQL (CONTRACT §17):
 * upload, create, retrieve, list (cursor pages), cancel, content; one key
 * is one batch; a bad line is 400 naming it and stores nothing; another
 * owner sees nothing.
 */
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../support/databases.ts';
import { chatLines, countRows, eventually, startBatchGateway, TOKEN, TOKEN_BOB, type BatchGateway } from './batch-harness.ts';

for (const db of TEST_DATABASES) {
  describe.skipIf(db.skip !== null)(`the openai SDK's files and batches (${db.name})`, () => {
    let gw: BatchGateway;
    beforeAll(async () => {
      gw = await startBatchGateway(db);
    });
    afterAll(async () => {
      await gw?.close();
    });
    const client = (token = TOKEN) => new OpenAI({ apiKey: token, baseURL: `${gw.origin}/v1`, maxRetries: 2, timeout: 15_000 });
    let seq = 0;
    // The SDK sends no Idempotency-Key of its own; a create names its intent with one (CONTRACT §3), as the SDK lets every call do.
    const withKey = () => ({ headers: { 'Idempotency-Key': `batch-${db.name}-${Date.now()}-${++seq}` } });
    const upload = async (text: string, name = 'in.jsonl') => client().files.create({ file: await toFile(Buffer.from(text), name), purpose: 'batch' });

    it('files.create stores the lines; files.retrieve and files.content answer them; a batch runs every line once and its output file has each line', async () => {
      const text = chatLines(20);
      const file = await upload(text);
      expect(file).toMatchObject({ object: 'file', purpose: 'batch', filename: 'in.jsonl', bytes: Buffer.byteLength(text), status: 'processed' });
      expect(await client().files.retrieve(file.id)).toMatchObject({ id: file.id, bytes: Buffer.byteLength(text) });
      expect(await (await client().files.content(file.id)).text()).toBe(text);

      const batch = await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'one' } }, withKey());
      expect(batch).toMatchObject({ object: 'batch', input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'one' } });
      expect(['validating', 'in_progress']).toContain(batch.status);
      expect(batch.request_counts).toEqual({ total: 20, completed: 0, failed: 0 });

      const done = await eventually(() => client().batches.retrieve(batch.id), (b) => b.status === 'completed');
      expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
      expect(done.error_file_id).toBeNull();
      expect(done.completed_at).toBeGreaterThanOrEqual(done.created_at);
      expect((done as unknown as { onejob: { cost_usd: number } }).onejob.cost_usd).toBeGreaterThan(0);

      const outText = await (await client().files.content(done.output_file_id!)).text();
      expect((await client().files.retrieve(done.output_file_id!)).bytes).toBe(Buffer.byteLength(outText));
      const out = outText.trim().split('\n').map((l) => JSON.parse(l));
      expect(out).toHaveLength(20);
      for (let i = 0; i < 20; i++) {
        const line = out[i];
        expect(line.custom_id).toBe(`req-${i}`);
        expect(line.error).toBeNull();
        expect(line.response.status_code).toBe(200);
        expect(line.response.body.object).toBe('chat.completion');
        expect(line.response.body.choices[0].message.content).toBe(`line-${i}`);
        expect(line.id).toBe(`batch_req_${line.response.request_id}`);
        // The line's job: keyed batch:<batch id>:<custom_id>, under the batch's owner.
        const job = await gw.store.getJob('alice', line.response.request_id);
        expect(job?.idempotencyKey).toBe(`batch:${batch.id}:req-${i}`);
      }
      // Exactly one provider call per line, and no hedge although the route hedges interactive work after 50 ms.
      const perJob = new Map<string, number>();
      for (const c of gw.openaiFake.calls) perJob.set(c.jobId!, (perJob.get(c.jobId!) ?? 0) + 1);
      for (const line of out) expect(perJob.get(line.response.request_id)).toBe(1);
    });

    it('the same create twice with one Idempotency-Key is one batch; another body with that key is 409 idempotency_key_reused', async () => {
      const file = await upload(chatLines(3));
      const key = `batch-key-${db.name}-${Date.now()}`;
      const body = { input_file_id: file.id, endpoint: '/v1/chat/completions' as const, completion_window: '24h' as const };
      const [a, b] = await Promise.all([
        client().batches.create(body, { headers: { 'Idempotency-Key': key } }),
        client().batches.create(body, { headers: { 'Idempotency-Key': key } }),
      ]);
      expect(a.id).toBe(b.id);
      const replay = await fetch(`${gw.origin}/v1/batches`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(body),
      });
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(((await replay.json()) as { id: string }).id).toBe(a.id);
      const reused = await fetch(`${gw.origin}/v1/batches`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ ...body, metadata: { other: 'yes' } }),
      });
      expect(reused.status).toBe(409);
      expect(((await reused.json()) as { code: string }).code).toBe('idempotency_key_reused');
      const missing = await fetch(`${gw.origin}/v1/batches`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
      });
      expect(missing.status).toBe(400);
      expect(((await missing.json()) as { code: string }).code).toBe('idempotency_key_missing');
      expect(await countRows(gw.url, 'batches', `input_file_id = '${file.id}'`)).toBe(1);
      await eventually(() => client().batches.retrieve(a.id), (x) => x.status === 'completed');
      expect(await countRows(gw.url, 'jobs', `batch_id = '${a.id}'`)).toBe(3);
    });

    it('batches.list pages newest first with after/limit, first_id/last_id and has_more', async () => {
      const file = await upload(chatLines(1));
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey())).id);
      const raw = await fetch(`${gw.origin}/v1/batches?limit=2`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const first = (await raw.json()) as { object: string; data: { id: string }[]; first_id: string; last_id: string; has_more: boolean };
      expect(first.object).toBe('list');
      expect(first.data.map((b) => b.id)).toEqual([ids[2], ids[1]]);
      expect(first).toMatchObject({ first_id: ids[2], last_id: ids[1], has_more: true });
      const seen: string[] = [];
      for await (const b of client().batches.list({ limit: 2 })) seen.push(b.id);
      expect(seen.slice(0, 3)).toEqual([ids[2], ids[1], ids[0]]);
      expect(new Set(seen).size).toBe(seen.length);
    });

    it('batches.cancel: unstarted lines never start, running ones are cancelled, the batch ends cancelled with them in the error file', async () => {
      gw.openaiFake.when({ contains: 'slow-' }, { gate: 'cancel-test', reply: 'late' });
      const file = await upload(chatLines(40, (i) => `slow-${i}`));
      const batch = await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      await eventually(async () => gw.openaiFake.calls.filter((c) => JSON.stringify(c.body).includes('slow-')).length, (n) => n >= 1);
      const cancelling = await client().batches.cancel(batch.id);
      expect(['cancelling', 'cancelled']).toContain(cancelling.status);
      const ended = await eventually(() => client().batches.retrieve(batch.id), (b) => b.status === 'cancelled');
      // Counted once the batch is cancelled: a line whose attempt an executor claimed just before the cancel's
      // commit may still reach the provider while the cancel is answered (it is then cancelled as running).
      const started = gw.openaiFake.calls.filter((c) => JSON.stringify(c.body).includes('slow-')).length;
      gw.openaiFake.release('cancel-test');
      expect(ended.cancelled_at).not.toBeNull();
      // Nothing started after the batch was cancelled: every call the fake saw was there by then.
      await new Promise((r) => setTimeout(r, 300));
      expect(gw.openaiFake.calls.filter((c) => JSON.stringify(c.body).includes('slow-')).length).toBe(started);
      const errors = (await (await client().files.content(ended.error_file_id!)).text()).trim().split('\n').map((l) => JSON.parse(l));
      expect(errors.length + ended.request_counts!.completed).toBe(ended.request_counts!.completed + ended.request_counts!.failed);
      expect(errors.every((l) => l.response === null && l.error.code === 'batch_cancelled')).toBe(true);
    });

    it('a malformed line, a duplicate custom_id or an unknown route is 400 naming the line, and nothing is stored', async () => {
      const before = await countRows(gw.url, 'files');
      const beforeLines = await countRows(gw.url, 'file_lines');
      const good = chatLines(700).trim().split('\n');
      const cases: [string, number, RegExp][] = [
        [[...good, '{not json'].join('\n'), 701, /not valid JSON/],
        [[...good.slice(0, 600), good[3]!].join('\n'), 601, /custom_id "req-3" is used by an earlier line/],
        [[...good.slice(0, 2), good[2]!.replace('"model":"gpt"', '"model":"nope"')].join('\n'), 3, /names no configured route/],
        [[good[0]!, good[1]!.replace('"POST"', '"GET"')].join('\n'), 2, /method must be "POST"/],
      ];
      for (const [text, line, why] of cases) {
        const e = await upload(text).then(() => null, (err: unknown) => err);
        expect(e).toBeInstanceOf(OpenAI.BadRequestError);
        const body = (e as InstanceType<typeof OpenAI.BadRequestError>).error as { message: string; code: string; line: number };
        expect(body.code).toBe('invalid_request');
        expect(body.line).toBe(line);
        expect(body.message).toMatch(why);
      }
      expect(await countRows(gw.url, 'files')).toBe(before);
      expect(await countRows(gw.url, 'file_lines')).toBe(beforeLines);
    });

    it("another owner's file and batch are 404, and the batch is not in its list", async () => {
      const file = await upload(chatLines(1));
      const batch = await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      await expect(client(TOKEN_BOB).files.retrieve(file.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client(TOKEN_BOB).batches.retrieve(batch.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client(TOKEN_BOB).batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey())).rejects.toBeInstanceOf(OpenAI.BadRequestError);
      const bobs = await client(TOKEN_BOB).batches.list();
      expect(bobs.data.map((b) => b.id)).not.toContain(batch.id);
    });
  });
}
