/**
 * The chaos workload: concurrent clients that behave like real ones, through
 * the load balancer. They double-click (the same key and body at once), give
 * up after a client-side timeout and retry with the same key, reuse a key
 * with other input, click the fallback button (manual attempts), resolve
 * attempts in doubt, cancel, replay, list, and peek at other owners' jobs.
 * Besides `POST /v1/jobs` they use the gateway endpoints (CONTRACT §7):
 * `POST /v1/chat/completions` and `POST /v1/messages`, streamed (read as
 * SSE: the text received, how the stream ended) and not, on plain, hedged
 * and contract routes, and `POST /v1/responses` (docs/responses-api.md):
 * plain, streamed (Responses events with `sequence_number`), and background
 * followed by `GET /v1/responses/{id}` polling.
 *
 * Every request becomes one {@link HistoryEntry}: what was sent, what was
 * answered (or that nothing was), and when.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { createParser } from 'eventsource-parser';
import { Agent, request } from 'undici';
import { API_KEYS } from './cluster.ts';
import type { HistoryEntry, OpKind, StreamRecord } from './records.ts';
import { resumingStream, type ResumingStreamContext } from './resuming-stream.ts';
import { parseBodyLoose } from './pick.ts';

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
  /** The API processes' own URLs: resuming stream clients also reconnect to them directly (chaos/resuming-stream.ts). */
  readonly apiUrls?: readonly string[];
}

/** The endpoint a key was created on: `POST /v1/jobs`, `/v1/chat/completions`, `/v1/messages` or `/v1/responses`. */
type Endpoint = 'jobs' | 'chat' | 'messages' | 'responses';

interface KnownJob {
  readonly id: string;
  readonly owner: string;
  readonly key: string;
  readonly endpoint: Endpoint;
  readonly body: CreateBody;
}

interface Message {
  readonly role: string;
  readonly content: string;
}

/** A `POST /v1/jobs` body, a chat / messages body, or a responses body (`model` names the route). */
type CreateBody =
  | { readonly route: string; readonly input: { readonly messages: readonly Message[] }; readonly metadata?: Record<string, unknown> }
  | { readonly model: string; readonly messages: readonly Message[]; readonly stream?: boolean; readonly max_tokens?: number; readonly stream_options?: { readonly include_usage: boolean } }
  | { readonly model: string; readonly input: string; readonly stream?: boolean; readonly background?: boolean };

const OP_OF: Record<Endpoint, OpKind> = { jobs: 'create', chat: 'chat', messages: 'messages', responses: 'responses' };
const PATH_OF: Record<Endpoint, string> = { jobs: '/v1/jobs', chat: '/v1/chat/completions', messages: '/v1/messages', responses: '/v1/responses' };
/** The ops whose answer may be a stream of server-sent events. */
const STREAMING_OPS: ReadonlySet<OpKind> = new Set(['chat', 'messages', 'responses']);
/** Response statuses after which a Response no longer changes (docs/responses-api.md, Status). */
const RESPONSE_FINAL = new Set(['completed', 'incomplete', 'failed', 'cancelled']);

/** The text a message's first user turn carries. */
function firstText(body: CreateBody): string {
  if ('route' in body) return body.input.messages[0]!.content;
  return 'messages' in body ? body.messages[0]!.content : body.input;
}

/** The same body with other text (a key reused with other input: 409). */
function edited(body: CreateBody): CreateBody {
  const content = `${firstText(body)} (edited)`;
  const messages = [{ role: 'user', content }];
  if ('route' in body) return { ...body, input: { messages } };
  return 'messages' in body ? { ...body, messages } : { ...body, input: content };
}

/** The same body on another route (a key reused with other input: 409). */
function rerouted(body: CreateBody): CreateBody {
  if ('route' in body) return { ...body, route: body.route === 'plain' ? 'hedged' : 'plain' };
  return { ...body, model: body.model === 'plain' ? 'hedged' : 'plain' };
}

/**
 * Reads an SSE answer of the chat, messages or responses endpoint: the text
 * deltas in order, and how it ended (`[DONE]` / `message_stop` /
 * `response.completed`, `event: error` or `response.failed`, or the body just
 * ending). On responses it also checks that `sequence_number` counts 0, 1, 2, ….
 */
export class SseReader {
  readonly record: { text: string; end: StreamRecord['end']; error_code: string | null; events: number; keepalives: number; bad_sequence?: string | null } = { text: '', end: 'eof', error_code: null, events: 0, keepalives: 0 };
  readonly #parser;
  constructor(readonly endpoint: 'chat' | 'messages' | 'responses') {
    if (endpoint === 'responses') this.record.bad_sequence = null;
    this.#parser = createParser({
      onEvent: (ev) => this.#onEvent(ev.event, ev.data),
      onComment: () => {
        this.record.keepalives++;
      },
    });
  }
  feed(text: string): void {
    this.#parser.feed(text);
  }
  #onEvent(name: string | undefined, data: string): void {
    const r = this.record;
    if (r.end !== 'eof') return; // nothing counts after the end
    r.events++;
    if (this.endpoint === 'chat' && data === '[DONE]') {
      r.end = 'done';
      return;
    }
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(data) as Record<string, unknown>;
    } catch {
      r.end = 'garbled';
      return;
    }
    if (this.endpoint === 'responses' && r.bad_sequence === null && value.sequence_number !== r.events - 1) {
      r.bad_sequence = `${r.events - 1}:${String(value.sequence_number)}`;
    }
    if (name === 'error' || (this.endpoint !== 'chat' && value.type === 'error')) {
      r.end = 'error';
      const e = value.error as { code?: unknown } | undefined;
      r.error_code = typeof e?.code === 'string' ? e.code : typeof value.code === 'string' ? value.code : 'unknown';
      return;
    }
    if (this.endpoint === 'responses') {
      if (value.type === 'response.output_text.delta' && typeof value.delta === 'string') r.text += value.delta;
      else if (value.type === 'response.completed' || value.type === 'response.incomplete') r.end = 'done';
      else if (value.type === 'response.failed') {
        r.end = 'error';
        r.error_code = 'response_failed';
      }
      return;
    }
    if (this.endpoint === 'chat') {
      const delta = (value.choices as { delta?: { content?: unknown } }[] | undefined)?.[0]?.delta;
      if (typeof delta?.content === 'string') r.text += delta.content;
      return;
    }
    if (value.type === 'content_block_delta') {
      const d = value.delta as { type?: unknown; text?: unknown } | undefined;
      if (d?.type === 'text_delta' && typeof d.text === 'string') r.text += d.text;
    } else if (value.type === 'message_stop') {
      r.end = 'done';
    }
  }
}

/** The text of a non-streaming chat / messages answer, or of a Response (`output[].content[].text` of its messages). */
function answerText(op: OpKind, b: Record<string, unknown>): string | null {
  if (op === 'responses' || op === 'response_get') {
    if (!Array.isArray(b.output)) return null;
    return (b.output as { type?: unknown; content?: unknown }[])
      .filter((item) => item.type === 'message' && Array.isArray(item.content))
      .flatMap((item) => item.content as { type?: unknown; text?: unknown }[])
      .map((part) => (part.type === 'output_text' && typeof part.text === 'string' ? part.text : ''))
      .join('');
  }
  if (op === 'chat') {
    const content = (b.choices as { message?: { content?: unknown } }[] | undefined)?.[0]?.message?.content;
    return typeof content === 'string' ? content : null;
  }
  if (!Array.isArray(b.content)) return null;
  return (b.content as { type?: unknown; text?: unknown }[]).map((x) => (x.type === 'text' && typeof x.text === 'string' ? x.text : '')).join('');
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

function trimResponse(op: OpKind, body: unknown, jobIdHeader?: string): unknown {
  const header = jobIdHeader === undefined ? {} : { job_id: jobIdHeader };
  const gateway = op === 'chat' || op === 'messages' || op === 'responses' || op === 'response_get';
  if (typeof body !== 'object' || body === null) return gateway ? { ...header, raw: body } : body;
  const b = body as Record<string, unknown>;
  if (typeof b.code === 'string') return { code: b.code, ...(b.job_id === undefined ? header : { job_id: b.job_id }), ...(b.attempt_id === undefined ? {} : { attempt_id: b.attempt_id }) };
  if (op === 'responses' || op === 'response_get') {
    // A Response names its job in `onejob.job_id` too (docs/responses-api.md); `response_status` is its `status`.
    const own = (b.onejob as { job_id?: unknown } | undefined)?.job_id;
    const jobId = jobIdHeader ?? (typeof own === 'string' ? own : undefined);
    return { ...(jobId === undefined ? {} : { job_id: jobId }), id: b.id, response_status: b.status, text: answerText(op, b) };
  }
  if (op === 'chat' || op === 'messages') return { ...header, text: answerText(op, b) };
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
    // /v1/messages: Anthropic clients send the token as x-api-key (CONTRACT §3); half of them here.
    const headers: Record<string, string> = op === 'messages' && this.chance(0.5) ? { 'x-api-key': c.token, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${c.token}` };
    if (opts.key !== undefined) headers['idempotency-key'] = opts.key;
    const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const sentAt = this.o.clock();
    let status: number | null = null;
    let parsed: unknown;
    let replayed: boolean | undefined;
    let outcome: HistoryEntry['outcome'] = 'answered';
    let error: string | undefined;
    let jobIdHeader: string | undefined;
    let sse: SseReader | null = null;
    try {
      const res = await request(`${this.o.url}${path}`, {
        method, headers, body: payload, dispatcher: this.#agent,
        signal: AbortSignal.timeout(opts.timeoutMs ?? 8000),
      });
      status = res.statusCode;
      replayed = res.headers['idempotent-replayed'] === 'true' ? true : undefined;
      const jid = res.headers['onejob-job-id'];
      if (typeof jid === 'string') jobIdHeader = jid;
      const type = String(res.headers['content-type'] ?? '');
      if ((op === 'chat' || op === 'messages' || op === 'responses') && type.startsWith('text/event-stream')) {
        // A stream: what the client received is recorded even when it breaks off (then outcome says how).
        sse = new SseReader(op);
        const decoder = new TextDecoder();
        try {
          for await (const chunk of res.body) sse.feed(decoder.decode(chunk as Buffer, { stream: true }));
        } catch (e) {
          const err = e as Error;
          outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
          error = `${err.name}: ${err.message}`.slice(0, 200);
        }
      } else {
        const text = await res.body.text();
        parsed = parseBodyLoose(text);
      }
    } catch (e) {
      const err = e as Error;
      outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
      error = `${err.name}: ${err.message}`.slice(0, 200);
      if (sse === null) status = null;
    }
    const entry: HistoryEntry = {
      id: ++this.#seq, client: c.name, owner: c.owner, op, method, path,
      ...(opts.key === undefined ? {} : { key: opts.key }),
      ...(opts.jobId === undefined ? {} : { jobId: opts.jobId }),
      ...(opts.attemptId === undefined ? {} : { attemptId: opts.attemptId }),
      ...(opts.body === undefined ? {} : { body: opts.body }),
      sentAt, recvAt: this.o.clock(), status, outcome,
      ...(sse !== null ? { response: { ...(jobIdHeader === undefined ? {} : { job_id: jobIdHeader }), stream: sse.record } } : parsed === undefined ? (jobIdHeader === undefined ? {} : { response: { job_id: jobIdHeader } }) : { response: trimResponse(op, parsed, jobIdHeader) }),
      ...(replayed === undefined ? {} : { replayed }),
      ...(error === undefined ? {} : { error }),
    };
    this.operations++;
    this.#out.write(`${JSON.stringify(entry)}\n`);
    return { status, body: parsed, entry };
  }

  /** What chaos/resuming-stream.ts needs: the targets (the load balancer first), the agent, and a way to record. */
  resumeContext(): ResumingStreamContext {
    const targets = [{ name: 'lb', url: this.o.url }, ...(this.o.apiUrls ?? []).map((url, i) => ({ name: `api-${i + 1}`, url }))];
    return {
      targets, random: this.o.random, clock: this.o.clock, dispatcher: this.#agent,
      record: (e) => {
        const entry = { id: ++this.#seq, ...e } as HistoryEntry;
        this.operations++;
        this.#out.write(`${JSON.stringify(entry)}\n`);
        return entry;
      },
    };
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#out.end(() => resolve()));
    await this.#agent.close();
  }
}

function retryable(a: Answer): boolean {
  if (STREAMING_OPS.has(a.entry.op)) {
    // A gateway client (an SDK) retries what its answer says may be retried: no answer, a 5xx other than
    // a failed job, the 409s with Retry-After, and a stream that broke off (the job goes on; CONTRACT §7).
    const code = (a.entry.response as { code?: unknown; stream?: StreamRecord } | undefined);
    if (a.status === null || (a.status >= 500 && a.status !== 502)) return true;
    if (a.status === 409 && (code?.code === 'attempt_in_flight' || code?.code === 'attempt_in_doubt')) return true;
    return a.status === 200 && code?.stream !== undefined && code.stream.end !== 'done';
  }
  return a.status === null || a.status === 502 || a.status === 503 || a.status === 504 || a.status === 500;
}

/** The body with its top-level keys in reverse order (the same request, canonically). */
function reordered(body: CreateBody): string {
  const entries = Object.entries(body).reverse();
  return JSON.stringify(Object.fromEntries(entries));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Routes of the cluster the workload uses (chaos/cluster.ts): `contract` has an output schema. */
const ROUTE_NAMES = ['plain', 'plain', 'hedged', 'contract'] as const;

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

    const text = (k: number): string => `${c.name} job ${k}: summarize ${Math.floor(o.random() * 1e9)}`;
    const newBody = (k: number, endpoint: Endpoint): CreateBody => {
      const route = w.pick(ROUTE_NAMES);
      const messages = [{ role: 'user', content: text(k) }];
      if (endpoint === 'jobs') return { route, input: { messages }, ...(w.chance(0.3) ? { metadata: { client: c.name, n: k } } : {}) };
      if (endpoint === 'responses') {
        // Plain, streamed, or background (then polled): delivery, not intent (docs/responses-api.md).
        const d = o.random();
        return { model: route, input: text(k), ...(d < 0.4 ? { stream: true } : d < 0.7 ? { background: true } : {}) };
      }
      const stream = w.chance(0.65);
      if (endpoint === 'messages') return { model: route, max_tokens: 256, messages, ...(stream ? { stream: true } : {}) };
      return { model: w.chance(0.2) ? `route:${route}` : route, messages, ...(stream ? { stream: true, ...(w.chance(0.3) ? { stream_options: { include_usage: true } } : {}) } : {}) };
    };

    /** Creates (or joins) the key's job on its endpoint until an answer that is not a transient failure (bounded). */
    const create = async (endpoint: Endpoint, key: string, body: CreateBody, firstTimeoutMs?: number): Promise<Answer> => {
      let a: Answer | undefined;
      const gateway = endpoint !== 'jobs';
      for (let i = 0; i < (gateway ? 4 : 6); i++) {
        const raw = i > 0 && w.chance(0.5) ? reordered(body) : undefined;
        const timeoutMs = i === 0 && firstTimeoutMs !== undefined ? firstTimeoutMs : gateway ? 15_000 : 8000;
        a = await w.send(c, OP_OF[endpoint], 'POST', PATH_OF[endpoint], { key, body, ...(raw === undefined ? {} : { raw }), timeoutMs });
        if (!retryable(a)) break;
        // An SDK gives up sooner or later; some users too.
        if (gateway && w.chance(0.3)) break;
        await sleep(100 + Math.floor(o.random() * 400));
      }
      return a!;
    };

    const remember = (a: Answer, endpoint: Endpoint, key: string, body: CreateBody): KnownJob | null => {
      const r = a.entry.response as { id?: unknown; job_id?: unknown; code?: unknown } | undefined;
      // /v1/jobs answers the job; the gateway endpoints name it in Onejob-Job-Id (on job-bound answers).
      const id = endpoint === 'jobs' ? ((a.status === 200 || a.status === 201) ? r?.id : undefined) : (r?.code === 'idempotency_key_reused' ? undefined : r?.job_id);
      if (typeof id === 'string') {
        const job = { id, owner, key, endpoint, body };
        if (!mine.some((j) => j.id === id)) {
          mine.push(job);
          w.known.push(job);
        }
        return job;
      }
      return null;
    };

    /** Polls a background Response until it is final (bounded: a job in doubt stays `in_progress`). */
    const poll = async (job: KnownJob): Promise<void> => {
      for (let i = 0; i < 10 && Date.now() < o.until; i++) {
        await sleep(200 + Math.floor(o.random() * 600));
        const a = await w.send(c, 'response_get', 'GET', `/v1/responses/resp_${job.id}`, { jobId: job.id, timeoutMs: 6000 });
        const status = (a.entry.response as { response_status?: unknown } | undefined)?.response_status;
        if (a.status === 200 && typeof status === 'string' && RESPONSE_FINAL.has(status)) return;
      }
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
        if (w.chance(0.3)) await create(job.endpoint, job.key, job.body);
        if (w.chance(0.2)) await create(job.endpoint, job.key, edited(job.body));
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
        const e = o.random();
        const endpoint: Endpoint = e < 0.45 ? 'jobs' : e < 0.65 ? 'chat' : e < 0.8 ? 'messages' : 'responses';
        const shared = endpoint === 'jobs' && w.chance(0.05);
        const key = shared ? `${o.tag}-shared-${Math.floor(o.random() * 20)}` : `${o.tag}-${c.name}-${k}`;
        const body: CreateBody = shared ? { route: 'plain', input: { messages: [{ role: 'user', content: `shared ${key}` }] } } : newBody(k, endpoint);
        let answers: Answer[];
        if (endpoint !== 'jobs' && 'stream' in body && body.stream === true && w.chance(0.4)) {
          // A client that drops its stream and resumes it on random processes (chaos/resuming-stream.ts).
          answers = [{ ...(await resumingStream(w.resumeContext(), c, endpoint, PATH_OF[endpoint], key, body)), body: undefined }];
        } else if (w.chance(0.3)) {
          const clicks = 2 + Math.floor(o.random() * 3);
          answers = await Promise.all(Array.from({ length: clicks }, () => create(endpoint, key, body)));
        } else if (w.chance(0.25)) {
          answers = [await create(endpoint, key, body, 2 + Math.floor(o.random() * (endpoint === 'jobs' ? 40 : 400)))];
        } else {
          answers = [await create(endpoint, key, body)];
        }
        const job = answers.map((a) => remember(a, endpoint, key, body)).find((x) => x !== null);
        if (job && 'background' in body && body.background === true) await poll(job);
        if (job && w.chance(endpoint === 'jobs' ? 0.8 : 0.4)) await follow(job);
      } else if (r < 0.50 && mine.length > 0) {
        // Key reuse: same key, other input (409) or the same input reordered (a replay).
        const job = w.pick(mine);
        const other = w.chance(0.6) ? rerouted(job.body) : job.body;
        remember(await create(job.endpoint, job.key, other), job.endpoint, job.key, other);
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
          const path = job.endpoint === 'responses' && w.chance(0.5) ? `/v1/responses/resp_${job.id}` : w.chance(0.5) ? `/v1/jobs/${job.id}` : `/v1/jobs/${job.id}/attempts`;
          await w.send(c, 'peek', 'GET', path, { jobId: job.id });
        }
      }
      await sleep(20 + Math.floor(o.random() * 150));
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)));
  await w.close();
  return w.operations;
}
