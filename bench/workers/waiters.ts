/**
 * "Waiting is free" (issue 11), the client side: against one onejob server
 * (started with `--observe`, an executor, and a provider that answers long
 * after the window):
 *
 * 1. creates `--jobs` jobs (`POST /v1/jobs`, 32 at a time); their attempts
 *    run on the slow provider;
 * 2. holds one `GET /v1/jobs/{id}?wait=60` on each, plus `--own - 1` more on
 *    the first job (the job that will change: `--own` waiters in all), plus
 *    `--chats` `POST /v1/chat/completions` waiting on the same slow provider,
 *    every request on its own connection;
 * 3. once every job reached the provider, measures a window of `--window`
 *    seconds: the server's RSS, event-loop delay, every statement it sent to
 *    PostgreSQL (its observe listener) and `xact_commit` of its database
 *    (`pg_stat_database`, read from the admin database);
 * 4. cancels the first job (`POST /v1/jobs/{id}/cancel`) and counts which
 *    waiters answered until its own did (at most 5 s) and 1 s more: its
 *    own, and any other.
 *
 * A wait answered before its job finished (a long-poll answered `running`,
 * a chat answered 409 `attempt_in_flight` or 503) is counted as cut short and
 * sent again after its `Retry-After` (default 1 s, ±50 % jitter), as a client's
 * long-poll loop or the OpenAI SDK's retries would: the waiter keeps waiting.
 *
 * Prints `RESULT` with all of it.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { argMap, emitResult } from '../lib/child.ts';
import { adminQuery } from '../lib/pg-admin.ts';
import { round } from '../lib/stats.ts';

const args = argMap(process.argv.slice(2));
const url = args.url!;
const observeUrl = args['observe-url']!;
const countUrl = args['count-url']!;
const dbName = args['db-name']!;
const JOBS = Number(args.jobs ?? 2000);
const CHATS = Number(args.chats ?? 2000);
const OWN = Number(args.own ?? 5);
const WINDOW_S = Number(args.window ?? 10);
const AUTH = { authorization: 'Bearer tok_bench', 'content-type': 'application/json' };
const tag = `wait-${process.pid}-${Date.now().toString(36)}`;
const log = (m: string): void => void process.stderr.write(`[waiters] ${m}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const fdLimit = /Max open files\s+(\d+)\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
const limits = { soft: Number(fdLimit?.[1]), hard: Number(fdLimit?.[2]) };

// 1. The jobs.
const creator = new Pool(url, { connections: 32 });
const ids: string[] = new Array(JOBS);
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: 32 }, async () => {
  for (let i = next++; i < JOBS; i = next++) {
    const res = await creator.request({
      method: 'POST', path: '/v1/jobs', headers: { ...AUTH, 'idempotency-key': `${tag}-job-${i}` },
      body: JSON.stringify({ route: 'summarize', input: { messages: [{ role: 'user', content: `wait ${i}` }] } }),
    });
    const job = (await res.body.json()) as { id: string };
    if (res.statusCode !== 201) throw new Error(`create ${i}: ${res.statusCode} ${JSON.stringify(job)}`);
    ids[i] = job.id;
  }
}));
await creator.close();
const createSeconds = (performance.now() - t0) / 1000;
log(`${JOBS} jobs created in ${createSeconds.toFixed(1)} s`);

// 2. The waiters, one connection each.
interface Waiter { readonly kind: 'poll' | 'chat'; readonly job: number; answeredAt: number | null; status: number | null; state: string | null; error: string | null; body?: string; reissued: number }
/** Answers before the job is done (a wait cut short), by kind, status and state or error: each is re-sent at once, as a client's long-poll loop would. */
const early: Record<string, number> = {};
const earlyAt: number[] = [];
let watching = true;
const waiters: Waiter[] = [];
const total = JOBS + OWN - 1 + CHATS;
const pool = new Pool(url, { connections: total, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, connectTimeout: 30_000 });
const FINAL = new Set(['succeeded', 'failed', 'cancelled', 'unknown', 'job_finished', 'attempt_in_doubt', 'job_failed']);
const start = (w: Waiter, send: () => Promise<{ statusCode: number; headers: Record<string, string | string[] | undefined>; body: { text(): Promise<string> } }>, first = true): void => {
  if (first) waiters.push(w);
  let retryAfterS = 1;
  const settle = (at: number, k: string, detail: string): void => {
    // A wait that ended before its job did: counted, and sent again (the waiter keeps waiting).
    if (watching && !FINAL.has(w.state ?? '')) {
      if (early[k] === undefined) log(`first early "${k}" after ${((at - t1) / 1000).toFixed(1)} s: ${detail}`);
      early[k] = (early[k] ?? 0) + 1;
      earlyAt.push(at);
      w.reissued++;
      w.error = null;
      w.state = null;
      // As a polite client: after Retry-After (default 1 s), with ±50 % jitter.
      setTimeout(() => start(w, send, false), retryAfterS * 1000 * (0.5 + Math.random()));
      return;
    }
    w.answeredAt = at;
  };
  void send().then(async (res) => {
    const text = await res.body.text();
    const at = performance.now();
    w.status = res.statusCode;
    w.body = text.slice(0, 300);
    const ra = Number(res.headers['retry-after']);
    if (Number.isFinite(ra) && ra > 0) retryAfterS = Math.min(ra, 10);
    try {
      const b = JSON.parse(text) as { state?: string; code?: string };
      w.state = b.state ?? b.code ?? null;
    } catch {
      w.state = null;
    }
    settle(at, `${w.kind} ${w.status} ${w.state}`, w.body);
  }, (e: unknown) => {
    w.error = String(e);
    settle(performance.now(), `${w.kind} error ${w.error.slice(0, 80)}`, w.error);
  });
};
const poll = (job: number): void => start({ kind: 'poll', job, answeredAt: null, status: null, state: null, error: null, reissued: 0 }, () =>
  pool.request({ method: 'GET', path: `/v1/jobs/${ids[job]}?wait=60`, headers: { authorization: AUTH.authorization } }));
const chat = (i: number): void => start({ kind: 'chat', job: -1 - i, answeredAt: null, status: null, state: null, error: null, reissued: 0 }, () =>
  pool.request({
    method: 'POST', path: '/v1/chat/completions', headers: { ...AUTH, 'idempotency-key': `${tag}-chat-${i}` },
    body: JSON.stringify({ model: 'summarize', messages: [{ role: 'user', content: `waiting chat ${i}` }] }),
  }));
const calls = async (): Promise<number> => ((await (await fetch(countUrl)).json()) as { calls: number }).calls;
/** Waits until the provider has seen `n` onejob calls, at most `ms`; returns the count. */
const reach = async (n: number, ms: number): Promise<number> => {
  const until = performance.now() + ms;
  let c = await calls();
  while (c < n && performance.now() < until) {
    await sleep(250);
    c = await calls();
  }
  return c;
};
const jobsAtProvider = await reach(JOBS, 60_000);
const claimSeconds = (performance.now() - t0) / 1000 - createSeconds;
log(`${jobsAtProvider} of the jobs' attempts at the provider ${claimSeconds.toFixed(1)} s after the last create`);
const t1 = performance.now();
for (let i = 0; i < OWN - 1; i++) poll(0);
// Ramp in steps of 200 so the connection storm does not overflow the listen backlog.
for (let i = 0; i < Math.max(JOBS, CHATS); i++) {
  if (i < JOBS) poll(i);
  if (i < CHATS) chat(i);
  if (i % 100 === 99) await sleep(50);
}

// Every chat job reaches the provider too (its attempt is in flight there), within 30 s.
const observed = async (): Promise<{ seconds: number; rssBytes: number; heapUsedBytes: number; eventLoopDelayMs: Record<string, number>; statements: Record<string, number>; storeCalls: Record<string, number> }> =>
  (await (await fetch(observeUrl)).json()) as never;
const atProvider = await reach(JOBS + CHATS, 30_000);
const rampSeconds = (performance.now() - t1) / 1000;
log(`${waiters.length} waiters open, ${atProvider} provider calls in flight after ${rampSeconds.toFixed(1)} s`);
await sleep(2000); // let the ramp's own work drain out of the window

// 3. The window.
const xact = async (): Promise<{ commits: number; rollbacks: number }> => {
  await adminQuery('SELECT pg_stat_clear_snapshot()');
  const row = (await adminQuery<{ c: string; r: string }>(`SELECT xact_commit AS c, xact_rollback AS r FROM pg_stat_database WHERE datname = '${dbName}'`))[0];
  return { commits: Number(row?.c ?? 0), rollbacks: Number(row?.r ?? 0) };
};
const pendingBefore = waiters.filter((w) => w.answeredAt === null).length;
const earlyBefore = { ...early };
const earlyCountBefore = earlyAt.length;

await fetch(observeUrl, { method: 'POST' });
const x0 = await xact();
const rss: number[] = [];
const w0 = performance.now();
while (performance.now() - w0 < WINDOW_S * 1000) {
  await sleep(1000);
  rss.push((await observed()).rssBytes);
}
const win = await observed();
const x1 = await xact();
const pendingAfter = waiters.filter((w) => w.answeredAt === null).length;
const waitingCount = pendingAfter;
const statementsTotal = Object.values(win.statements).reduce((a, b) => a + b, 0);
const statementsPerSecond = statementsTotal / win.seconds;
const waiting = {
  waiters: waitingCount,
  longPolls: waiters.filter((w) => w.kind === 'poll' && w.answeredAt === null).length,
  chats: waiters.filter((w) => w.kind === 'chat' && w.answeredAt === null).length,
  answeredBeforeWindow: waiters.length - pendingBefore,
  answeredDuringWindow: pendingBefore - pendingAfter,
  cutShortBeforeWindow: earlyCountBefore,
  cutShortBeforeWindowBy: earlyBefore,
  cutShortDuringWindowPerSecond: round(earlyAt.filter((t) => t >= w0).length / win.seconds, 1),
  providerCallsInFlight: atProvider,
  windowSeconds: round(win.seconds, 2),
  rssMiB: round(Math.max(...rss, win.rssBytes) / 2 ** 20, 1),
  heapUsedMiB: round(win.heapUsedBytes / 2 ** 20, 1),
  eventLoopDelayMs: win.eventLoopDelayMs,
  statementsPerSecond: round(statementsPerSecond, 1),
  statementsPerWaiterPerSecond: round(statementsPerSecond / Math.max(1, waitingCount), 4),
  // Re-reads the waiters asked the store for (a read refused at the pool's queue sends no statement).
  getJobCallsPerWaiterPerSecond: round((win.storeCalls.getJob ?? 0) / win.seconds / Math.max(1, waitingCount), 4),
  xactCommitsPerSecond: round((x1.commits - x0.commits) / win.seconds, 1),
  xactRollbacksPerSecond: round((x1.rollbacks - x0.rollbacks) / win.seconds, 1),
  statementsByName: Object.fromEntries(Object.entries(win.statements).slice(0, 12).map(([k, v]) => [k, round(v / win.seconds, 1)])),
  storeCallsPerSecond: Object.fromEntries(Object.entries(win.storeCalls).slice(0, 12).map(([k, v]) => [k, round(v / win.seconds, 1)])),
};
log(`window: ${JSON.stringify(waiting)}`);

// 4. One job changes.
await fetch(observeUrl, { method: 'POST' });
// The cancel is retried after its Retry-After while the server answers 503 (at most 5 tries); the wake is timed from the try that worked.
let tc = performance.now();
let cancel!: Response;
let cancelTries = 0;
for (;;) {
  tc = performance.now();
  cancelTries++;
  cancel = await fetch(`${url}/v1/jobs/${ids[0]}/cancel`, { method: 'POST', headers: AUTH, body: JSON.stringify({ reason: 'bench: one job changes' }) });
  if (cancel.status !== 503 || cancelTries >= 5) break;
  await cancel.arrayBuffer();
  await sleep(1000 * Math.min(10, Number(cancel.headers.get('retry-after') ?? 1) || 1));
}
const cancelBody = (await cancel.json()) as { state?: string };
// Its waiters answer (at most 5 s), then 1 s more for any other waiter that would wake.
for (let i = 0; i < 50 && waiters.filter((w) => w.kind === 'poll' && w.job === 0 && w.answeredAt !== null).length < OWN; i++) await sleep(100);
await sleep(1000);
const after = await observed();
const woke = waiters.filter((w) => w.answeredAt !== null && w.answeredAt >= tc);
watching = false;
const own = woke.filter((w) => w.kind === 'poll' && w.job === 0);
const wake = {
  cancelStatus: cancel.status,
  cancelTries,
  cancelledJobState: cancelBody.state ?? null,
  ownWaiters: OWN,
  ownWaitersAnswered: own.length,
  ownAnswerStates: [...new Set(own.map((w) => w.state))],
  ownLatestAnswerMs: own.length ? round(Math.max(...own.map((w) => w.answeredAt! - tc)), 1) : null,
  otherWaitersAnswered: woke.length - own.length,
  cutShortAfterChange: earlyAt.filter((t) => t >= tc).length,
  observedSeconds: round(after.seconds, 2),
  storeCallsAfterChange: Object.fromEntries(Object.entries(after.storeCalls).slice(0, 8)),
  statementsAfterChange: Object.values(after.statements).reduce((a, b) => a + b, 0),
};
log(`wake: ${JSON.stringify(wake)}`);
await pool.destroy();
const errors = waiters.filter((w) => w.error).slice(0, 3).map((w) => w.error);
emitResult({ fdLimit: limits, jobs: JOBS, chats: CHATS, createSeconds: round(createSeconds, 1), claimSeconds: round(claimSeconds, 1), jobsAtProvider, rampSeconds: round(rampSeconds, 1), waiting, wake, ...(errors.length ? { errors } : {}) });
