/**
 * The typed client of onejob's HTTP API (CONTRACT §3, §7, §8). It runs
 * wherever `fetch` does (browsers, Node 20) and imports nothing of the
 * server. Its types come from the OpenAPI document the server serves
 * (src/client/api-types.ts).
 *
 * What it does for the caller (docs/client.md):
 * - every keyed write keeps ONE Idempotency-Key across all its retries;
 * - it retries what is safe: network errors and 5xx on idempotent calls,
 *   429/503 on every call, waiting `Retry-After` when the server sends one;
 * - it follows a job in doubt (409 `attempt_in_doubt` names it) instead of
 *   retrying blindly, and waits by long-poll (`GET /v1/jobs/{id}?wait=`);
 * - every failure is an {@link OnejobClientError} with the problem's `code`.
 */
import type {
  Attempt, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, CreateJobRequest, Job, JobPage, ListJobsQuery, MessagesRequest,
  MessagesResponse, Problem, ResolveAttemptRequest, ResolvedAttempt, StartAttemptRequest, UsageReport,
} from './api-shapes.ts';
import { OnejobClientError, isOnejobClientError } from './client-error.ts';
import { newIntentKey } from './intent-key.ts';
import { backoffMs, isRetryableStatus, retryAfterMs, retryPolicy, sleep, type CallSafety, type RetryOptions, type RetryPolicy } from './retry-policy.ts';

/** The header naming the job of a chat or messages answer. */
export const JOB_ID_HEADER = 'onejob-job-id';
/** The header the server sets on a replay. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** The longest `wait` the server accepts, in seconds (CONTRACT §3). */
export const MAX_WAIT_SECONDS = 60;

/** Options of {@link OnejobClient}. */
export interface OnejobClientOptions {
  /**
   * The server's origin, e.g. `http://127.0.0.1:8080`. Default `''`: URLs
   * relative to the page (a browser app whose own server, or dev proxy,
   * forwards `/v1/` to onejob).
   */
  readonly baseUrl?: string;
  /**
   * The API token (`Authorization: Bearer`, and `x-api-key` on `/v1/messages`).
   * Default none: for a page whose proxy adds the credential.
   */
  readonly token?: string | null;
  /** The `fetch` to use. Default `globalThis.fetch`. */
  readonly fetch?: typeof fetch;
  /** When and how often to retry (see {@link RetryOptions}). */
  readonly retry?: RetryOptions;
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The `wait` of each long-poll in {@link OnejobClient.waitForJob}, in seconds (≤ 60). Default 30. */
  readonly waitSliceSeconds?: number;
  /** How often a job in doubt is re-read while following it (the long-poll answers at once for it). Default 1000 ms. */
  readonly inDoubtPollMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (and its retries and waits): it fails with code `aborted`. */
  readonly signal?: AbortSignal;
}

/** Options of a keyed write. */
export interface KeyedCallOptions extends CallOptions {
  /** The Idempotency-Key. Default: a new one ({@link newIntentKey}), kept across this call's retries and returned. */
  readonly idempotencyKey?: string;
}

/** The answer of {@link OnejobClient.createJob}. */
export interface CreateJobResult {
  readonly job: Job;
  /** True when the key already had this job (`200`, `Idempotent-Replayed: true`). */
  readonly replayed: boolean;
  /** The key the job is bound to. */
  readonly idempotencyKey: string;
}

/** Options of {@link OnejobClient.waitForJob}. */
export interface WaitForJobOptions extends CallOptions {
  /**
   * `'settled'` (default): until the job is terminal or `unknown` (what the
   * server's long-poll waits for). `'terminal'`: through doubt as well,
   * re-reading every `inDoubtPollMs`, until someone resolves it.
   */
  readonly until?: 'settled' | 'terminal';
  /** Give up waiting after this long and resolve with the job as last read. Default: no limit. */
  readonly timeoutMs?: number;
  /** Called with the job whenever a read shows it changed (state, version or attempts). */
  readonly onChange?: (job: Job) => void;
}

/** Options of {@link OnejobClient.chatCompletions} and {@link OnejobClient.messages}. */
export interface CompletionCallOptions extends KeyedCallOptions {
  /**
   * How long to follow a job that is in doubt (409 `attempt_in_doubt`): the
   * client waits for someone to resolve it, then asks again with the same
   * key; still in doubt after this long, the call fails with
   * `attempt_in_doubt` and the job id. Default 30 000 ms; 0 fails at once.
   */
  readonly inDoubtWaitMs?: number;
  /** The longest the whole call may take; past it, code `timeout` with the job id. Default: no limit. */
  readonly timeoutMs?: number;
}

/** A completion and the job behind it. */
export interface CompletionResult<T> {
  readonly body: T;
  /** The job that answered (`Onejob-Job-Id`). */
  readonly jobId: string | null;
  readonly replayed: boolean;
  readonly idempotencyKey: string;
}

/** Options of {@link OnejobClient.streamChatCompletions} and {@link OnejobClient.streamMessages}. */
export interface StreamCallOptions extends KeyedCallOptions {
  /**
   * Resume after this event (`Last-Event-ID`, CONTRACT §13): the id of the
   * last event the caller already has, e.g. kept in `sessionStorage` across a
   * page reload. Default: from the stream's start.
   */
  readonly lastEventId?: string | null;
  /** Called when an answer starts (each connection), with the job that answers it. */
  readonly onOpen?: (info: { readonly jobId: string | null; readonly replayed: boolean; readonly idempotencyKey: string }) => void;
}

/**
 * One event of a job's stream: its SSE `id` (pass it as `lastEventId` to
 * resume after it), its SSE `event` name (Anthropic's types; null on chat),
 * and its parsed `data`.
 */
export interface StreamedEvent<T = unknown> {
  readonly id: string | null;
  readonly event: string | null;
  readonly data: T;
}

/** A request the transport sends. */
interface CallSpec {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly body?: unknown;
  readonly idempotencyKey?: string;
  readonly safety: CallSafety;
  readonly signal?: AbortSignal | undefined;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A successful answer. */
interface Answer<T> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

const TERMINAL: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled']);

/** Whether a job's state is terminal (`succeeded`, `failed`, `cancelled`). */
export function isTerminalJob(job: Pick<Job, 'state'>): boolean {
  return TERMINAL.has(job.state);
}

/**
 * The client.
 *
 * @example
 * const onejob = new OnejobClient({ baseUrl: 'http://127.0.0.1:8080', token: 'tok_alice' });
 * const { job } = await onejob.createJob({ route: 'summarize', input: { messages } });
 * const done = await onejob.waitForJob(job.id, { until: 'terminal' });
 */
export class OnejobClient {
  readonly #baseUrl: string;
  readonly #token: string | null;
  readonly #fetch: typeof fetch;
  readonly #policy: RetryPolicy;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #waitSliceSeconds: number;
  readonly #inDoubtPollMs: number;

  constructor(options: OnejobClientOptions = {}) {
    this.#baseUrl = (options.baseUrl ?? '').replace(/\/+$/, '');
    this.#token = options.token ?? null;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('no fetch: pass options.fetch');
    // Called unbound, `window.fetch` throws "Illegal invocation".
    this.#fetch = (input, init) => f(input, init);
    this.#policy = retryPolicy(options.retry);
    this.#headers = options.headers ?? {};
    this.#waitSliceSeconds = Math.min(MAX_WAIT_SECONDS, Math.max(1, options.waitSliceSeconds ?? 30));
    this.#inDoubtPollMs = Math.max(10, options.inDoubtPollMs ?? 1000);
  }

  // ---- jobs -------------------------------------------------------------

  /**
   * `POST /v1/jobs`: creates the job of (owner, key), or answers with the one
   * the key already has. Retried with the same key.
   *
   * @example const { job, idempotencyKey } = await onejob.createJob({ route: 'summarize', input }, { idempotencyKey: key });
   */
  async createJob(request: CreateJobRequest, options: KeyedCallOptions = {}): Promise<CreateJobResult> {
    const idempotencyKey = options.idempotencyKey ?? newIntentKey();
    const answer = await this.#call<Job>({ method: 'POST', path: '/v1/jobs', body: request, idempotencyKey, safety: 'idempotent', signal: options.signal });
    return { job: answer.body, replayed: answer.headers.get(REPLAYED_HEADER) === 'true', idempotencyKey };
  }

  /**
   * `GET /v1/jobs/{id}`; with `wait` (seconds, ≤ 60) the server holds the
   * answer until the job is terminal or `unknown`, or the wait ends.
   */
  async getJob(id: string, options: CallOptions & { readonly wait?: number } = {}): Promise<Job> {
    const wait = options.wait === undefined ? undefined : Math.min(MAX_WAIT_SECONDS, Math.max(0, options.wait));
    const answer = await this.#call<Job>({ method: 'GET', path: `/v1/jobs/${enc(id)}`, query: { wait }, safety: 'idempotent', signal: options.signal });
    return answer.body;
  }

  /**
   * Waits for a job by long-poll, one `wait` slice after another.
   *
   * @example const job = await onejob.waitForJob(id, { until: 'terminal', onChange: render });
   */
  async waitForJob(id: string, options: WaitForJobOptions = {}): Promise<Job> {
    const until = options.until ?? 'settled';
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    let last: Job | null = null;
    for (;;) {
      const remainingMs = deadline - Date.now();
      const wait = remainingMs === Infinity ? this.#waitSliceSeconds : Math.min(this.#waitSliceSeconds, Math.max(0, Math.floor(remainingMs / 1000)));
      const job = await this.getJob(id, { wait, signal: options.signal });
      if (last === null || changed(last, job)) options.onChange?.(job);
      last = job;
      if (isTerminalJob(job) || (job.state === 'unknown' && until === 'settled')) return job;
      if (Date.now() >= deadline) return job;
      // The long-poll answers at once for a job in doubt: pace the re-reads.
      if (job.state === 'unknown') await this.#pause(Math.min(this.#inDoubtPollMs, Math.max(0, deadline - Date.now())), options.signal);
    }
  }

  /** `GET /v1/jobs`: one page of the owner's jobs, newest first. */
  async listJobs(query: ListJobsQuery = {}, options: CallOptions = {}): Promise<JobPage> {
    const answer = await this.#call<JobPage>({ method: 'GET', path: '/v1/jobs', query, safety: 'idempotent', signal: options.signal });
    return answer.body;
  }

  /**
   * Every job matching `query`, newest first, following `next_cursor` page by page.
   *
   * @example for await (const job of onejob.allJobs({ state: 'unknown' })) console.log(job.id);
   */
  async *allJobs(query: Omit<ListJobsQuery, 'cursor'> = {}, options: CallOptions = {}): AsyncGenerator<Job> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobs({ ...query, cursor }, options);
      yield* page.data;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /**
   * `POST /v1/jobs/{id}/cancel`. Repeating a cancel cannot do harm, so it is
   * retried; when a retry finds the job already `cancelled` (`409
   * job_finished`: the first try got through), it answers with that job.
   */
  async cancelJob(id: string, options: CallOptions = {}): Promise<Job> {
    try {
      return (await this.#call<Job>({ method: 'POST', path: `/v1/jobs/${enc(id)}/cancel`, safety: 'idempotent', signal: options.signal })).body;
    } catch (error) {
      if (isOnejobClientError(error, 'job_finished') && error.tries > 1) {
        const job = await this.getJob(id, options);
        if (job.state === 'cancelled') return job;
      }
      throw error;
    }
  }

  // ---- attempts ---------------------------------------------------------

  /** `GET /v1/jobs/{id}/attempts`: the job's attempts, oldest first. */
  async listAttempts(jobId: string, options: CallOptions = {}): Promise<Attempt[]> {
    const answer = await this.#call<{ data: Attempt[] }>({ method: 'GET', path: `/v1/jobs/${enc(jobId)}/attempts`, safety: 'idempotent', signal: options.signal });
    return answer.body.data;
  }

  /**
   * `POST /v1/jobs/{id}/attempts` (the fallback button): starts an attempt on
   * `provider`, or the next of the chain. Not idempotent, so retried only on
   * 429/503 (the server did nothing); after a network error, read the job to
   * see whether it started.
   */
  async startAttempt(jobId: string, request: StartAttemptRequest = {}, options: CallOptions = {}): Promise<Attempt> {
    return (await this.#call<Attempt>({ method: 'POST', path: `/v1/jobs/${enc(jobId)}/attempts`, body: request, safety: 'unsafe', signal: options.signal })).body;
  }

  /** `POST /v1/attempts/{id}/resolve`: the explicit way out of doubt. Retried only on 429/503. */
  async resolveAttempt(attemptId: string, request: ResolveAttemptRequest, options: CallOptions = {}): Promise<ResolvedAttempt> {
    return (await this.#call<ResolvedAttempt>({ method: 'POST', path: `/v1/attempts/${enc(attemptId)}/resolve`, body: request, safety: 'unsafe', signal: options.signal })).body;
  }

  // ---- usage ------------------------------------------------------------

  /** `GET /v1/usage` (CONTRACT §8): the owner's totals per route, provider and outcome. */
  async usage(query: { readonly since?: string | Date; readonly until?: string | Date } = {}, options: CallOptions = {}): Promise<UsageReport> {
    const iso = (d: string | Date | undefined): string | undefined => (d instanceof Date ? d.toISOString() : d);
    const answer = await this.#call<UsageReport>({
      method: 'GET', path: '/v1/usage', query: { since: iso(query.since), until: iso(query.until) }, safety: 'idempotent', signal: options.signal,
    });
    return answer.body;
  }

  // ---- chat and messages -------------------------------------------------

  /**
   * `POST /v1/chat/completions` with one key for the whole call: it comes
   * back after the server's wait ends (409 `attempt_in_flight`), follows a
   * job in doubt, and retries transport failures, always with that key.
   *
   * @example const { body } = await onejob.chatCompletions({ model: 'summarize', messages });
   */
  async chatCompletions(request: ChatCompletionRequest, options: CompletionCallOptions = {}): Promise<CompletionResult<ChatCompletion>> {
    return this.#completion<ChatCompletion>('/v1/chat/completions', request, options, {});
  }

  /** `POST /v1/messages` (Anthropic-compatible, CONTRACT §7), with the same key and retry rules as {@link chatCompletions}. */
  async messages(request: MessagesRequest, options: CompletionCallOptions = {}): Promise<CompletionResult<MessagesResponse>> {
    return this.#completion<MessagesResponse>('/v1/messages', request, options, this.#token === null ? {} : { 'x-api-key': this.#token });
  }

  /**
   * `POST /v1/chat/completions` with `stream: true`: the job's
   * `chat.completion.chunk`s, one key for the whole call. A connection that
   * breaks (no answer, a cut body) is resumed by itself with the same key
   * and the last event id it saw (CONTRACT §13), so what the loop receives,
   * across any number of reconnects, is the job's result, once (up to
   * `retry.maxRetries` reconnects in a row without an event). A stream that
   * the server ends with `event: error` throws its code (`job_failed`,
   * `attempt_in_doubt`, …) with the job id; so do the non-streaming answers
   * (409, 502) given before the first event.
   *
   * @example
   * for await (const e of onejob.streamChatCompletions({ model: 'summarize', messages }, { idempotencyKey })) {
   *   text += e.data.choices[0]?.delta.content ?? '';
   *   sessionStorage.setItem('last-id', e.id ?? ''); // resume after a reload: { lastEventId }
   * }
   */
  streamChatCompletions(request: ChatCompletionRequest, options: StreamCallOptions = {}): AsyncGenerator<StreamedEvent<ChatCompletionChunk>> {
    return this.#stream<ChatCompletionChunk>('/v1/chat/completions', { ...request, stream: true }, options, {});
  }

  /** `POST /v1/messages` with `stream: true` (Anthropic's events), resumed like {@link streamChatCompletions}. */
  streamMessages(request: MessagesRequest, options: StreamCallOptions = {}): AsyncGenerator<StreamedEvent<Record<string, unknown>>> {
    return this.#stream<Record<string, unknown>>('/v1/messages', { ...request, stream: true }, options, this.#token === null ? {} : { 'x-api-key': this.#token });
  }

  async *#stream<T>(path: string, body: unknown, options: StreamCallOptions, extra: Record<string, string>): AsyncGenerator<StreamedEvent<T>> {
    const idempotencyKey = options.idempotencyKey ?? newIntentKey();
    const signal = options.signal;
    const headers: Record<string, string> = { accept: 'text/event-stream', ...this.#headers, ...extra, 'content-type': 'application/json', 'idempotency-key': idempotencyKey };
    if (this.#token !== null) headers.authorization = `Bearer ${this.#token}`;
    const payload = JSON.stringify(body);
    let lastEventId = options.lastEventId ?? null;
    let jobId: string | null = null;
    /** Connections in a row that brought no event. */
    let fruitless = 0;
    for (let tries = 1; ; tries++) {
      const reconnect = async (cause: unknown, what: string): Promise<void> => {
        if (signal?.aborted) throw aborted(signal, idempotencyKey, tries);
        if (++fruitless > this.#policy.maxRetries) {
          throw new OnejobClientError('network_error', `POST ${path}: ${what} (${describe(cause)})`, { cause, idempotencyKey, jobId, tries });
        }
        await this.#pause(backoffMs(fruitless, this.#policy), signal, idempotencyKey);
      };
      let res: Response;
      try {
        res = await this.#fetch(`${this.#baseUrl}${path}`, { method: 'POST', headers: lastEventId === null ? headers : { ...headers, 'last-event-id': lastEventId }, body: payload, signal });
      } catch (cause) {
        await reconnect(cause, 'no answer');
        continue;
      }
      jobId = res.headers.get(JOB_ID_HEADER) ?? jobId;
      if (!res.ok || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        let text = '';
        try {
          text = await res.text();
        } catch (cause) {
          await reconnect(cause, 'the answer was cut');
          continue;
        }
        const spec: CallSpec = { method: 'POST', path, body, idempotencyKey, safety: 'idempotent', signal };
        const error = res.ok
          ? new OnejobClientError('invalid_response', `POST ${path}: ${res.status} is not an event stream`, { status: res.status, idempotencyKey, jobId, tries })
          : errorOf(spec, res, text, idempotencyKey, tries);
        const waitMs = error.code === 'attempt_in_flight' && error.status === 409
          ? (error.retryAfterMs ?? 1000)
          : tries <= this.#policy.maxRetries && isRetryableStatus(res.status, 'idempotent', res.headers) ? (error.retryAfterMs ?? backoffMs(tries, this.#policy)) : null;
        if (waitMs !== null && waitMs <= this.#policy.maxRetryAfterMs) {
          await this.#pause(waitMs, signal, idempotencyKey);
          continue;
        }
        throw error;
      }
      options.onOpen?.({ jobId, replayed: res.headers.get(REPLAYED_HEADER) === 'true', idempotencyKey });
      let ended = false;
      try {
        for await (const e of sseEvents(res.body!)) {
          if (e.event === 'error') {
            const err = (parseJson(e.data) as { error?: { code?: unknown; message?: unknown; job_id?: unknown } } | null)?.error ?? {};
            throw new OnejobClientError(typeof err.code === 'string' ? err.code : 'stream_error', typeof err.message === 'string' ? err.message : 'the stream ended with an error', {
              idempotencyKey, jobId: typeof err.job_id === 'string' ? err.job_id : jobId, status: res.status, tries,
            });
          }
          if (e.id !== null) lastEventId = e.id;
          fruitless = 0;
          if (e.data === '[DONE]') {
            ended = true;
            break;
          }
          const data = parseJson(e.data);
          if (data === undefined) throw new OnejobClientError('invalid_response', `POST ${path}: an event whose data is not JSON`, { idempotencyKey, jobId, tries });
          yield { id: e.id, event: e.event, data: data as T };
          if (e.event === 'message_stop') {
            ended = true;
            break;
          }
        }
      } catch (cause) {
        if (isOnejobClientError(cause)) throw cause;
        await reconnect(cause, 'the stream broke');
        continue;
      }
      if (ended) return;
      // The body ended without the stream's end: the connection was cut. Resume after the last event.
      await reconnect(new Error('the stream ended early'), 'the stream broke');
    }
  }

  async #completion<T>(path: string, body: unknown, options: CompletionCallOptions, headers: Record<string, string>): Promise<CompletionResult<T>> {
    const idempotencyKey = options.idempotencyKey ?? newIntentKey();
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const inDoubtWaitMs = options.inDoubtWaitMs ?? 30_000;
    const signal = options.signal;
    let jobId: string | null = null;
    for (;;) {
      try {
        const answer = await this.#call<T>({ method: 'POST', path, body, idempotencyKey, safety: 'idempotent', signal, headers });
        return { body: answer.body, jobId: answer.headers.get(JOB_ID_HEADER), replayed: answer.headers.get(REPLAYED_HEADER) === 'true', idempotencyKey };
      } catch (error) {
        if (!isOnejobClientError(error)) throw error;
        jobId = error.jobId ?? jobId;
        const remainingMs = deadline - Date.now();
        if (error.code === 'attempt_in_flight' && error.status === 409) {
          // The server's wait ended with the job still running: ask again with the same key.
          const pauseMs = error.retryAfterMs ?? 1000;
          if (pauseMs >= remainingMs) throw timeout(path, idempotencyKey, jobId, error);
          await this.#pause(pauseMs, signal);
          continue;
        }
        if (error.code === 'attempt_in_doubt' && error.status === 409 && error.jobId !== null) {
          // Follow the job instead of retrying blindly: only a resolution can move it on.
          const followMs = Math.min(inDoubtWaitMs, remainingMs);
          if (followMs <= 0) throw error;
          const job = await this.waitForJob(error.jobId, { until: 'terminal', timeoutMs: followMs, signal });
          if (job.state === 'unknown') throw error;
          // Terminal: the same key now answers with the stored outcome. Running again (a failover): the server waits for it.
          continue;
        }
        throw error;
      }
    }
  }

  // ---- transport ----------------------------------------------------------

  async #call<T>(spec: CallSpec): Promise<Answer<T>> {
    const url = this.#url(spec.path, spec.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers, ...spec.headers };
    if (this.#token !== null) headers.authorization = `Bearer ${this.#token}`;
    if (spec.idempotencyKey !== undefined) headers['idempotency-key'] = spec.idempotencyKey;
    let payload: string | undefined;
    if (spec.body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(spec.body);
    }
    const key = spec.idempotencyKey ?? null;
    for (let tries = 1; ; tries++) {
      let res: Response;
      try {
        res = await this.#fetch(url, { method: spec.method, headers, body: payload, signal: spec.signal });
      } catch (cause) {
        if (spec.signal?.aborted) throw aborted(spec.signal, key, tries);
        const error = new OnejobClientError('network_error', `${spec.method} ${spec.path}: no answer (${describe(cause)})`, { cause, idempotencyKey: key, tries });
        if (spec.safety === 'idempotent' && tries <= this.#policy.maxRetries) {
          await this.#pause(backoffMs(tries, this.#policy), spec.signal, key);
          continue;
        }
        throw error;
      }
      let text: string;
      try {
        text = await res.text();
      } catch (cause) {
        if (spec.signal?.aborted) throw aborted(spec.signal, key, tries);
        if (spec.safety === 'idempotent' && tries <= this.#policy.maxRetries) {
          await this.#pause(backoffMs(tries, this.#policy), spec.signal, key);
          continue;
        }
        throw new OnejobClientError('network_error', `${spec.method} ${spec.path}: the answer was cut (${describe(cause)})`, { cause, idempotencyKey: key, tries, status: res.status });
      }
      if (res.ok) {
        try {
          return { status: res.status, headers: res.headers, body: JSON.parse(text) as T };
        } catch (cause) {
          throw new OnejobClientError('invalid_response', `${spec.method} ${spec.path}: ${res.status} with a body that is not JSON`, { cause, status: res.status, idempotencyKey: key, tries });
        }
      }
      const error = errorOf(spec, res, text, key, tries);
      if (tries <= this.#policy.maxRetries && isRetryableStatus(res.status, spec.safety, res.headers)) {
        const waitMs = error.retryAfterMs ?? backoffMs(tries, this.#policy);
        if (waitMs <= this.#policy.maxRetryAfterMs) {
          await this.#pause(waitMs, spec.signal, key);
          continue;
        }
      }
      throw error;
    }
  }

  #url(path: string, query: CallSpec['query']): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) params.set(name, String(value));
    const qs = params.toString();
    return `${this.#baseUrl}${path}${qs === '' ? '' : `?${qs}`}`;
  }

  async #pause(ms: number, signal: AbortSignal | undefined, key: string | null = null): Promise<void> {
    try {
      await sleep(ms, signal);
    } catch {
      throw aborted(signal!, key, 0);
    }
  }
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

function changed(a: Job, b: Job): boolean {
  return a.state !== b.state || a.version !== b.version || a.attempts.length !== b.attempts.length
    || a.attempts.some((x, i) => x.state !== b.attempts[i]?.state);
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as { cause?: unknown }).cause;
    return inner instanceof Error ? `${cause.message}: ${inner.message}` : cause.message;
  }
  return String(cause);
}

/** JSON.parse, or undefined. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The events of a text/event-stream body (comments skipped). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id: string | null; event: string | null; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) return;
      buffer += decoder.decode(r.value, { stream: true }).replace(/\r\n?/g, '\n');
      for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        let id: string | null = null;
        let event: string | null = null;
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') id = value;
          else if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        if (data.length > 0) yield { id, event, data: data.join('\n') };
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

function aborted(signal: AbortSignal, key: string | null, tries: number): OnejobClientError {
  return new OnejobClientError('aborted', 'the call was aborted', { cause: signal.reason, idempotencyKey: key, tries });
}

function timeout(path: string, key: string, jobId: string | null, cause: OnejobClientError): OnejobClientError {
  return new OnejobClientError('timeout', `POST ${path}: the call's timeoutMs passed with the job still running; call again with the same key to keep waiting`, {
    cause, idempotencyKey: key, jobId, status: cause.status, problem: cause.problem,
  });
}

/** The error of a non-2xx answer: a problem document, Anthropic's error body (`/v1/messages`), or anything else. */
function errorOf(spec: CallSpec, res: Response, text: string, key: string | null, tries: number): OnejobClientError {
  let body: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    body = null;
  }
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  const nested = body?.error !== null && typeof body?.error === 'object' ? (body.error as Record<string, unknown>) : null;
  const code = str(body?.code) ?? `http_${res.status}`;
  const message = str(body?.detail) ?? str(nested?.message) ?? `${spec.method} ${spec.path}: ${res.status} ${res.statusText}`.trim();
  const problem = body !== null && typeof body.code === 'string' ? (body as Problem) : null;
  return new OnejobClientError(code, message, {
    status: res.status,
    problem,
    jobId: res.headers.get(JOB_ID_HEADER) ?? str(body?.job_id),
    attemptId: str(body?.attempt_id),
    retryAfterMs: retryAfterMs(res.headers),
    idempotencyKey: key,
    tries,
  });
}
