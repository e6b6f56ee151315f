/**
 * Section 4r of `npm run bench` (`--only doubt`): the timeout scenario of
 * section 4 again, with onejob's primary an `openai-responses` provider
 * (CONTRACT §11): the work takes 1 s at the provider, the attempt's timeout
 * is 200 ms, a fallback is configured.
 *
 * - onejob: the background create answers at once with the `resp_…` id
 *   (recorded before the wait); past 200 ms the attempt is `unknown`; the
 *   reconciler of the executor asks `GET /responses/{id}` (first after
 *   about 1 s, then with backoff) and applies the completed response. The
 *   client creates with `POST /v1/jobs` and long-polls `GET /v1/jobs/{id}`.
 * - Portkey (the peer, as in section 4): a fallback config with
 *   `request_timeout: 200` on the primary, over Chat Completions, which has
 *   nothing to ask: the primary does the work and the fallback does it again.
 *
 * Figures: provider executions per request (creates counted by the fakes),
 * jobs that end `succeeded` without a person (nobody resolves anything here),
 * and the time to resolution, p50 and p99: for onejob from the attempt's
 * `unknown_at` to its end (read from the database) and from the create to
 * the client seeing the job end; for Portkey the time to its answer.
 */
import { BENCH_DIR, startServer, type Started } from './lib/child.ts';
import { adminQuery, recreateDatabase } from './lib/pg-admin.ts';
import { round } from './lib/stats.ts';

/** What the scenario borrows from bench/run.ts. */
export interface TimeoutResponsesDeps {
  readonly requests: number;
  readonly startPortkey: () => Promise<Started<{ url: string }>>;
  readonly portkeyHeaders: (config: unknown) => Record<string, string>;
  /** The database the onejob side runs on (recreated). */
  readonly database: string;
  readonly log: (line: string) => void;
}

const worker = (name: string): string => `${BENCH_DIR}/workers/${name}`;
const AUTH = { authorization: 'Bearer tok_bench', 'content-type': 'application/json' };
const WORK_MS = 1000;
const TIMEOUT_MS = 200;

/** The value at quantile `q` (nearest rank) of `xs`, or null. */
function quantile(xs: readonly number[], q: number): number | null {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  return round(sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!, 1);
}

async function submits(base: string): Promise<number> {
  const res = await fetch(`${base}/submits`);
  const { data } = (await res.json()) as { data: { submits: number }[] };
  return data.reduce((n, s) => n + s.submits, 0);
}

async function calls(base: string): Promise<number> {
  const res = await fetch(`${base}/calls`);
  const { data } = (await res.json()) as { data: unknown[] };
  return data.length;
}

/** Runs the scenario on both sides; returns its figures. */
export async function sectionTimeoutResponses(d: TimeoutResponsesDeps): Promise<Record<string, unknown>> {
  d.log(`4r: the timeout scenario with an openai-responses primary — the work takes ${WORK_MS} ms, ${TIMEOUT_MS} ms timeout, a fallback (${d.requests} requests each)`);
  const out: Record<string, unknown> = {};
  // Portkey's side: the primary answers Chat Completions after the work (1 s).
  const chatPrimary = await startServer<{ url: string }>(worker('fake-provider.ts'), ['--delay-ms', String(WORK_MS)]);
  // onejob's side: the primary is a Responses API in background mode whose work takes 1 s.
  const responsesPrimary = await startServer<{ url: string }>(worker('fake-provider.ts'), ['--behaviour', JSON.stringify({ task: { runMs: WORK_MS } })]);
  const fallback = await startServer<{ url: string }>(worker('fake-provider.ts'), []);
  const portkey = await d.startPortkey();
  try {
    // Portkey: fallback on timeout.
    const target = (u: string, extra: object = {}): object => ({ provider: 'openai', api_key: 'sk-bench', custom_host: `${u}/v1`, ...extra });
    const config = { strategy: { mode: 'fallback' }, targets: [target(chatPrimary.info.url, { request_timeout: TIMEOUT_MS }), target(fallback.info.url)] };
    const body = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'timeout scenario' }] });
    const before = { p: await calls(chatPrimary.info.url), f: await calls(fallback.info.url) };
    const pk = await Promise.all(Array.from({ length: d.requests }, async () => {
      const t0 = performance.now();
      const res = await fetch(`${portkey.info.url}/v1/chat/completions`, { method: 'POST', headers: d.portkeyHeaders(config), body });
      await res.arrayBuffer();
      return { status: res.status, ms: performance.now() - t0 };
    }));
    await new Promise((r) => setTimeout(r, WORK_MS + 500)); // the primary's abandoned work finishes (it ran either way)
    const pkExecutions = (await calls(chatPrimary.info.url)) - before.p + (await calls(fallback.info.url)) - before.f;
    out.portkey_fallback = {
      requests: d.requests, providerExecutions: pkExecutions, providerExecutionsPerRequest: round(pkExecutions / d.requests, 2),
      answered200: pk.filter((r) => r.status === 200).length,
      answerMs: { p50: quantile(pk.map((r) => r.ms), 0.5), p99: quantile(pk.map((r) => r.ms), 0.99) },
    };
    d.log(`   portkey_fallback: ${JSON.stringify(out.portkey_fallback)}`);

    // onejob, twice: with the executor's default late-answer grace (it keeps polling the response past the
    // deadline, 60 s), and with none (it stops at the deadline, as when it dies): then the reconciler's lookup ends the doubt.
    for (const [name, graceMs] of [['onejob_responses', 60_000], ['onejob_responses_lookup', 0]] as const) {
      out[name] = await onejobSide(name, graceMs, d, responsesPrimary.info.url, fallback.info.url);
      d.log(`   ${name}: ${JSON.stringify(out[name])}`);
    }
  } finally {
    await portkey.stop();
    await chatPrimary.stop();
    await responsesPrimary.stop();
    await fallback.stop();
  }
  return { ...out, workMs: WORK_MS, timeoutMs: TIMEOUT_MS };
}

/** One onejob side: `requests` jobs created at once and followed to their end. */
async function onejobSide(name: string, graceMs: number, d: TimeoutResponsesDeps, primaryUrl: string, fallbackUrl: string): Promise<Record<string, unknown>> {
  const url = await recreateDatabase(d.database);
  const server = await startServer<{ url: string }>(worker('onejob-server.ts'), [
    '--db', url, '--provider-url', primaryUrl, '--provider-type', 'openai-responses', '--fallback-url', fallbackUrl,
    '--timeout-ms', String(TIMEOUT_MS), '--executor', '--grace-ms', String(graceMs),
  ]);
  try {
    const base = server.info.url;
    const tag = `${name}-${Date.now().toString(36)}`;
    const before = (await submits(primaryUrl)) + (await submits(fallbackUrl));
    const jobs = await Promise.all(Array.from({ length: d.requests }, async (_, i) => {
      const t0 = performance.now();
      const res = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: { ...AUTH, 'idempotency-key': `${tag}-${i}` }, body: JSON.stringify({ route: 'summarize', input: { messages: [{ role: 'user', content: `doubt ${i}` }] } }) });
      const job = (await res.json()) as { id: string };
      let state = 'queued';
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline && !['succeeded', 'failed', 'cancelled'].includes(state)) {
        // `wait` answers at once for a job in doubt (`unknown`): look again every 50 ms then.
        const j = (await (await fetch(`${base}/v1/jobs/${job.id}?wait=5`, { headers: AUTH })).json()) as { state: string };
        state = j.state;
        if (state === 'unknown') await new Promise((r) => setTimeout(r, 50));
      }
      return { id: job.id, state, ms: performance.now() - t0 };
    }));
    await new Promise((r) => setTimeout(r, 500));
    const executions = (await submits(primaryUrl)) + (await submits(fallbackUrl)) - before;
    const ids = jobs.map((j) => j.id).filter((id) => /^job_[A-Za-z0-9_-]+$/.test(id));
    const attempts = await adminQuery<{ job_id: string; provider: string; state: string; resolved_by: string | null; doubt_ms: string | null }>(
      `SELECT job_id, provider, state, resolved_by, (EXTRACT(EPOCH FROM (finished_at - unknown_at)) * 1000)::float8 AS doubt_ms
         FROM attempts WHERE job_id IN (${ids.map((id) => `'${id}'`).join(', ') || "''"})`, url);
    const byOperator = new Set(attempts.filter((a) => a.resolved_by === 'operator').map((a) => a.job_id));
    const doubtMs = attempts.filter((a) => a.doubt_ms !== null && a.resolved_by !== null).map((a) => Number(a.doubt_ms));
    const byOutcome: Record<string, number> = {};
    for (const a of attempts) {
      const k = `${a.provider}:${a.state}:${a.resolved_by ?? 'own_answer'}`;
      byOutcome[k] = (byOutcome[k] ?? 0) + 1;
    }
    const states: Record<string, number> = {};
    for (const j of jobs) states[j.state] = (states[j.state] ?? 0) + 1;
    return {
      requests: d.requests, lateAnswerGraceMs: graceMs, providerExecutions: executions, providerExecutionsPerRequest: round(executions / d.requests, 2),
      jobStates: states,
      succeededWithoutPerson: jobs.filter((j) => j.state === 'succeeded' && !byOperator.has(j.id)).length,
      attempts: byOutcome,
      doubtToResolutionMs: { p50: quantile(doubtMs, 0.5), p99: quantile(doubtMs, 0.99), n: doubtMs.length },
      createToEndMs: { p50: quantile(jobs.map((j) => j.ms), 0.5), p99: quantile(jobs.map((j) => j.ms), 0.99) },
    };
  } finally {
    await server.stop();
  }
}
