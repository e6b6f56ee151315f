/**
 * A durable peer of onejob for the bench's durable-peers series (issue 40),
 * in its own process, answering `POST /intent` (JSON body `{ text }`, header
 * `Idempotency-Key`) with `{ key, answer }` once the intent is done: one
 * keyed model call to the fake provider (`--provider-url`), recorded durably
 * before the call and after it, a duplicate answered from the record.
 *
 * `--kind dbos`: DBOS Transact (`@dbos-inc/dbos-sdk`, system database
 * `--db`): a workflow whose id is the key, one step (`DBOS.runStep`) calling
 * the provider; the answer is the workflow's result (`handle.getResult()`).
 * A duplicate key starts nothing new: DBOS hands back the workflow of that
 * id and its recorded result.
 *
 * `--kind pgboss`: pg-boss 10 (`bench/.scratch`, schema `pgboss` in `--db`):
 * `send(queue, data, { singletonKey: key })` on a queue with policy `short`
 * (the bench's enqueue series' choice), then this process's worker fetches
 * the job (`fetch`, woken by the send instead of pg-boss's ≥ 0.5 s poll),
 * calls the provider and `complete`s the job with the answer as its output;
 * the HTTP answer waits for that commit. A `send` answered `null` (a job of
 * that key is queued) is answered from the job's row (`singleton_key`),
 * once its output is there. pg-boss keeps a key single only while its job
 * is queued (policy `short`): a duplicate arriving after the job started
 * creates a second job (the series' duplicate check says so).
 *
 * Prints `READY {"url", "pid", "version"}`.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import pg from 'pg';
import { argMap, BENCH_DIR, emitReady, ROOT_DIR } from '../lib/child.ts';

const args = argMap(process.argv.slice(2));
const kind = args.kind ?? '';
const db = args.db ?? '';
const providerUrl = args['provider-url'] ?? '';
if (!db || !providerUrl || !['dbos', 'pgboss'].includes(kind)) throw new Error('durable-peer: --kind dbos|pgboss, --db <postgres url> and --provider-url are required');

/** The model call every side makes: the fake provider's Chat Completions. */
async function askModel(text: string): Promise<string> {
  const res = await fetch(`${providerUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
    body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: text }] }),
  });
  if (!res.ok) throw new Error(`provider answered ${res.status}`);
  const body = (await res.json()) as { choices: { message: { content: string } }[] };
  return body.choices[0]?.message.content ?? '';
}

type Intent = (key: string, text: string) => Promise<string>;

async function dbosPeer(): Promise<{ intent: Intent; version: string; close: () => Promise<void> }> {
  const { DBOS } = await import('@dbos-inc/dbos-sdk');
  const version = (JSON.parse(readFileSync(resolve(ROOT_DIR, 'node_modules', '@dbos-inc', 'dbos-sdk', 'package.json'), 'utf8')) as { version: string }).version;
  const summarize = DBOS.registerWorkflow(async (text: string): Promise<string> => DBOS.runStep(() => askModel(text), { name: 'askModel' }), { name: 'summarize' });
  DBOS.setConfig({ name: 'onejob-bench-dbos', systemDatabaseUrl: db, logLevel: 'error' });
  await DBOS.launch();
  return {
    version,
    intent: async (key, text) => (await DBOS.startWorkflow(summarize, { workflowID: key })(text)).getResult(),
    close: () => DBOS.shutdown(),
  };
}

interface BossJob { id: string; data: { text: string } }
interface Boss {
  on(event: string, fn: (e: unknown) => void): void;
  start(): Promise<unknown>;
  stop(o: object): Promise<void>;
  createQueue(name: string, o: object): Promise<void>;
  send(name: string, data: object, o: object): Promise<string | null>;
  fetch(name: string, o: object): Promise<BossJob[]>;
  complete(name: string, id: string, data: object): Promise<void>;
  fail(name: string, id: string, data: object): Promise<void>;
}

async function pgbossPeer(): Promise<{ intent: Intent; version: string; close: () => Promise<void> }> {
  const scratch = createRequire(resolve(BENCH_DIR, '.scratch', 'package.json'));
  const version = (scratch('pg-boss/package.json') as { version: string }).version;
  const { default: PgBoss } = (await import(scratch.resolve('pg-boss'))) as { default: new (o: object) => Boss };
  const QUEUE = 'bench-intent';
  const boss = new PgBoss({ connectionString: db, max: 10, supervise: false, schedule: false, migrate: true });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue(QUEUE, { name: QUEUE, policy: 'short' }).catch(() => {});
  const reader = new pg.Pool({ connectionString: db, max: 2 });
  /** Requests waiting for a job of this process: resolved once its completion committed. */
  const waiting = new Map<string, { resolve: (answer: string) => void; reject: (e: unknown) => void }>();
  /** Outcomes of jobs whose request was not waiting yet (a fetch can pick a job before its `send` returned here). */
  const early = new Map<string, string | Error>();
  const settle = (w: { resolve: (answer: string) => void; reject: (e: unknown) => void }, answer: string | Error): void => {
    if (answer instanceof Error) w.reject(answer);
    else w.resolve(answer);
  };
  const done = (id: string, answer: string | Error): void => {
    const w = waiting.get(id);
    waiting.delete(id);
    if (w) settle(w, answer);
    else early.set(id, answer);
  };
  const work = async (job: BossJob): Promise<void> => {
    try {
      const answer = await askModel(job.data.text);
      await boss.complete(QUEUE, job.id, { answer });
      done(job.id, answer);
    } catch (e) {
      await boss.fail(QUEUE, job.id, { error: String(e) }).catch(() => {});
      done(job.id, e instanceof Error ? e : new Error(String(e)));
    }
  };
  // The worker: fetches while there is work, woken by every send (no idle poll in the measured path).
  let pumping = false;
  let again = false;
  const pump = async (): Promise<void> => {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      for (;;) {
        again = false;
        const jobs = await boss.fetch(QUEUE, { batchSize: 64 });
        for (const job of jobs) void work(job);
        if (jobs.length === 0 && !again) break;
      }
    } finally {
      pumping = false;
    }
  };
  const wait = (id: string): Promise<string> => new Promise((resolvePromise, reject) => {
    const w = { resolve: resolvePromise, reject };
    const outcome = early.get(id);
    early.delete(id);
    if (outcome === undefined) waiting.set(id, w);
    else settle(w, outcome);
  });
  /** A duplicate: the job of that key, answered from its row once its output is recorded. */
  const fromRecord = async (key: string): Promise<string> => {
    for (let i = 0; i < 2000; i++) {
      const row = (await reader.query<{ state: string; output: { answer?: string } | null }>(
        'SELECT state, output FROM pgboss.job WHERE name = $1 AND singleton_key = $2 ORDER BY created_on LIMIT 1', [QUEUE, key])).rows[0];
      if (row?.state === 'completed') return row.output?.answer ?? '';
      if (row?.state === 'failed') throw new Error(`the job of key ${key} failed`);
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`the job of key ${key} did not complete within 10 s`);
  };
  return {
    version,
    intent: async (key, text) => {
      const id = await boss.send(QUEUE, { text }, { singletonKey: key });
      if (id === null) return fromRecord(key);
      const answer = wait(id);
      void pump();
      return answer;
    },
    close: async () => {
      await boss.stop({ graceful: false, wait: true });
      await reader.end();
    },
  };
}

const peer = kind === 'dbos' ? await dbosPeer() : await pgbossPeer();

const readBody = async (req: IncomingMessage): Promise<string> => {
  let body = '';
  for await (const chunk of req) body += String(chunk);
  return body;
};
const server = createServer((req, res) => {
  void (async () => {
    try {
      const key = req.headers['idempotency-key'];
      if (req.method !== 'POST' || typeof key !== 'string' || key === '') {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"POST with an Idempotency-Key"}');
        return;
      }
      const { text } = JSON.parse(await readBody(req)) as { text?: string };
      const answer = await peer.intent(key, text ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ key, answer }));
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(e).slice(0, 300) }));
    }
  })();
});
server.keepAliveTimeout = 60_000;
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const address = server.address();
const shutdown = async (): Promise<void> => {
  server.close();
  await peer.close().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
emitReady({ url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, pid: process.pid, version: peer.version });
