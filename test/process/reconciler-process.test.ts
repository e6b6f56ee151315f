/**
 * The reconciler in real processes (CONTRACT §11): an `executor` process
 * beside a `serve --no-executor` resolves a lost answer by lookup; an
 * executor killed -9 mid-task leaves its attempt to another, whose rescuer
 * and reconciler end the doubt. The work is submitted upstream once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const OWNER = 'alice';
const TOKEN = 'tok_alice_process_0123456789';
const INPUT = { messages: [{ role: 'user', content: 'work' }] };

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const db of TEST_DATABASES) {
  describe.skipIf(Boolean(db.skip))(`reconciler processes on ${db.name}`, () => {
    let store: JobStore;
    let url: string;
    let cleanup: () => Promise<void>;
    let fake: FakeProvider;
    let dir: string;
    const children: ChildProcess[] = [];

    beforeEach(async () => {
      ({ store, url, cleanup } = await createTestStore(db));
      fake = await startFakeProvider();
      dir = mkdtempSync(join(tmpdir(), 'onejob-rec-'));
      writeFileSync(
        join(dir, 'onejob.config.json'),
        JSON.stringify({
          providers: {
            stored: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 2_000, lookup: 'stored-completions', maxDurationMs: 60_000 },
            tasks: { type: 'task', baseUrl: `${fake.url}/v1/tasks`, timeoutMs: 60_000, pollIntervalMs: 200, maxDurationMs: 600_000 },
          },
          routes: { chat: { providers: ['stored'] }, render: { providers: ['tasks'] } },
          apiKeys: { [TOKEN]: OWNER },
        }),
      );
    });
    afterEach(async () => {
      for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await fake.close();
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    function start(args: string[]): ChildProcess {
      const child = spawn(process.execPath, [BIN, ...args, '--config', join(dir, 'onejob.config.json')], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr!.setEncoding('utf8');
      children.push(child);
      return child;
    }

    it('an executor process beside serve --no-executor resolves an answer lost after the work by lookup', async () => {
      fake.script([{ reply: 'made upstream', loseAnswer: true }]);
      const port = await freePort();
      start(['serve', '--no-executor', '--port', String(port), '--host', '127.0.0.1']);
      start(['executor']);
      const api = `http://127.0.0.1:${port}`;
      await until('serve ready', async () => (await fetch(`${api}/readyz`).catch(() => null))?.status === 200, 60_000);
      const created = await fetch(`${api}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'lost-answer', 'content-type': 'application/json' },
        body: JSON.stringify({ route: 'chat', input: INPUT }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const job = await until('succeeded', async () => {
        const res = await fetch(`${api}/v1/jobs/${id}?wait=5`, { headers: { authorization: `Bearer ${TOKEN}` } });
        const body = (await res.json()) as { state: string; attempts: { state: string; resolved_by: string | null; provider_request_id: string | null; error: unknown }[]; result: { content: string } };
        return body.state === 'succeeded' ? body : null;
      }, 60_000);
      expect(job.attempts).toHaveLength(1);
      expect(job.attempts[0]).toMatchObject({ state: 'succeeded', resolved_by: 'lookup', provider_request_id: 'chatcmpl-fake-1' });
      expect(job.result.content).toBe('made upstream');
      expect(fake.calls.filter((c) => c.method === 'POST')).toHaveLength(1);
    });

    it('the owning executor killed -9 mid-task: another executor rescues the attempt and resolves it by asking the task', async () => {
      fake.script([{ task: { runMs: 4_000, output: { frames: 3 } } }]);
      const first = start(['executor', '--lease-ms', '1000']);
      const { job } = await store.createJob({ ownerId: OWNER, idempotencyKey: 'killed', route: 'render', input: { prompt: 'x' }, providers: ['tasks'] });
      await until('task id recorded', async () => (await store.getJob(OWNER, job.id))?.attempts[0]?.providerRequestId === 'task_fake_1');
      first.kill('SIGKILL');
      await until('exit', async () => first.signalCode === 'SIGKILL');
      start(['executor', '--lease-ms', '1000']);
      const done = await until('succeeded', async () => {
        const j = await store.getJob(OWNER, job.id);
        return j?.state === 'succeeded' ? j : null;
      }, 60_000);
      expect(done.attempts.map((a) => [a.state, a.resolvedBy])).toEqual([['succeeded', 'lookup']]);
      expect((done.result as { content: unknown }).content).toEqual({ frames: 3 });
      expect(fake.tasks).toHaveLength(1);
      expect(fake.tasks[0]!.submits).toBe(1);
    });
  });
}
