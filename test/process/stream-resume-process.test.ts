/**
 * Resumable streams across processes (CONTRACT §13): two real `onejob serve`
 * processes on one database (PostgreSQL: woken by NOTIFY; one SQLite file:
 * by the re-read every waitRecheckMs), the first running the attempt (its
 * executor), the second with none. A client drops its stream on the first
 * and resumes on the second with `Last-Event-ID`; a duplicate joins on the
 * second: both receive live events while the provider is still held (the job
 * running), not the stored result at the end. What each client assembled
 * equals the job's result, no event twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';
import { chatChunkText as textOf, SseReader, type ReceivedEvent as Received } from '../support/sse-reader.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const OWNER = 'alice';
const TOKEN = 'tok_alice_process_0123456789';
const messages = [{ role: 'user', content: 'stream across processes' }];
const CHUNKS = ['One ', 'stream, ', 'two ', 'processes, ', 'no ', 'repeats.'];

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`streams resume across two serve processes on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let dir: string;
    const children: ChildProcess[] = [];
    let runner: number;
    let other: number;

    function startServe(port: number, args: string[]): ChildProcess {
      const child = spawn(process.execPath, [BIN, 'serve', '--config', join(dir, 'onejob.config.json'), '--port', String(port), '--host', '127.0.0.1', ...args], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr!.setEncoding('utf8');
      children.push(child);
      return child;
    }

    beforeAll(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      dir = mkdtempSync(join(tmpdir(), 'onejob-resume-'));
      writeFileSync(
        join(dir, 'onejob.config.json'),
        JSON.stringify({
          providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000 } },
          routes: { work: { providers: ['primary'] } },
          apiKeys: { [TOKEN]: OWNER },
        }),
      );
      [runner, other] = [await freePort(), await freePort()];
      startServe(runner, []);
      startServe(other, ['--no-executor']);
      for (const port of [runner, other]) await until('serve ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000);
    }, 90_000);
    afterAll(async () => {
      for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await fake?.close();
      await cleanup?.();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const open = async (port: number, key: string, lastEventId?: string): Promise<SseReader> => {
      const controller = new AbortController();
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        signal: controller.signal,
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
        body: JSON.stringify({ model: 'work', messages, stream: true }),
      });
      expect(res.status).toBe(200);
      return new SseReader(res, controller);
    };
    const jobState = async (key: string) => {
      const [job] = (await store.listJobs({ ownerId: OWNER })).jobs.filter((j) => j.idempotencyKey === key);
      return job ? (await store.getJob(OWNER, job.id))! : null;
    };

    it('a resume and a duplicate on the process without the executor receive live events before the job ends', async () => {
      const key = 'across-processes';
      // Content 200 ms apart, then held after the fifth: what the resume and the duplicate get after their first read can only come live.
      fake.script([{ chunks: CHUNKS, chunkDelayMs: 200, streamGate: { afterChunks: 5, gate: 'hold' } }]);
      const first = await open(runner, key);
      const got: Received[] = [];
      while (got.length < 2) got.push((await first.next())!);
      first.drop();
      expect(got.map((e) => e.id)).toEqual(['1-1', '1-2']);

      // The resume and a duplicate, on the other process, before the provider sent its third chunk.
      const resume = await open(other, key, got[1]!.id!);
      const duplicate = await open(other, key);
      const resumed: Received[] = [];
      while (resumed.map(textOf).join('') !== 'two processes, no ') resumed.push((await resume.next())!);
      const duplicated: Received[] = [];
      while (duplicated.map(textOf).join('') !== 'One stream, two processes, no ') duplicated.push((await duplicate.next())!);
      // All of it before the job ended: the provider is held after its fifth chunk.
      expect((await jobState(key))!.state).toBe('running');

      fake.release('hold');
      for (let e = await resume.next(); e !== null; e = await resume.next()) resumed.push(e);
      for (let e = await duplicate.next(); e !== null; e = await duplicate.next()) duplicated.push(e);

      const job = await until('succeeded', async () => ((await jobState(key))?.state === 'succeeded' ? await jobState(key) : null));
      const result = (job!.result as { content: string }).content;
      expect(result).toBe(CHUNKS.join(''));
      expect([...got, ...resumed].map(textOf).join('')).toBe(result);
      expect(duplicated.map(textOf).join('')).toBe(result);
      const ids = [...got, ...resumed].map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual(ids.map((_, i) => `1-${i + 1}`));
      // The same ids for everyone: the duplicate's are the first client's plus the resume's.
      expect(duplicated.map((e) => e.id)).toEqual(ids);
      expect(resumed.at(-1)!.data).toBe('[DONE]');
      expect(fake.calls).toHaveLength(1);
    }, 60_000);
  });
}
