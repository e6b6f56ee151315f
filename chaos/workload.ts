/**
 * The chaos workload: concurrent clients that behave like real ones, through
 * the load balancer. They double-click (the same key and body at once), give
 * up after a client-side timeout and retry with the same key, reuse a key
 * with other input, click the fallback button (manual attempts), resolve
 * attempts in doubt, cancel, replay, list, and peek at other owners' jobs.
 *
 * Every request becomes one {@link HistoryEntry}: what was sent, what was
 * answered (or that nothing was), and when.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { Agent, request } from 'undici';
import { API_KEYS } from './cluster.ts';
import type { HistoryEntry, OpKind } from './records.ts';

/** Options of {@link runWorkload}. */
export interface WorkloadOptions {
  /** The load balancer's URL. */
  readonly url: string;
  readonly clients: number;
  /** Clients stop starting new scenarios after this (epoch ms). */
  readonly until: number;
  readonly historyFile: string;
  readonly random: () => number;
  /** Milliseconds since the run started (history timestamps). */
  readonly clock: () => number;
  /** A tag making this run's keys unique. */
  readonly tag: string;
}

interface KnownJob {
  readonly id: string;
  readonly owner: string;
  readonly key: string;
  readonly body: CreateBody;
}

interface CreateBody {
  readonly route: string;
  readonly input: { readonly messages: readonly { readonly role: string; readonly content: string }[] };
  readonly metadata?: Record<string, unknown>;
}

interface Answer {
  readonly status: number | null;
  readonly body: unknown;
  readonly entry: HistoryEntry;
}

const OWNERS = Object.entries(API_KEYS).filter(([, owner]) => owner !== 'mallory');

/** Keeps what matters of a job body for the checker (drops input and attempts). */
function trimJob(job: unknown): unknown {
  if (typeof job !== 'object' || job === null) return job;
  const j = job as Record<string, unknown>;
  return { id: j.id, idempotency_key: j.idempotency_key, state: j.state, version: j.version, completed_by: j.completed_by, result: j.result, error: j.error };
}

function trimResponse(op: OpKind, body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return body;
  const b = body as Record<string, unknown>;
  if (typeof b.code === 'string') return { code: b.code, ...(b.job_id === undefined ? {} : { job_id: b.job_id }), ...(b.attempt_id === undefined ? {} : { attempt_id: b.attempt_id }) };
  if (op === 'list') return { data: Array.isArray(b.data) ? b.data.map(trimJob) : b.data };
  if (op === 'resolve') return { id: b.id, state: b.state, number: b.number, job: trimJob(b.job) };
  if (op === 'attempts') return { data: Array.isArray(b.data) ? b.data.map((a: Record<string, unknown>) => ({ id: a.id, number: a.number, state: a.state })) : b.data };
  if (op === 'manual') return { id: b.id, number: b.number, state: b.state, provider: b.provider };
  return trimJob(body);
}

/** The workload's clients and their shared history. */
class Workload {
  readonly #agent = new Agent({ connections: 256, keepAliveTimeout: 2000, connect: { timeout: 3000 } });
  readonly #out: WriteStream;
  #seq = 0;
  readonly known: KnownJob[] = [];
  operations = 0;

  constructor(private readonly o: WorkloadOptions) {
    this.#out = createWriteStream(o.historyFile, { flags: 'a' });
  }

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.o.random() * xs.length)]!;
  }

  chance(p: number): boolean {
    return this.o.random() < p;
  }

  /** One request, recorded whatever happens. */
  async send(c: { name: string; owner: string; token: string }, op: OpKind, method: 'GET' | 'POST', path: string, opts: { key?: string; body?: unknown; raw?: string; timeoutMs?: number; jobId?: string; attemptId?: string } = {}): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${c.token}` };
    if (opts.key !== undefined) headers['idempotency-key'] = opts.key;
    const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const sentAt = this.o.clock();
    let status: number | null = null;
    let parsed: unknown;
    let replayed: boolean | undefined;
    let outcome: HistoryEntry['outcome'] = 'answered';
    let error: string | undefined;
    try {
      const res = await request(`${this.o.url}${path}`, {
        method, headers, body: payload, dispatcher: this.#agent,
        signal: AbortSignal.timeout(opts.timeoutMs ?? 8000),
      });
      const text = await res.body.text();
      status = res.statusCode;
      replayed = res.headers['idempotent-replayed'] === 'true' ? true : undefined;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = text.slice(0, 200);
      }
    } catch (e) {
      const err = e as Error;
      outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
      error = `${err.name}: ${err.message}`.slice(0, 200);
      status = null;
    }
    const entry: HistoryEntry = {
      id: ++this.#seq, client: c.name, owner: c.owner, op, method, path,
      ...(opts.key === undefined ? {} : { key: opts.key }),
      ...(opts.jobId === undefined ? {} : { jobId: opts.jobId }),
      ...(opts.attemptId === undefined ? {} : { attemptId: opts.attemptId }),
      ...(opts.body === undefined ? {} : { body: opts.body }),
      sentAt, recvAt: this.o.clock(), status, outcome,
      ...(parsed === undefined ? {} : { response: trimResponse(op, parsed) }),
      ...(replayed === undefined ? {} : { replayed }),
      ...(error === undefined ? {} : { error }),
    };
    this.operations++;
    this.#out.write(`${JSON.stringify(entry)}\n`);
    return { status, body: parsed, entry };
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#out.end(() => resolve()));
    await this.#agent.close();
  }
}

function retryable(a: Answer): boolean {
  return a.status === null || a.status === 502 || a.status === 503 || a.status === 504 || a.status === 500;
}

/** The body with its top-level keys in reverse order (the same request, canonically). */
function reordered(body: CreateBody): string {
  const entries = Object.entries(body).reverse();
  return JSON.stringify(Object.fromEntries(entries));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs the clients until `until`; resolves with the number of requests made.
 */
export async function runWorkload(o: WorkloadOptions): Promise<number> {
  const w = new Workload(o);
  let n = 0;
  const client = async (index: number): Promise<void> => {
    const [token, owner] = OWNERS[index % OWNERS.length]!;
    const c = { name: `c${index}`, owner, token };
    const mine: KnownJob[] = [];

    const newBody = (k: number): CreateBody => ({
      route: w.chance(0.3) ? 'hedged' : 'plain',
      input: { messages: [{ role: 'user', content: `${c.name} job ${k}: summarize ${Math.floor(o.random() * 1e9)}` }] },
      ...(w.chance(0.3) ? { metadata: { client: c.name, n: k } } : {}),
    });

    /** POST /v1/jobs until an answer that is not a transient failure (bounded). */
    const create = async (key: string, body: CreateBody, firstTimeoutMs?: number): Promise<Answer> => {
      let a: Answer | undefined;
      for (let i = 0; i < 6; i++) {
        const raw = i > 0 && w.chance(0.5) ? reordered(body) : undefined;
        a = await w.send(c, 'create', 'POST', '/v1/jobs', { key, body, ...(raw === undefined ? {} : { raw }), timeoutMs: i === 0 ? firstTimeoutMs ?? 8000 : 8000 });
        if (!retryable(a)) break;
        await sleep(100 + Math.floor(o.random() * 400));
      }
      return a!;
    };

    const remember = (a: Answer, key: string, body: CreateBody): KnownJob | null => {
      const id = (a.body as { id?: unknown } | undefined)?.id;
      if ((a.status === 200 || a.status === 201) && typeof id === 'string') {
        const job = { id, owner, key, body };
        if (!mine.some((j) => j.id === id)) {
          mine.push(job);
          w.known.push(job);
        }
        return job;
      }
      return null;
    };

    /** Watches a job and acts like a user would on what it sees (bounded). */
    const follow = async (job: KnownJob): Promise<void> => {
      for (let i = 0; i < 6 && Date.now() < o.until; i++) {
        const a = await w.send(c, 'get', 'GET', `/v1/jobs/${job.id}?wait=${w.chance(0.5) ? 2 : 0.5}`, { jobId: job.id, timeoutMs: 6000 });
        if (a.status !== 200) {
          await sleep(200);
          continue;
        }
        const j = a.body as { state: string; attempts: { id: string; state: string; provider: string }[] };
        if (j.state === 'unknown' || j.state === 'running') {
          const inDoubt = j.attempts.filter((x) => x.state === 'unknown' || (j.state === 'running' && x.state === 'running'));
          const r = o.random();
          if (j.state === 'unknown' && r < 0.5 && inDoubt.length > 0) await resolve(job, w.pick(inDoubt).id);
          else if (j.state === 'running' && r < 0.04 && inDoubt.length > 0) await resolve(job, w.pick(inDoubt).id);
          else if (r < 0.62) await manual(job);
          else if (r < 0.70) await w.send(c, 'cancel', 'POST', `/v1/jobs/${job.id}/cancel`, { jobId: job.id });
          continue;
        }
        if (j.state === 'queued') continue;
        // Terminal: what users do afterwards.
        if (w.chance(0.3)) await create(job.key, job.body);
        if (w.chance(0.2)) await create(job.key, { ...job.body, input: { messages: [{ role: 'user', content: `${job.body.input.messages[0]!.content} (edited)` }] } });
        if (w.chance(0.1)) await manual(job);
        if (w.chance(0.1) && j.attempts.length > 0) await resolve(job, w.pick(j.attempts).id);
        return;
      }
    };

    const manual = async (job: KnownJob): Promise<void> => {
      const body = w.chance(0.5) ? {} : { provider: w.pick(['p1', 'p2']) };
      await w.send(c, 'manual', 'POST', `/v1/jobs/${job.id}/attempts`, { body, jobId: job.id });
    };

    const resolve = async (job: KnownJob, attemptId: string): Promise<void> => {
      const r = o.random();
      const body = r < 0.5
        ? { state: 'succeeded', result: { resolved_by: c.name, n: ++n, at: Math.round(o.clock()) } }
        : r < 0.85 ? { state: 'failed', error: { code: 'resolved_failed', message: `operator ${c.name} says it failed` } } : { state: 'cancelled' };
      await w.send(c, 'resolve', 'POST', `/v1/attempts/${attemptId}/resolve`, { body, jobId: job.id, attemptId });
    };

    let k = 0;
    while (Date.now() < o.until) {
      const r = o.random();
      k++;
      if (r < 0.40) {
        // A new job: sometimes a double click, sometimes an impatient client, sometimes a key shared with another owner.
        const key = w.chance(0.05) ? `${o.tag}-shared-${Math.floor(o.random() * 20)}` : `${o.tag}-${c.name}-${k}`;
        const body = key.includes('-shared-') ? { route: 'plain', input: { messages: [{ role: 'user', content: `shared ${key}` }] } } : newBody(k);
        let answers: Answer[];
        if (w.chance(0.3)) {
          const clicks = 2 + Math.floor(o.random() * 3);
          answers = await Promise.all(Array.from({ length: clicks }, () => create(key, body)));
        } else if (w.chance(0.25)) {
          answers = [await create(key, body, 2 + Math.floor(o.random() * 40))];
        } else {
          answers = [await create(key, body)];
        }
        const job = answers.map((a) => remember(a, key, body)).find((x) => x !== null);
        if (job && w.chance(0.8)) await follow(job);
      } else if (r < 0.50 && mine.length > 0) {
        // Key reuse: same key, other input (409) or the same input reordered (a replay).
        const job = w.pick(mine);
        const other = w.chance(0.6) ? { ...job.body, route: job.body.route === 'plain' ? 'hedged' : 'plain' } : job.body;
        remember(await create(job.key, other), job.key, other);
      } else if (r < 0.62 && mine.length > 0) {
        await follow(w.pick(mine));
      } else if (r < 0.70 && mine.length > 0) {
        await manual(w.pick(mine));
      } else if (r < 0.78 && mine.length > 0) {
        const job = w.pick(mine);
        const a = await w.send(c, 'attempts', 'GET', `/v1/jobs/${job.id}/attempts`, { jobId: job.id });
        const list = ((a.body as { data?: { id: string; state: string }[] } | undefined)?.data) ?? [];
        const target = list.find((x) => x.state === 'unknown') ?? (list.length > 0 ? w.pick(list) : undefined);
        if (target !== undefined) await resolve(job, target.id);
      } else if (r < 0.82 && mine.length > 0) {
        const job = w.pick(mine);
        await w.send(c, 'cancel', 'POST', `/v1/jobs/${job.id}/cancel`, { jobId: job.id });
      } else if (r < 0.90) {
        await w.send(c, 'list', 'GET', `/v1/jobs?limit=${1 + Math.floor(o.random() * 50)}${w.chance(0.3) ? '&state=unknown' : ''}`);
      } else if (w.known.length > 0) {
        // Somebody else's job: must be 404.
        const other = w.known.filter((j) => j.owner !== owner);
        if (other.length > 0) {
          const job = w.pick(other);
          await w.send(c, 'peek', 'GET', w.chance(0.5) ? `/v1/jobs/${job.id}` : `/v1/jobs/${job.id}/attempts`, { jobId: job.id });
        }
      }
      await sleep(20 + Math.floor(o.random() * 150));
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)));
  await w.close();
  return w.operations;
}
