/**
 * Batches through a real `onejob serve` (bin/onejob, a child process) on
 * both engines (CONTRACT §17): the official openai SDK drives files.* and
 * batches.*; kill -9 of the process running the executor mid-batch loses no
 * line and runs none twice; kill -9 of the API mid-upload leaves nothing
 * visible, and the upload made again runs once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI, { toFile } from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { chatLines, countRows, eventually } from '../batches/batch-harness.ts';
import { listenUrl } from '../client/onejob-serve.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const TOKEN = 'tok_alice_batchproc_0123456789';

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`batches through onejob serve on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let dir: string;
    const children: ChildProcess[] = [];
    let seq = 0;
    const withKey = () => ({ headers: { 'Idempotency-Key': `proc-${db.name}-${Date.now()}-${++seq}` } });

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      dir = mkdtempSync(join(tmpdir(), 'onejob-batch-proc-'));
      writeFileSync(join(dir, 'onejob.config.json'), JSON.stringify({
        providers: { gpt: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000, pricing: { inputPerMTok: 1, outputPerMTok: 2 } } },
        routes: { gpt: { providers: ['gpt'] } },
        apiKeys: { [TOKEN]: 'alice' },
      }));
    });
    afterEach(async () => {
      for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await fake.close();
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    async function serve(args: string[] = []): Promise<{ child: ChildProcess; origin: string }> {
      const child = spawn(process.execPath, [BIN, 'serve', '--config', join(dir, 'onejob.config.json'), '--host', '127.0.0.1', '--port', '0', ...args], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      return { child, origin: await listenUrl(child) };
    }
    const sdk = (origin: string) => new OpenAI({ apiKey: TOKEN, baseURL: `${origin}/v1`, maxRetries: 2, timeout: 20_000 });
    const killed = async (c: ChildProcess) => {
      const exited = new Promise((ok) => c.once('exit', ok));
      c.kill('SIGKILL');
      await exited;
    };
    const callsPerJob = () => {
      const m = new Map<string, number>();
      for (const c of fake.calls) m.set(c.jobId!, (m.get(c.jobId!) ?? 0) + 1);
      return m;
    };

    it('the openai SDK: files.create, batches.create/retrieve/list/cancel, files.content', async () => {
      const { origin } = await serve();
      const client = sdk(origin);
      const file = await client.files.create({ file: await toFile(Buffer.from(chatLines(25)), 'in.jsonl'), purpose: 'batch' });
      expect(await client.files.retrieve(file.id)).toMatchObject({ id: file.id, purpose: 'batch', status: 'processed' });
      const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      const done = await eventually(() => client.batches.retrieve(batch.id), (b) => b.status === 'completed', 60_000, 200);
      expect(done.request_counts).toEqual({ total: 25, completed: 25, failed: 0 });
      const out = (await (await client.files.content(done.output_file_id!)).text()).trim().split('\n').map((l) => JSON.parse(l));
      expect(out.map((l) => l.custom_id)).toEqual(Array.from({ length: 25 }, (_, i) => `req-${i}`));
      expect(out.every((l) => l.response.status_code === 200 && l.response.body.object === 'chat.completion')).toBe(true);

      fake.when({ contains: 'held-' }, { gate: 'held', reply: 'x' });
      const held = await client.files.create({ file: await toFile(Buffer.from(chatLines(30, (i) => `held-${i}`)), 'held.jsonl'), purpose: 'batch' });
      const second = await client.batches.create({ input_file_id: held.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      const listed: string[] = [];
      for await (const b of client.batches.list({ limit: 1 })) listed.push(b.id);
      expect(listed).toEqual([second.id, batch.id]);
      await eventually(async () => fake.calls.filter((c) => JSON.stringify(c.body).includes('held-')).length, (n) => n > 0, 20_000);
      await client.batches.cancel(second.id);
      const cancelled = await eventually(() => client.batches.retrieve(second.id), (b) => b.status === 'cancelled', 60_000, 200);
      fake.release('held');
      expect(cancelled.request_counts!.completed + cancelled.request_counts!.failed).toBeLessThanOrEqual(30);
      expect([...callsPerJob().values()].every((n) => n === 1)).toBe(true);
    }, 120_000);

    it('kill -9 of the process running the executor mid-batch: after a restart every line has one job, no line was sent twice, the ones it held are in doubt', async () => {
      fake.setDefault({ delayMs: 30 });
      const first = await serve(['--lease-ms', '1500']);
      const N = 400;
      const file = await sdk(first.origin).files.create({ file: await toFile(Buffer.from(chatLines(N)), 'in.jsonl'), purpose: 'batch' });
      const batch = await sdk(first.origin).batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      await eventually(async () => fake.calls.length, (n) => n >= 60, 60_000, 20);
      await killed(first.child);
      const second = await serve(['--lease-ms', '1500']);
      const client = sdk(second.origin);
      // Every line ends or is in doubt (attempts the dead process held: the provider may have run them).
      const settled = await eventually(async () => ({
        b: await client.batches.retrieve(batch.id),
        unknown: await countRows(url, 'jobs', `batch_id = '${batch.id}' AND state = 'unknown'`),
      }), (s) => s.b.request_counts!.completed + s.b.request_counts!.failed + s.unknown === N, 120_000, 300);
      expect(await countRows(url, 'jobs', `batch_id = '${batch.id}'`)).toBe(N);
      expect(await countRows(url, 'batch_lines', `batch_id = '${batch.id}'`)).toBe(N);
      expect([...callsPerJob().values()].every((n) => n === 1)).toBe(true);
      expect(callsPerJob().size).toBe(N);
      if (settled.unknown > 0) {
        expect(settled.b.status).toBe('in_progress');
        const doubt = await store.insights.doubtQueue({ ownerId: 'alice', limit: 200 });
        for (const d of doubt.rows) {
          const r = await fetch(`${second.origin}/v1/attempts/${d.attempt.id}/resolve`, {
            method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ state: 'succeeded', result: { content: 'resolved' } }),
          });
          expect(r.status).toBe(200);
        }
      }
      const done = await eventually(() => client.batches.retrieve(batch.id), (b) => b.status === 'completed', 60_000, 300);
      expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
      const out = (await (await client.files.content(done.output_file_id!)).text()).trim().split('\n');
      expect(new Set(out.map((l) => JSON.parse(l).custom_id)).size).toBe(N);
      expect(fake.calls.length).toBe(N);
    }, 240_000);

    it('kill -9 of the API mid-upload: the cut upload is never visible; the same upload again runs each line once', async () => {
      const first = await serve();
      const text = chatLines(1_200);
      const bytes = Buffer.from(text);
      const head = bytes.subarray(0, Math.floor(bytes.length * 0.6));
      const boundary = 'onejobboundary';
      const preamble = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`);
      let release: () => void = () => undefined;
      const stall = new Promise<void>((r) => (release = r));
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(preamble);
          controller.enqueue(head);
          await stall;
          controller.close();
        },
      });
      const upload = fetch(`${first.origin}/v1/files`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, body, duplex: 'half',
      } as RequestInit).catch((e: unknown) => e);
      // A page of its lines is stored (under an upload nobody sees) when the process dies.
      await eventually(() => countRows(url, 'file_lines'), (n) => n >= 500, 30_000, 50);
      await killed(first.child);
      release();
      expect(await upload).toBeInstanceOf(Error);
      expect(await countRows(url, 'files', "status = 'uploading'")).toBe(1);
      const second = await serve();
      const client = sdk(second.origin);
      const cut = await store.batches.listOpenBatches(10);
      expect(cut).toHaveLength(0);
      const file = await client.files.create({ file: await toFile(bytes, 'in.jsonl'), purpose: 'batch' });
      expect(file.bytes).toBe(bytes.length);
      const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, withKey());
      const done = await eventually(() => client.batches.retrieve(batch.id), (b) => b.status === 'completed', 120_000, 300);
      expect(done.request_counts).toEqual({ total: 1_200, completed: 1_200, failed: 0 });
      expect(fake.calls.length).toBe(1_200);
      expect([...callsPerJob().values()].every((n) => n === 1)).toBe(true);
    }, 240_000);
  });
}
