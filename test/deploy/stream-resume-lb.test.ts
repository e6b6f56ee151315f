/**
 * Resumable streams behind the shipped load balancer (CONTRACT §13,
 * deploy/haproxy.cfg): a real HAProxy in front of two real `onejob serve
 * --no-executor` processes on one PostgreSQL database, and one `onejob
 * executor` process that runs the attempts. A client streams through the
 * load balancer; the API process serving it dies (SIGKILL) mid-answer, so
 * HAProxy sends the client's resume (`Last-Event-ID`) and a duplicate (same
 * Idempotency-Key) to the OTHER API process. Both receive live events while
 * the provider still streams (the job still running), and what each client
 * assembled equals the stored result, no event twice. Which process served a
 * request is read from that process's own log (its `request completed` line
 * carries the request's X-Request-Id), not from anything HAProxy says.
 *
 * Skipped, loudly, only when haproxy is not installed and apt-get cannot
 * install it, or PostgreSQL is not reachable.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureHaproxy, renderHaproxyConfig } from '../../chaos/haproxy.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { freePort } from '../support/free-port.ts';
import { createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';
import { chatChunkText, SseReader, type ReceivedEvent } from '../support/sse-reader.ts';

const BIN = resolve(import.meta.dirname, '../../bin/onejob');
const TOKEN = 'tok_alice_lb_stream_0123456789';
const OWNER = 'alice';
const CHUNKS = ['Resumed ', 'behind ', 'the ', 'load ', 'balancer, ', 'on ', 'the ', 'other ', 'process.'];

const haproxyMissing = ensureHaproxy((line) => console.warn(`stream resume LB test: ${line}`)) ? null : 'haproxy is not installed and apt-get could not install it';
if (haproxyMissing !== null) console.warn(`\n*** SKIPPED test/deploy/stream-resume-lb.test.ts: ${haproxyMissing} ***\n`);
const skip = haproxyMissing ?? postgresSkipReason();

async function until<T>(what: string, f: () => Promise<T | null | undefined | false> | T | null | undefined | false, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await Promise.resolve(f()).catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A child process whose stdout and stderr are kept in memory. */
function start(command: string, args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string } {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

async function stop(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

describe.skipIf(skip !== null)('a stream resumed behind HAProxy (deploy/haproxy.cfg) on the other API process', () => {
  const apis: { name: string; port: number; proc: ReturnType<typeof start> }[] = [];
  let executor: ReturnType<typeof start> | undefined;
  let haproxy: ReturnType<typeof start> | undefined;
  let fake: FakeProvider;
  let store: JobStore;
  let lb = '';
  let dir = '';
  let dropDatabase: (() => Promise<void>) | undefined;
  let seq = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'onejob-lb-stream-'));
    const db = await createPostgresDatabase('onejob_lbs');
    dropDatabase = db.drop;
    fake = await startFakeProvider();
    const configFile = join(dir, 'onejob.config.json');
    writeFileSync(configFile, JSON.stringify({
      apiKeys: { [TOKEN]: OWNER },
      // The provider is held mid-stream while a process is killed and HAProxy notices (seconds, more on a loaded CI machine): no idle deadline may fire meanwhile.
      providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000, idleTimeoutMs: 60_000 } },
      routes: { work: { providers: ['primary'] } },
    }));
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: db.url, LOG_LEVEL: 'info' };
    if (process.env.ONEJOB_RUN !== undefined) env.ONEJOB_RUN = process.env.ONEJOB_RUN;
    execFileSync(process.execPath, [BIN, 'migrate', '--config', configFile], { env, stdio: 'ignore', timeout: 60_000 });
    store = await openStore(db.url, { poolSize: 4 });
    for (const name of ['api1', 'api2']) {
      const port = await freePort();
      apis.push({ name, port, proc: start(process.execPath, [BIN, 'serve', '--no-executor', '--config', configFile, '--port', String(port), '--host', '127.0.0.1'], env) });
    }
    executor = start(process.execPath, [BIN, 'executor', '--config', configFile], env);
    await Promise.all(apis.map((a) => until(`${a.name} /readyz`, async () => (await fetch(`http://127.0.0.1:${a.port}/readyz`)).status === 200, 60_000)));
    await until('the executor', () => executor!.output().includes('executor ready'), 60_000);

    const lbPort = await freePort();
    lb = `http://127.0.0.1:${lbPort}`;
    const cfg = join(dir, 'haproxy.cfg');
    writeFileSync(cfg, renderHaproxyConfig({
      bind: `127.0.0.1:${lbPort}`,
      servers: apis.map((a) => ({ name: a.name, address: `127.0.0.1:${a.port}` })),
      defaultServer: 'inter 200 fall 2 rise 1',
    }));
    haproxy = start('haproxy', ['-db', '-f', cfg], { PATH: process.env.PATH ?? '' });
    await until('the load balancer', async () => (await fetch(`${lb}/readyz`)).status === 200, 30_000);
  }, 120_000);

  afterAll(async () => {
    await stop(haproxy?.child);
    await Promise.all([...apis.map((a) => stop(a.proc.child)), stop(executor?.child)]);
    await store?.close();
    await fake?.close();
    await dropDatabase?.();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  /** Which API process logged `request completed` for this request id (waits for it). */
  const servedBy = (requestId: string): Promise<string> =>
    until(`request ${requestId} in an API process log`, () => apis.find((a) => a.proc.output().split('\n').some((l) => l.includes('"request completed"') && l.includes(`"reqId":"${requestId}"`)))?.name, 10_000);

  /** A chat stream through the load balancer, with the request id it was sent with. */
  async function openStream(key: string, lastEventId?: string): Promise<{ reader: SseReader; requestId: string }> {
    const requestId = `lbs-${process.pid}-${++seq}`;
    const controller = new AbortController();
    const res = await fetch(`${lb}/v1/chat/completions`, {
      method: 'POST',
      signal: controller.signal,
      headers: {
        authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json', 'x-request-id': requestId,
        ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
      },
      body: JSON.stringify({ model: 'work', messages: [{ role: 'user', content: 'resume me elsewhere' }], stream: true }),
    });
    expect(res.status).toBe(200);
    return { reader: new SseReader(res, controller), requestId };
  }

  const jobOf = async (key: string) => {
    const [job] = (await store.listJobs({ ownerId: OWNER })).jobs.filter((j) => j.idempotencyKey === key);
    return job === undefined ? null : store.getJob(OWNER, job.id);
  };

  /** Reads events until the text received so far is `text`. */
  async function readUntil(reader: SseReader, into: ReceivedEvent[], text: string): Promise<void> {
    while (into.map(chatChunkText).join('') !== text) {
      const e = await reader.next();
      if (e === null) throw new Error(`the stream ended after ${JSON.stringify(into.map(chatChunkText).join(''))}, before ${JSON.stringify(text)}`);
      into.push(e);
    }
  }

  it('the API process serving a stream dies mid-answer: the resume (Last-Event-ID) and a duplicate reach the other process and get live events before the job ends; each assembles the result once', async () => {
    const key = 'lb-stream-resume';
    // Slow content (150 ms apart), held after the sixth chunk: what arrives after the first read can only come live.
    fake.script([{ chunks: CHUNKS, chunkDelayMs: 150, streamGate: { afterChunks: 6, gate: 'hold' } }]);

    // Which process the key hashes to: a short request with the same token + key (the balancer hashes those only).
    const probeId = `lbs-probe-${process.pid}`;
    const probe = await fetch(`${lb}/v1/jobs/job_probe`, { headers: { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key, 'x-request-id': probeId } });
    await probe.body?.cancel();
    const first = await servedBy(probeId);
    const other = apis.find((a) => a.name !== first)!;

    const { reader } = await openStream(key);
    const got: ReceivedEvent[] = [];
    await readUntil(reader, got, 'Resumed behind ');
    expect(got.map((e) => e.id)).toEqual(['1-1', '1-2']);

    // The process serving it dies: the client's connection breaks; HAProxy marks it down (its /readyz check).
    await stop(apis.find((a) => a.name === first)!.proc.child, 'SIGKILL');
    await expect((async () => {
      for (let e = await reader.next(); e !== null; e = await reader.next()) got.push(e);
    })()).rejects.toThrow();
    await until(`HAProxy to mark ${first} DOWN`, () => new RegExp(`${first} is DOWN`).test(haproxy!.output()), 30_000);
    expect((await jobOf(key))!.state).toBe('running');

    const lastId = got.at(-1)!.id!;
    const resume = await openStream(key, lastId);
    const duplicate = await openStream(key);
    const resumed: ReceivedEvent[] = [];
    const duplicated: ReceivedEvent[] = [];
    const seenSoFar = got.map(chatChunkText).join('');
    const heldAt = CHUNKS.slice(0, 6).join('');
    await readUntil(resume.reader, resumed, heldAt.slice(seenSoFar.length));
    await readUntil(duplicate.reader, duplicated, heldAt);
    // All of it while the job runs: the provider is held after its sixth chunk, so none of it is the stored result at the end.
    expect((await jobOf(key))!.state).toBe('running');
    expect(resumed.length).toBeGreaterThan(0);

    fake.release('hold');
    for (let e = await resume.reader.next(); e !== null; e = await resume.reader.next()) resumed.push(e);
    for (let e = await duplicate.reader.next(); e !== null; e = await duplicate.reader.next()) duplicated.push(e);
    // Both reached the other process (read from its own log), not the dead one.
    expect(await servedBy(resume.requestId)).toBe(other.name);
    expect(await servedBy(duplicate.requestId)).toBe(other.name);

    const job = await until('the job to succeed', async () => {
      const j = await jobOf(key);
      return j?.state === 'succeeded' ? j : null;
    });
    const result = (job.result as { content: string }).content;
    expect(result).toBe(CHUNKS.join(''));
    const ids = [...got, ...resumed].map((e) => e.id);
    expect([...got, ...resumed].map(chatChunkText).join('')).toBe(result);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(ids.map((_, i) => `1-${i + 1}`));
    expect(resumed.at(-1)!.data).toBe('[DONE]');
    // The duplicate: the whole stream from its first event, with the same ids as the first client's plus the resume's.
    expect(duplicated.map(chatChunkText).join('')).toBe(result);
    expect(duplicated.map((e) => e.id)).toEqual(ids);
    expect(fake.calls).toHaveLength(1);
  }, 90_000);
});
