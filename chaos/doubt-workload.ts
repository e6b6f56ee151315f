/**
 * The doubt clients of a chaos run (CONTRACT §11): a few clients that create
 * jobs on the lookup routes (chaos/doubt-cluster.ts DOUBT_ROUTES) through
 * `POST /v1/jobs` and `POST /v1/chat/completions`, follow them, and now and
 * then ask `POST /v1/attempts/{id}/check` about an attempt in doubt. They
 * never resolve anything: doubt on these routes must end by itself.
 *
 * They write the same {@link HistoryEntry} lines as chaos/workload.ts, to the
 * same history file (ids from {@link DOUBT_HISTORY_ID_BASE}), so every rule of
 * the checker applies to their jobs too.
 */
import { createWriteStream } from 'node:fs';
import { Agent, request } from 'undici';
import { API_KEYS } from './cluster.ts';
import { DOUBT_ROUTES } from './doubt-cluster.ts';
import type { HistoryEntry, OpKind } from './records.ts';
import { parseBodyLoose } from './pick.ts';

/** History ids of the doubt clients start here (the main workload counts from 1). */
export const DOUBT_HISTORY_ID_BASE = 50_000_000;

/** Options of {@link runDoubtWorkload}. */
export interface DoubtWorkloadOptions {
  readonly url: string;
  readonly clients: number;
  readonly until: number;
  readonly historyFile: string;
  readonly random: () => number;
  readonly clock: () => number;
  readonly tag: string;
}

function trimJob(job: unknown): unknown {
  if (typeof job !== 'object' || job === null) return job;
  const j = job as Record<string, unknown>;
  return { id: j.id, idempotency_key: j.idempotency_key, state: j.state, version: j.version, completed_by: j.completed_by, result: j.result, error: j.error };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the doubt clients until `until`; returns how many requests they made. */
export async function runDoubtWorkload(o: DoubtWorkloadOptions): Promise<number> {
  const agent = new Agent({ connections: 32, keepAliveTimeout: 2000, connect: { timeout: 3000 } });
  const out = createWriteStream(o.historyFile, { flags: 'a' });
  const owners = Object.entries(API_KEYS).filter(([, owner]) => owner !== 'mallory');
  const routes = Object.keys(DOUBT_ROUTES);
  let seq = DOUBT_HISTORY_ID_BASE;
  let operations = 0;

  const send = async (c: { name: string; owner: string; token: string }, op: OpKind, method: 'GET' | 'POST', path: string, opts: { key?: string; body?: unknown; jobId?: string; attemptId?: string; timeoutMs?: number } = {}): Promise<{ status: number | null; body: unknown }> => {
    const headers: Record<string, string> = { authorization: `Bearer ${c.token}` };
    if (opts.key !== undefined) headers['idempotency-key'] = opts.key;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const sentAt = o.clock();
    let status: number | null = null;
    let parsed: unknown;
    let jobIdHeader: string | undefined;
    let outcome: HistoryEntry['outcome'] = 'answered';
    let error: string | undefined;
    let replayed: boolean | undefined;
    try {
      const res = await request(`${o.url}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), dispatcher: agent, signal: AbortSignal.timeout(opts.timeoutMs ?? 8000) });
      status = res.statusCode;
      replayed = res.headers['idempotent-replayed'] === 'true' ? true : undefined;
      const jid = res.headers['onejob-job-id'];
      if (typeof jid === 'string') jobIdHeader = jid;
      const text = await res.body.text();
      parsed = parseBodyLoose(text);
    } catch (e) {
      const err = e as Error;
      outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
      error = `${err.name}: ${err.message}`.slice(0, 200);
      status = null;
    }
    let response: unknown;
    const b = parsed as Record<string, unknown> | undefined;
    if (b !== undefined && typeof b === 'object' && b !== null && typeof b.code === 'string') response = { code: b.code, ...(b.job_id === undefined ? (jobIdHeader === undefined ? {} : { job_id: jobIdHeader }) : { job_id: b.job_id }) };
    else if (op === 'chat') {
      const content = (b?.choices as { message?: { content?: unknown } }[] | undefined)?.[0]?.message?.content;
      response = { ...(jobIdHeader === undefined ? {} : { job_id: jobIdHeader }), ...(typeof content === 'string' ? { text: content } : {}) };
    } else if (op === 'attempts') response = { id: b?.id, number: b?.number, state: b?.state };
    else response = parsed === undefined ? undefined : trimJob(parsed);
    const entry: HistoryEntry = {
      id: ++seq, client: c.name, owner: c.owner, op, method, path,
      ...(opts.key === undefined ? {} : { key: opts.key }),
      ...(opts.jobId === undefined ? {} : { jobId: opts.jobId }),
      ...(opts.attemptId === undefined ? {} : { attemptId: opts.attemptId }),
      ...(opts.body === undefined ? {} : { body: opts.body }),
      sentAt, recvAt: o.clock(), status, outcome,
      ...(response === undefined ? {} : { response }),
      ...(replayed === undefined ? {} : { replayed }),
      ...(error === undefined ? {} : { error }),
    };
    operations++;
    out.write(`${JSON.stringify(entry)}\n`);
    return { status, body: parsed };
  };

  const client = async (i: number): Promise<void> => {
    const [token, owner] = owners[i % owners.length]!;
    const c = { name: `d${i}`, owner, token };
    let k = 0;
    while (Date.now() < o.until) {
      k++;
      const route = routes[Math.floor(o.random() * routes.length)]!;
      const key = `${o.tag}-${c.name}-${k}`;
      const messages = [{ role: 'user', content: `doubt ${key}` }];
      let jobId: string | undefined;
      if (o.random() < 0.7) {
        const a = await send(c, 'create', 'POST', '/v1/jobs', { key, body: { route, input: { messages } } });
        const id = (a.body as { id?: unknown } | undefined)?.id;
        if ((a.status === 200 || a.status === 201) && typeof id === 'string') jobId = id;
        // A client that got no answer retries with the same key, as clients do.
        if (a.status === null) {
          const again = await send(c, 'create', 'POST', '/v1/jobs', { key, body: { route, input: { messages } } });
          const id2 = (again.body as { id?: unknown } | undefined)?.id;
          if (typeof id2 === 'string') jobId = id2;
        }
      } else {
        const a = await send(c, 'chat', 'POST', '/v1/chat/completions', { key, body: { model: route, messages }, timeoutMs: 6000 });
        const r = a.body as { job_id?: unknown } | undefined;
        jobId = typeof r?.job_id === 'string' ? r.job_id : undefined;
      }
      // Follow the job a while; now and then ask about an attempt in doubt (CONTRACT §11 check), never resolve it.
      for (let n = 0; jobId !== undefined && n < 4 && Date.now() < o.until; n++) {
        const g = await send(c, 'get', 'GET', `/v1/jobs/${jobId}?wait=2`, { jobId, timeoutMs: 6000 });
        const j = g.body as { state?: string; attempts?: { id: string; state: string }[] } | undefined;
        if (g.status !== 200 || j?.state === undefined) continue;
        if (j.state !== 'unknown' && j.state !== 'running' && j.state !== 'queued') break;
        const doubt = j.attempts?.find((x) => x.state === 'unknown');
        if (doubt !== undefined && o.random() < 0.15) await send(c, 'attempts', 'POST', `/v1/attempts/${doubt.id}/check`, { jobId, attemptId: doubt.id, timeoutMs: 15_000 });
      }
      await sleep(100 + Math.floor(o.random() * 300));
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)));
  await new Promise<void>((resolve) => out.end(() => resolve()));
  await agent.close();
  return operations;
}
