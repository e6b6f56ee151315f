/**
 * A scriptable fake inference provider for tests (yours and ours): a real
 * HTTP server on loopback speaking both the OpenAI Chat Completions and the
 * Anthropic Messages wire protocols, recording every call it receives.
 *
 * Script it in-process ({@link FakeProvider.script}, {@link FakeProvider.when},
 * {@link FakeProvider.setDefault}), per request (the `Onejob-Fake-Behaviour`
 * header), or from another process over HTTP (`POST /script`, `GET /calls`,
 * `POST /release`, `POST /reset`). See `docs/providers.md`.
 *
 * @example
 * const fake = await startFakeProvider();
 * fake.script([{ status: 503 }, { delayMs: 50, reply: { summary: 'ok' } }]);
 * // point an `openai` provider at `${fake.url}/v1`, an `anthropic` one at `fake.url`
 * await fake.close();
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  FAKE_BEHAVIOUR_HEADER,
  parseFakeBehaviour,
  parseFakeRule,
  parseFakeScript,
  type FakeBehaviour,
  type FakeMatch,
  type FakeProtocol,
  type FakeRule,
  type FakeScript,
} from './fake-behaviour.ts';
import { fakeRequestAnswer } from './fake-request-answer.ts';
import { abortableSleep } from '../abortable-sleep.ts';
import type { FakeApiContext, FakeCallSource } from './fake-api-context.ts';
import { defaultErrorHeaders, flattenHeaders, readBody, sendJson, sendText, startEventStream, written } from './fake-http.ts';
import { argumentPieces, defaultChunks } from './fake-reply-pieces.ts';
import { FakeResponsesApi, type FakeResponse } from './fake-responses-api.ts';

export type { FakeBehaviour, FakeMatch, FakeProtocol, FakeRule, FakeScript } from './fake-behaviour.ts';
export type { FakeResponse } from './fake-responses-api.ts';

/** Options of {@link startFakeProvider}. */
export interface StartFakeProviderOptions {
  /** The port; default 0 (a free one, see {@link FakeProvider.port}). */
  readonly port?: number;
  /** The interface to listen on; default `127.0.0.1`. */
  readonly host?: string;
  /** An initial script (a bare array is a queue). */
  readonly script?: FakeScript | readonly FakeBehaviour[];
  /** When set, calls must carry this key (`Authorization: Bearer …` or `x-api-key`) or get a 401. */
  readonly apiKey?: string;
  /**
   * Tasks call back when they end (CONTRACT §11): `POST url` (`{attempt}`
   * replaced by the task's `Idempotency-Key`, onejob's attempt id) with the
   * task as the body, signed `Onejob-Signature: sha256=<hex HMAC-SHA256 of
   * the body with secret>`.
   *
   * @example { url: 'http://127.0.0.1:8080/v1/attempts/{attempt}/callback', secret: 'whsec_…' }
   */
  readonly taskCallback?: { readonly url: string; readonly secret: string };
}

/** Where a call's behaviour came from. */
export type { FakeCallSource } from './fake-api-context.ts';

/**
 * What the fake did with a call: `pending` (waiting on a gate or delay),
 * `hanging`, then one of `replied` (streamed or not), `stream-error` (an
 * error event sent mid-stream), `error` (a status ≥ 300), `malformed`,
 * `raw`, `reset`, `rejected` (a bad request, answered 400/401 without using
 * the script), `client-closed` (the client went away first), `server-closed`.
 */
export type FakeCallResult =
  | 'pending'
  | 'hanging'
  | 'replied'
  | 'stream-error'
  | 'error'
  | 'malformed'
  | 'raw'
  | 'reset'
  | 'rejected'
  | 'client-closed'
  | 'server-closed';

/** One call the fake received (a JSON-safe record; `GET /calls` returns these). */
export interface FakeCall {
  /** 1, 2, … in order of arrival (the whole body received). */
  readonly seq: number;
  readonly protocol: FakeProtocol;
  readonly method: string;
  readonly path: string;
  /** Request headers, names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** The `Idempotency-Key` header, or null. */
  readonly idempotencyKey: string | null;
  /** The `Onejob-Job-Id` header, or null. */
  readonly jobId: string | null;
  /** The `Onejob-Attempt-Id` header, or null. */
  readonly attemptId: string | null;
  /** The parsed JSON body, or the raw text when it is not JSON. */
  readonly body: unknown;
  /** ISO time the body was received. */
  readonly receivedAt: string;
  /** Where the behaviour came from; null for a rejected call. */
  readonly source: FakeCallSource | null;
  /** The behaviour applied; null for a rejected call. */
  readonly behaviour: FakeBehaviour | null;
  /** What was done so far. */
  readonly result: FakeCallResult;
  /** The status sent, when headers were sent. */
  readonly status: number | null;
  /** ISO time the fake finished with the call, or null. */
  readonly finishedAt: string | null;
  /** Whether the request asked for a stream (`"stream": true`). */
  readonly stream: boolean;
  /** Streaming: how many content events (text pieces, tool-call argument pieces, a refusal) were sent. */
  readonly chunksSent: number;
}

/** A running fake provider. */
export interface FakeProvider {
  /** `http://host:port` (no trailing slash). OpenAI clients use `${url}/v1`, Anthropic clients `url`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Every call received, oldest first (a snapshot). */
  readonly calls: readonly FakeCall[];
  /**
   * Adds to the script: a bare array is appended to the queue (one behaviour
   * per call); a {@link FakeScript} can also set the default, add rules, or replace.
   *
   * @throws TypeError for a malformed behaviour, naming the path.
   * @example fake.script([{ delayMs: 1000, reply: 'slow' }, { status: 503 }, { hang: true }])
   */
  script(script: FakeScript | readonly FakeBehaviour[]): void;
  /** Sets the behaviour used when no header, rule or queued behaviour applies (initially `{}`: an echo reply). */
  setDefault(behaviour: FakeBehaviour): void;
  /**
   * Adds a rule: matching calls get `behaviour` (at most `times` of them), before the queue.
   *
   * @example fake.when({ contains: 'slow please' }, { delayMs: 5000 })
   */
  when(match: FakeMatch, behaviour: FakeBehaviour, times?: number): void;
  /** Opens a gate: calls waiting on it proceed, later calls pass straight through. */
  release(gate: string): void;
  /**
   * Forgets the queue, rules, default, gates, calls, stored completions and tasks, and restarts `seq` at 1.
   * Calls in progress carry on unrecorded (calls waiting on a gate proceed).
   */
  reset(): void;
  /** Resolves once at least `count` calls have arrived, with all calls so far. */
  waitForCalls(count: number): Promise<readonly FakeCall[]>;
  /**
   * The completions stored for requests with `store: true` (CONTRACT §11's
   * stored completions), oldest first: what `GET /v1/chat/completions?metadata[k]=v` lists.
   */
  readonly storedCompletions: readonly Record<string, unknown>[];
  /** Every task created (`POST /v1/tasks`), oldest first, with how many creates and lookups each received. */
  readonly tasks: readonly FakeTask[];
  /** The callbacks tasks sent (`taskCallback`), oldest first, with the status each was answered (0: not delivered). */
  readonly callbacks: readonly { readonly taskId: string; readonly status: string; readonly answered: number | null }[];
  /** Every background response created (`POST /v1/responses`: one per submit), oldest first, with its streamed reads (`resumes`). */
  readonly responses: readonly FakeResponse[];
  /** Questions about earlier work received: stored-completion listings and task reads. */
  readonly lookups: number;
  /** Resolves once call `seq` is finished (replied, reset, closed…), with its record. */
  waitForResult(seq: number): Promise<FakeCall>;
  /** Stops listening and cuts every open connection (hanging calls end as `server-closed`). */
  close(): Promise<void>;
}

type MutableCall = { -readonly [K in keyof FakeCall]: FakeCall[K] };

/** A task of the fake's prediction-style API (`POST /v1/tasks`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}/cancel`). */
export interface FakeTask {
  readonly id: string;
  /** The `Idempotency-Key` it was created with (onejob sends the attempt id). */
  readonly idempotencyKey: string | null;
  readonly input: unknown;
  readonly status: 'processing' | 'succeeded' | 'failed' | 'canceled';
  readonly output: unknown;
  /** How many create requests carried its idempotency key (1: the work was submitted once). */
  readonly submits: number;
  /** Whether `POST /v1/tasks/{id}/cancel` was received. */
  readonly cancelRequested: boolean;
}

interface TaskState {
  readonly id: string;
  readonly idempotencyKey: string | null;
  readonly input: unknown;
  endsAt: number;
  readonly final: 'succeeded' | 'failed' | 'canceled';
  readonly output: unknown;
  submits: number;
  cancelled: boolean;
  cancelRequested: boolean;
}

interface RuleState {
  readonly rule: FakeRule;
  remaining: number;
}

interface Gate {
  open: boolean;
  readonly waiters: Set<() => void>;
}

const FINAL_RESULTS = new Set<FakeCallResult>(['replied', 'stream-error', 'error', 'malformed', 'raw', 'reset', 'rejected', 'client-closed', 'server-closed']);

/**
 * Starts a fake provider on loopback.
 *
 * @example const fake = await startFakeProvider({ port: 0 }); console.log(fake.url);
 */
export async function startFakeProvider(options: StartFakeProviderOptions = {}): Promise<FakeProvider> {
  const fake = new FakeProviderServer(options);
  await fake.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  return fake;
}

class FakeProviderServer implements FakeProvider {
  readonly #server: Server;
  readonly #apiKey: string | undefined;
  readonly #calls: MutableCall[] = [];
  #queue: FakeBehaviour[] = [];
  #rules: RuleState[] = [];
  #default: FakeBehaviour = {};
  #gates = new Map<string, Gate>();
  readonly #inFlight = new Set<AbortController>();
  #callWaiters: { count: number; resolve: (calls: readonly FakeCall[]) => void }[] = [];
  readonly #resultWaiters = new Map<number, ((call: FakeCall) => void)[]>();
  #closing = false;
  readonly #stored: Record<string, unknown>[] = [];
  readonly #tasks = new Map<string, TaskState>();
  readonly #responsesApi: FakeResponsesApi;
  readonly #closed = new AbortController();
  #lookups = 0;
  #host = '127.0.0.1';
  #port = 0;

  readonly #taskCallback: { readonly url: string; readonly secret: string } | undefined;
  /** Callbacks sent (`taskCallback`), with the status each was answered. */
  readonly callbacks: { taskId: string; status: string; answered: number | null }[] = [];

  constructor(options: StartFakeProviderOptions) {
    this.#apiKey = options.apiKey;
    this.#taskCallback = options.taskCallback;
    this.#responsesApi = new FakeResponsesApi(this.#apiContext());
    if (options.script !== undefined) this.script(options.script);
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) sendJson(res, 500, { error: { message: `fake provider: ${String(err)}`, type: 'fake_error' } });
        else res.destroy();
      });
    });
    // Provider calls may be slow on purpose; never let Node's own timeouts cut them.
    this.#server.requestTimeout = 0;
    this.#server.headersTimeout = 0;
    this.#server.keepAliveTimeout = 5_000;
  }

  listen(port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        const address = this.#server.address() as AddressInfo;
        this.#host = host;
        this.#port = address.port;
        resolve();
      });
    });
  }

  get url(): string {
    const host = this.#host.includes(':') ? `[${this.#host}]` : this.#host;
    return `http://${host}:${this.#port}`;
  }
  get host(): string {
    return this.#host;
  }
  get port(): number {
    return this.#port;
  }
  get calls(): readonly FakeCall[] {
    return this.#calls.map((c) => ({ ...c }));
  }
  get storedCompletions(): readonly Record<string, unknown>[] {
    return [...this.#stored];
  }
  get tasks(): readonly FakeTask[] {
    return [...this.#tasks.values()].map((t) => taskView(t));
  }
  get responses(): readonly FakeResponse[] {
    return this.#responsesApi.responses;
  }
  get lookups(): number {
    return this.#lookups;
  }

  script(script: FakeScript | readonly FakeBehaviour[]): void {
    const parsed = parseFakeScript(script);
    if (parsed.replace === true) {
      this.#queue = [];
      this.#rules = [];
    }
    this.#queue.push(...(parsed.queue ?? []));
    for (const rule of parsed.rules ?? []) this.#rules.push({ rule, remaining: rule.times ?? Infinity });
    if (parsed.default !== undefined) this.#default = parsed.default;
  }

  setDefault(behaviour: FakeBehaviour): void {
    this.#default = parseFakeBehaviour(behaviour);
  }

  when(match: FakeMatch, behaviour: FakeBehaviour, times?: number): void {
    const rule = parseFakeRule({ match, behaviour, ...(times === undefined ? {} : { times }) });
    this.#rules.push({ rule, remaining: rule.times ?? Infinity });
  }

  release(gate: string): void {
    const g = this.#gate(gate);
    g.open = true;
    for (const wake of g.waiters) wake();
    g.waiters.clear();
  }

  reset(): void {
    this.#queue = [];
    this.#rules = [];
    this.#default = {};
    for (const g of this.#gates.values()) for (const wake of g.waiters) wake();
    this.#gates = new Map();
    this.#calls.length = 0;
    this.#seq = 0;
    this.#stored.length = 0;
    this.#tasks.clear();
    this.#responsesApi.reset();
    this.#lookups = 0;
  }

  waitForCalls(count: number): Promise<readonly FakeCall[]> {
    if (this.#calls.length >= count) return Promise.resolve(this.calls);
    return new Promise((resolve) => this.#callWaiters.push({ count, resolve }));
  }

  waitForResult(seq: number): Promise<FakeCall> {
    const call = this.#calls.find((c) => c.seq === seq);
    if (call !== undefined && FINAL_RESULTS.has(call.result)) return Promise.resolve({ ...call });
    return new Promise((resolve) => {
      const list = this.#resultWaiters.get(seq) ?? [];
      list.push(resolve);
      this.#resultWaiters.set(seq, list);
    });
  }

  close(): Promise<void> {
    this.#closing = true;
    this.#closed.abort();
    for (const controller of this.#inFlight) controller.abort();
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  /** The services the protocol objects share. */
  #apiContext(): FakeApiContext {
    const server = this;
    return {
      get url() {
        return server.url;
      },
      checkAuth: (protocol, headers) => this.#checkAuth(protocol, headers as Record<string, string>),
      choose: (protocol, headers, body) => this.#choose(protocol, headers as Record<string, string>, body),
      waitGate: (gate, signal) => this.#waitGate(gate, signal),
      countLookup: () => {
        this.#lookups += 1;
      },
      closing: this.#closed.signal,
    };
  }

  #gate(name: string): Gate {
    let g = this.#gates.get(name);
    if (g === undefined) {
      g = { open: false, waiters: new Set() };
      this.#gates.set(name, g);
    }
    return g;
  }

  #seq = 0;

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const method = req.method ?? 'GET';

    // Control plane, for other processes.
    if (path === '/calls' && method === 'GET') return sendJson(res, 200, { data: this.calls });
    if (path === '/healthz' && method === 'GET') return sendJson(res, 200, { ok: true });
    if (path === '/v1/models' && method === 'GET') {
      return sendJson(res, 200, { object: 'list', data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'onejob' }] });
    }
    if ((path === '/script' || path === '/release' || path === '/reset') && method === 'POST') {
      return this.#control(path, req, res);
    }
    // Questions about earlier work (CONTRACT §11): stored completions, and the task API.
    if ((path === '/v1/chat/completions' || path === '/chat/completions') && method === 'GET') return this.#listStored(req, res);
    const response = /^(?:\/v1)?\/responses(?:\/([^/]+)(\/cancel)?)?$/.exec(path);
    if (response !== null) return this.#responsesApi.handle(req, res, method, response[1] === undefined ? undefined : decodeURIComponent(response[1]), response[2] !== undefined);
    const task = /^(?:\/v1)?\/tasks(?:\/([^/]+)(\/cancel)?)?$/.exec(path);
    if (task !== null) return this.#taskApi(req, res, method, task[1] === undefined ? undefined : decodeURIComponent(task[1]), task[2] !== undefined);

    const protocol: FakeProtocol | null =
      path === '/v1/chat/completions' || path === '/chat/completions'
        ? 'openai'
        : path === '/v1/messages' || path === '/messages'
          ? 'anthropic'
          : null;
    if (protocol === null) return sendJson(res, 404, { error: { message: `fake provider: no route ${method} ${path}`, type: 'invalid_request_error' } });
    if (method !== 'POST') return sendError(res, protocol, 405, { message: `${method} is not allowed here` });

    const text = await readBody(req);
    let body: unknown = text;
    let bodyIsJson = true;
    try {
      body = JSON.parse(text ?? '');
    } catch {
      bodyIsJson = false;
      body = text ?? '';
    }
    const headers = flattenHeaders(req);
    const call: MutableCall = {
      seq: ++this.#seq,
      protocol,
      method,
      path,
      headers,
      idempotencyKey: headers['idempotency-key'] ?? null,
      jobId: headers['onejob-job-id'] ?? null,
      attemptId: headers['onejob-attempt-id'] ?? null,
      body,
      receivedAt: new Date().toISOString(),
      source: null,
      behaviour: null,
      result: 'pending',
      status: null,
      finishedAt: null,
      stream: typeof body === 'object' && body !== null && (body as { stream?: unknown }).stream === true,
      chunksSent: 0,
    };
    this.#calls.push(call);
    const controller = new AbortController();
    this.#inFlight.add(controller);
    res.on('close', () => {
      this.#inFlight.delete(controller);
      controller.abort(); // stops a pending gate or delay
      if (!FINAL_RESULTS.has(call.result)) this.#finish(call, this.#closing ? 'server-closed' : 'client-closed');
    });
    this.#notifyArrival();

    const rejection = text === null
      ? { status: 413, message: 'request body too large' }
      : !bodyIsJson
        ? { status: 400, message: 'request body is not valid JSON' }
        : this.#checkAuth(protocol, headers) ?? validateRequest(protocol, body);
    if (rejection !== null) {
      sendError(res, protocol, rejection.status, { message: rejection.message, type: rejection.status === 401 ? undefined : 'invalid_request_error' });
      return this.#finish(call, 'rejected', rejection.status);
    }

    let chosen: { behaviour: FakeBehaviour; source: FakeCallSource };
    try {
      chosen = this.#choose(protocol, headers, body);
    } catch (err) {
      sendError(res, protocol, 400, { message: `fake provider: ${(err as Error).message}`, type: 'invalid_request_error' });
      return this.#finish(call, 'rejected', 400);
    }
    call.source = chosen.source;
    call.behaviour = chosen.behaviour;
    await this.#act(call, chosen.behaviour, req, res, controller.signal);
  }

  async #control(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    let value: unknown = {};
    try {
      value = text === null || text === '' ? {} : JSON.parse(text);
    } catch {
      return sendJson(res, 400, { error: { message: 'body is not valid JSON' } });
    }
    try {
      if (path === '/script') {
        this.script(value as FakeScript);
        return sendJson(res, 200, { queued: this.#queue.length, rules: this.#rules.length });
      }
      if (path === '/release') {
        const gate = (value as { gate?: unknown }).gate;
        if (typeof gate !== 'string') return sendJson(res, 400, { error: { message: 'body must be { "gate": "<name>" }' } });
        this.release(gate);
        return sendJson(res, 200, { released: gate });
      }
      this.reset();
      return sendJson(res, 200, { reset: true });
    } catch (err) {
      return sendJson(res, 400, { error: { message: (err as Error).message } });
    }
  }

  /** `GET /v1/chat/completions?metadata[k]=v`: the stored completions whose metadata has every given pair. */
  #listStored(req: IncomingMessage, res: ServerResponse): void {
    this.#lookups += 1;
    const query = new URL(req.url ?? '/', 'http://fake').searchParams;
    const wanted: [string, string][] = [];
    for (const [k, v] of query) {
      const m = /^metadata\[(.+)\]$/.exec(k);
      if (m) wanted.push([m[1]!, v]);
    }
    const data = this.#stored.filter((c) => wanted.every(([k, v]) => (c.metadata as Record<string, unknown> | undefined)?.[k] === v));
    sendJson(res, 200, { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false });
  }

  /** The fake task service: create (idempotent by `Idempotency-Key`), read, cancel. */
  async #taskApi(req: IncomingMessage, res: ServerResponse, method: string, id: string | undefined, cancel: boolean): Promise<void> {
    const headers = flattenHeaders(req);
    const auth = this.#checkAuth('openai', headers);
    if (auth !== null) return sendJson(res, auth.status, { error: { message: auth.message } });
    if (id === undefined) {
      if (method !== 'POST') return sendJson(res, 405, { error: { message: `${method} is not allowed here` } });
      const text = await readBody(req);
      let body: unknown;
      try {
        body = JSON.parse(text ?? '');
      } catch {
        return sendJson(res, 400, { error: { message: 'request body is not valid JSON' } });
      }
      if (typeof body !== 'object' || body === null || !('input' in body)) return sendJson(res, 422, { error: { message: 'body must be {"input": …}' } });
      const key = headers['idempotency-key'] ?? null;
      const existing = key === null ? undefined : [...this.#tasks.values()].find((t) => t.idempotencyKey === key);
      if (existing !== undefined) {
        existing.submits += 1;
        return sendJson(res, 200, taskBody(this.url, existing));
      }
      let chosen: FakeBehaviour;
      try {
        chosen = this.#choose('openai', headers, { messages: [], ...(body as object) }).behaviour;
      } catch (err) {
        return sendJson(res, 400, { error: { message: `fake provider: ${(err as Error).message}` } });
      }
      const signal = new AbortController().signal;
      if (chosen.gate !== undefined) await this.#waitGate(chosen.gate, signal);
      if (chosen.delayMs !== undefined && chosen.delayMs > 0) await abortableSleep(chosen.delayMs, signal);
      if (chosen.status !== undefined && chosen.status >= 300) return sendJson(res, chosen.status, { error: { message: 'scripted', ...chosen.error } }, { ...defaultErrorHeaders(chosen.status), ...(chosen.headers ?? {}) });
      const input = (body as { input: unknown }).input;
      const t: TaskState = {
        id: `task_fake_${this.#tasks.size + 1}`, idempotencyKey: key, input,
        endsAt: Date.now() + (chosen.task?.runMs ?? 0), final: chosen.task?.status ?? 'succeeded',
        output: chosen.task?.output ?? chosen.reply ?? { echo: input }, submits: 1, cancelled: false, cancelRequested: false,
      };
      this.#tasks.set(t.id, t);
      this.#scheduleCallback(t);
      if (chosen.hang === true) return; // created, never answered (until the client goes away)
      if (chosen.loseAnswer === true) {
        req.socket.resetAndDestroy();
        return;
      }
      return sendJson(res, 201, taskBody(this.url, t), chosen.headers ?? {});
    }
    const t = this.#tasks.get(id);
    if (t === undefined) return sendJson(res, 404, { error: { message: `no task ${id}` } });
    if (cancel) {
      if (method !== 'POST') return sendJson(res, 405, { error: { message: `${method} is not allowed here` } });
      t.cancelRequested = true;
      if (taskStatus(t) === 'processing') {
        t.cancelled = true;
        void this.#callBack(t);
      }
      return sendJson(res, 200, taskBody(this.url, t));
    }
    if (method !== 'GET') return sendJson(res, 405, { error: { message: `${method} is not allowed here` } });
    this.#lookups += 1;
    return sendJson(res, 200, taskBody(this.url, t));
  }

  /** With `taskCallback`: the task calls back when it ends (unless cancelled first: then at the cancel). */
  #scheduleCallback(t: TaskState): void {
    if (this.#taskCallback === undefined || t.idempotencyKey === null) return;
    const timer = setTimeout(() => {
      // A timer may fire a millisecond before the wall clock reaches endsAt: the task has ended now.
      t.endsAt = Math.min(t.endsAt, Date.now());
      if (!t.cancelled && !this.#closing) void this.#callBack(t);
    }, Math.max(0, t.endsAt - Date.now()));
    timer.unref();
  }

  async #callBack(t: TaskState): Promise<void> {
    const cb = this.#taskCallback;
    if (cb === undefined || t.idempotencyKey === null) return;
    const body = JSON.stringify(taskBody(this.url, t));
    const record = { taskId: t.id, status: taskStatus(t), answered: null as number | null };
    this.callbacks.push(record);
    try {
      const res = await fetch(cb.url.replace('{attempt}', encodeURIComponent(t.idempotencyKey)), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'onejob-signature': `sha256=${createHmac('sha256', cb.secret).update(body).digest('hex')}` },
        body,
      });
      record.answered = res.status;
    } catch {
      record.answered = 0;
    }
  }

  #checkAuth(protocol: FakeProtocol, headers: Record<string, string>): { status: number; message: string } | null {
    if (this.#apiKey === undefined) return null;
    const given = protocol === 'openai' ? headers.authorization?.replace(/^Bearer\s+/i, '') : headers['x-api-key'];
    return given === this.#apiKey ? null : { status: 401, message: 'invalid API key' };
  }

  #choose(protocol: FakeProtocol, headers: Record<string, string>, body: unknown): { behaviour: FakeBehaviour; source: FakeCallSource } {
    const header = headers[FAKE_BEHAVIOUR_HEADER];
    if (header !== undefined) {
      let value: unknown;
      try {
        value = JSON.parse(header);
      } catch {
        throw new TypeError(`${FAKE_BEHAVIOUR_HEADER} header is not valid JSON`);
      }
      return { behaviour: parseFakeBehaviour(value, FAKE_BEHAVIOUR_HEADER), source: 'header' };
    }
    const text = requestText(body);
    const model = typeof (body as { model?: unknown }).model === 'string' ? (body as { model: string }).model : undefined;
    for (const state of this.#rules) {
      if (state.remaining <= 0) continue;
      if (!matches(state.rule.match, protocol, headers, text, model)) continue;
      state.remaining -= 1;
      return { behaviour: state.rule.behaviour, source: 'rule' };
    }
    const queued = this.#queue.shift();
    if (queued !== undefined) return { behaviour: queued, source: 'queue' };
    return { behaviour: this.#default, source: 'default' };
  }

  async #act(call: MutableCall, b: FakeBehaviour, req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    if (b.gate !== undefined && !(await this.#waitGate(b.gate, signal))) return;
    if (b.delayMs !== undefined && b.delayMs > 0 && !(await abortableSleep(b.delayMs, signal))) return;
    if (signal.aborted || res.destroyed) return;

    if (b.hang === true) {
      call.result = 'hanging';
      return; // the 'close' listener records how it ended
    }
    const protocol = call.protocol;
    const extraHeaders = { ...requestIdHeader(protocol, call.seq), ...(b.headers ?? {}) };

    if (b.reset === 'before-headers') {
      this.#finish(call, 'reset');
      req.socket.resetAndDestroy();
      return;
    }
    if (b.reset !== undefined) {
      const full = JSON.stringify(renderCompletion(protocol, call, b));
      res.writeHead(b.status ?? 200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(full)), ...extraHeaders });
      if (b.reset === 'mid-body') await written(res, full.slice(0, Math.floor(full.length / 2)));
      else res.flushHeaders();
      this.#finish(call, 'reset', b.status ?? 200);
      // end() (not destroy()) so what was written reaches the client before the FIN.
      res.socket?.end();
      return;
    }
    if (b.status !== undefined && b.status >= 300) {
      const headers = { ...defaultErrorHeaders(b.status), ...extraHeaders };
      sendError(res, protocol, b.status, { ...b.error }, headers);
      return this.#finish(call, 'error', b.status);
    }
    const status = b.status ?? 200;
    if (b.malformed === true) {
      const full = JSON.stringify(renderCompletion(protocol, call, b));
      sendText(res, status, full.slice(0, Math.max(1, Math.floor(full.length / 2))), extraHeaders);
      return this.#finish(call, 'malformed', status);
    }
    if (b.rawBody !== undefined) {
      sendText(res, status, b.rawBody, extraHeaders);
      return this.#finish(call, 'raw', status);
    }
    // The work is done: a request with `store: true` is stored, whether or not its answer arrives.
    const completion = renderCompletion(protocol, call, b);
    const requested = (call.body ?? {}) as { store?: unknown; metadata?: unknown };
    if (protocol === 'openai' && requested.store === true) {
      this.#stored.push({ ...completion, object: 'chat.completion', metadata: typeof requested.metadata === 'object' && requested.metadata !== null ? requested.metadata : {} });
    }
    if (b.loseAnswer === true) {
      this.#finish(call, 'reset');
      req.socket.resetAndDestroy();
      return;
    }
    if (call.stream) return this.#stream(call, b, res, status, extraHeaders, signal);
    sendJson(res, status, completion, extraHeaders);
    this.#finish(call, 'replied', status);
  }

  /** Sends the reply as the protocol's event stream, with the behaviour's timing, gate, error or cut. */
  async #stream(call: MutableCall, b: FakeBehaviour, res: ServerResponse, status: number, headers: Record<string, string>, signal: AbortSignal): Promise<void> {
    const plan = streamPlan(call, b);
    startEventStream(res, status, headers);
    call.status = status;
    let first = true;
    // A cut ends the socket itself, past the response's own buffer: it waits for the events written so far
    // to reach the socket (Node 26 holds a write in the response until the next tick; ending at once lost it).
    let lastWrite: Promise<void> = Promise.resolve();
    for (const step of plan) {
      if (step.kind !== 'framing') {
        const n = call.chunksSent;
        // At a content event: after exactly `afterChunks`; at the end event: any count not reached yet.
        const due = (after: number) => (step.kind === 'content' ? n === after : after >= n);
        if (b.streamGate !== undefined && due(b.streamGate.afterChunks) && !(await this.#waitGate(b.streamGate.gate, signal))) return;
        if (b.streamError !== undefined && due(b.streamError.afterChunks)) {
          res.end(sseEvent(call.protocol, errorEvent(call.protocol, b.streamError)));
          return this.#finish(call, 'stream-error', status);
        }
        if (b.streamCut !== undefined && due(b.streamCut.afterChunks)) {
          await lastWrite;
          this.#finish(call, 'reset', status);
          // end() (not destroy()) so the events written so far reach the client before the FIN; the body stays unterminated.
          res.socket?.end();
          return;
        }
      }
      if (!first && b.chunkDelayMs !== undefined && b.chunkDelayMs > 0 && !(await abortableSleep(b.chunkDelayMs, signal))) return;
      first = false;
      if (signal.aborted || res.destroyed) return;
      lastWrite = written(res, sseEvent(call.protocol, step.event));
      if (step.kind === 'content') call.chunksSent += 1;
    }
    res.end();
    this.#finish(call, 'replied', status);
  }

  #waitGate(name: string, signal: AbortSignal): Promise<boolean> {
    const gate = this.#gate(name);
    if (gate.open) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve(!signal.aborted);
      };
      const onAbort = () => {
        gate.waiters.delete(wake);
        resolve(false);
      };
      gate.waiters.add(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #finish(call: MutableCall, result: FakeCallResult, status?: number): void {
    call.result = result;
    if (status !== undefined) call.status = status;
    call.finishedAt = new Date().toISOString();
    if (!this.#calls.includes(call)) return; // forgotten by reset(): its seq may be reused
    const waiters = this.#resultWaiters.get(call.seq);
    if (waiters !== undefined) {
      this.#resultWaiters.delete(call.seq);
      for (const resolve of waiters) resolve({ ...call });
    }
  }

  #notifyArrival(): void {
    const ready = this.#callWaiters.filter((w) => this.#calls.length >= w.count);
    if (ready.length === 0) return;
    this.#callWaiters = this.#callWaiters.filter((w) => this.#calls.length < w.count);
    const snapshot = this.calls;
    for (const w of ready) w.resolve(snapshot);
  }
}

// ---------------------------------------------------------------------------
// Wire formats.

interface ReplyParts {
  readonly content: string;
  readonly refusal: string | null;
  readonly toolCalls: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  readonly model: string;
  readonly finish: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

function replyParts(call: FakeCall, given: FakeBehaviour): ReplyParts {
  const request = (call.body ?? {}) as { model?: unknown };
  const b = given.fitRequest === true ? fittedBehaviour(call.body, given) : given;
  const content =
    b.reply === undefined ? (b.chunks !== undefined ? b.chunks.join('') : b.toolCalls !== undefined || b.refusal !== undefined ? '' : lastUserText(call.body)) : typeof b.reply === 'string' ? b.reply : JSON.stringify(b.reply);
  const prefix = call.protocol === 'openai' ? 'call_fake' : 'toolu_fake';
  const toolCalls = (b.toolCalls ?? []).map((t, i) => ({
    id: t.id ?? `${prefix}_${call.seq}_${i}`,
    name: t.name,
    arguments: t.arguments === undefined ? '{}' : typeof t.arguments === 'string' ? t.arguments : JSON.stringify(t.arguments),
  }));
  const outputText = content + (b.refusal ?? '') + toolCalls.map((t) => t.name + t.arguments).join('');
  return {
    content,
    refusal: b.refusal ?? null,
    toolCalls,
    model: b.model ?? (typeof request.model === 'string' ? request.model : 'fake-model'),
    finish: b.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : b.refusal !== undefined ? 'content_filter' : 'stop'),
    promptTokens: b.usage?.prompt_tokens ?? estimateTokens(requestText(call.body)),
    completionTokens: b.usage?.completion_tokens ?? estimateTokens(outputText),
  };
}

/** `b` with the answer {@link fakeRequestAnswer} gives the request, when `b` scripts no answer of its own. */
function fittedBehaviour(body: unknown, b: FakeBehaviour): FakeBehaviour {
  if (b.reply !== undefined || b.toolCalls !== undefined || b.refusal !== undefined || b.chunks !== undefined) return b;
  const answer = fakeRequestAnswer(body);
  if (answer === null) return b;
  return 'toolCall' in answer ? { ...b, toolCalls: [answer.toolCall] } : { ...b, reply: answer.json };
}

function renderCompletion(protocol: FakeProtocol, call: FakeCall, b: FakeBehaviour): Record<string, unknown> {
  const r = replyParts(call, b);
  if (protocol === 'openai') {
    const message: Record<string, unknown> = { role: 'assistant', content: r.content === '' && r.toolCalls.length > 0 ? null : r.content, refusal: r.refusal };
    if (r.toolCalls.length > 0) message.tool_calls = r.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
    return {
      id: `chatcmpl-fake-${call.seq}`,
      object: 'chat.completion',
      created: Math.floor(Date.parse(call.receivedAt) / 1000),
      model: r.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: r.finish }],
      usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
      system_fingerprint: 'fp_onejob_fake',
    };
  }
  const text = r.content + (r.refusal ?? '');
  const content: Record<string, unknown>[] = [];
  if (text !== '' || r.toolCalls.length === 0) content.push({ type: 'text', text });
  for (const t of r.toolCalls) content.push({ type: 'tool_use', id: t.id, name: t.name, input: parseArguments(t.arguments) });
  return {
    id: `msg_fake_${call.seq}`,
    type: 'message',
    role: 'assistant',
    model: r.model,
    content,
    stop_reason: ANTHROPIC_STOP_REASON[r.finish] ?? r.finish,
    stop_sequence: null,
    usage: { input_tokens: r.promptTokens, output_tokens: r.completionTokens },
  };
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

/** One event of a stream: `content` events are counted for `afterChunks`. */
type StreamStep = { readonly kind: 'content' | 'framing' | 'end'; readonly event: { readonly name?: string; readonly data: unknown } };

function streamPlan(call: FakeCall, b: FakeBehaviour): StreamStep[] {
  const r = replyParts(call, b);
  const pieces = b.chunks !== undefined ? [...b.chunks] : defaultChunks(r.content);
  const steps: StreamStep[] = [];
  const framing = (data: unknown, name?: string) => steps.push({ kind: 'framing', event: { ...(name === undefined ? {} : { name }), data } });
  const content = (data: unknown, name?: string) => steps.push({ kind: 'content', event: { ...(name === undefined ? {} : { name }), data } });
  /** The first event after the content (finish chunk, message_delta): where a gate, error or cut after all content happens. */
  const end = (data: unknown, name?: string) => steps.push({ kind: 'end', event: { ...(name === undefined ? {} : { name }), data } });
  if (call.protocol === 'openai') {
    const base = { id: `chatcmpl-fake-${call.seq}`, object: 'chat.completion.chunk', created: Math.floor(Date.parse(call.receivedAt) / 1000), model: r.model, system_fingerprint: 'fp_onejob_fake' };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    framing(chunk({ role: 'assistant', content: '', refusal: null }));
    for (const piece of pieces) content(chunk({ content: piece }));
    if (r.refusal !== null) content(chunk({ refusal: r.refusal }));
    for (const [index, t] of r.toolCalls.entries()) {
      framing(chunk({ tool_calls: [{ index, id: t.id, type: 'function', function: { name: t.name, arguments: '' } }] }));
      for (const piece of argumentPieces(t.arguments)) content(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
    end(chunk({}, r.finish));
    const includeUsage = ((call.body as { stream_options?: { include_usage?: unknown } } | null)?.stream_options?.include_usage) === true;
    if (includeUsage) framing({ ...base, choices: [], usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens } });
    framing('[DONE]');
    return steps;
  }
  framing({
    type: 'message_start',
    message: { id: `msg_fake_${call.seq}`, type: 'message', role: 'assistant', model: r.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: r.promptTokens, output_tokens: 1 } },
  }, 'message_start');
  framing({ type: 'ping' }, 'ping');
  let index = 0;
  const text = [...pieces, ...(r.refusal === null ? [] : [r.refusal])];
  if (text.length > 0 || r.toolCalls.length === 0) {
    framing({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, 'content_block_start');
    for (const piece of text) content({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }, 'content_block_delta');
    framing({ type: 'content_block_stop', index }, 'content_block_stop');
    index += 1;
  }
  for (const t of r.toolCalls) {
    framing({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} } }, 'content_block_start');
    for (const piece of argumentPieces(t.arguments)) content({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } }, 'content_block_delta');
    framing({ type: 'content_block_stop', index }, 'content_block_stop');
    index += 1;
  }
  end({ type: 'message_delta', delta: { stop_reason: ANTHROPIC_STOP_REASON[r.finish] ?? r.finish, stop_sequence: null }, usage: { output_tokens: r.completionTokens } }, 'message_delta');
  framing({ type: 'message_stop' }, 'message_stop');
  return steps;
}

function errorEvent(protocol: FakeProtocol, e: { readonly type?: string; readonly message?: string }): { name?: string; data: unknown } {
  if (protocol === 'openai') {
    return { data: { error: { message: e.message ?? 'The server had an error while processing your request.', type: e.type ?? 'server_error', param: null, code: null } } };
  }
  return { name: 'error', data: { type: 'error', error: { type: e.type ?? 'overloaded_error', message: e.message ?? 'Overloaded' } } };
}

/** One SSE event (`event:` line for Anthropic's named events, then `data:`). */
function sseEvent(_protocol: FakeProtocol, event: { readonly name?: string; readonly data: unknown }): string {
  const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
  return `${event.name === undefined ? '' : `event: ${event.name}\n`}data: ${data}\n\n`;
}

const ANTHROPIC_STOP_REASON: Record<string, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  content_filter: 'refusal',
};

const OPENAI_ERRORS: Record<number, { type: string; code: string | null; message: string }> = {
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request.' },
  401: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory', message: 'Country, region, or territory not supported.' },
  404: { type: 'invalid_request_error', code: 'model_not_found', message: 'The model does not exist or you do not have access to it.' },
  429: { type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests.' },
  500: { type: 'server_error', code: null, message: 'The server had an error while processing your request.' },
  503: { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later.' },
};

const ANTHROPIC_ERRORS: Record<number, { type: string; message: string }> = {
  400: { type: 'invalid_request_error', message: 'Invalid request.' },
  401: { type: 'authentication_error', message: 'invalid x-api-key' },
  403: { type: 'permission_error', message: 'Your API key does not have permission to use the specified resource.' },
  404: { type: 'not_found_error', message: 'The requested resource was not found.' },
  413: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' },
  429: { type: 'rate_limit_error', message: 'Number of requests has exceeded your rate limit.' },
  500: { type: 'api_error', message: 'Internal server error' },
  504: { type: 'timeout_error', message: 'Request timed out.' },
  529: { type: 'overloaded_error', message: 'Overloaded' },
};

function sendError(
  res: ServerResponse,
  protocol: FakeProtocol,
  status: number,
  override: { type?: string | undefined; message?: string | undefined; code?: string | undefined },
  headers: Record<string, string> = {},
): void {
  if (protocol === 'openai') {
    const base = OPENAI_ERRORS[status] ?? { type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null, message: `HTTP ${status}` };
    sendJson(res, status, { error: { message: override.message ?? base.message, type: override.type ?? base.type, param: null, code: override.code ?? base.code } }, headers);
  } else {
    const base = ANTHROPIC_ERRORS[status] ?? { type: status >= 500 ? 'api_error' : 'invalid_request_error', message: `HTTP ${status}` };
    sendJson(res, status, { type: 'error', error: { type: override.type ?? base.type, message: override.message ?? base.message } }, headers);
  }
}

function requestIdHeader(protocol: FakeProtocol, seq: number): Record<string, string> {
  return protocol === 'openai' ? { 'x-request-id': `req_fake_${seq}` } : { 'request-id': `req_fake_${seq}` };
}

/** Checks the fields each real API insists on, so adapter bugs surface as the real 400s would. */
function validateRequest(protocol: FakeProtocol, body: unknown): { status: number; message: string } | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { status: 400, message: 'request body must be a JSON object' };
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') return { status: 400, message: 'model: Field required' };
  if (!Array.isArray(b.messages) || b.messages.length === 0) return { status: 400, message: 'messages: must be a non-empty array' };
  if (protocol === 'anthropic') {
    if (typeof b.max_tokens !== 'number') return { status: 400, message: 'max_tokens: Field required' };
    for (const [i, m] of b.messages.entries()) {
      const role = (m as { role?: unknown } | null)?.role;
      if (role !== 'user' && role !== 'assistant') {
        return { status: 400, message: `messages.${i}.role: Input should be 'user' or 'assistant'` };
      }
    }
  }
  return null;
}

function matches(match: FakeMatch, protocol: FakeProtocol, headers: Record<string, string>, text: string, model: string | undefined): boolean {
  if (match.protocol !== undefined && match.protocol !== protocol) return false;
  if (match.model !== undefined && match.model !== model) return false;
  if (match.contains !== undefined && !text.includes(match.contains)) return false;
  if (match.header !== undefined) {
    const value = headers[match.header.name.toLowerCase()];
    if (value === undefined) return false;
    if (match.header.value !== undefined && value !== match.header.value) return false;
  }
  return true;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
    .join('');
}

/** All the text of a request (Anthropic `system` included), for `contains` rules and token estimates. */
function requestText(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const b = body as { system?: unknown; messages?: unknown };
  const parts: string[] = [];
  if (b.system !== undefined) parts.push(contentText(b.system));
  if (Array.isArray(b.messages)) for (const m of b.messages) parts.push(contentText((m as { content?: unknown } | null)?.content));
  return parts.join('\n');
}

function lastUserText(body: unknown): string {
  const messages = (body as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m?.role === 'user') return contentText(m.content);
  }
  return '';
}

function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function taskStatus(t: TaskState): FakeTask['status'] {
  if (t.cancelled) return 'canceled';
  return Date.now() < t.endsAt ? 'processing' : t.final;
}

function taskView(t: TaskState): FakeTask {
  const status = taskStatus(t);
  return { id: t.id, idempotencyKey: t.idempotencyKey, input: t.input, status, output: status === 'succeeded' ? t.output : null, submits: t.submits, cancelRequested: t.cancelRequested };
}

/** A task as the prediction-style API answers it (CONTRACT §11). */
function taskBody(base: string, t: TaskState): Record<string, unknown> {
  const status = taskStatus(t);
  return {
    id: t.id,
    status,
    ...(status === 'succeeded' ? { output: t.output } : {}),
    ...(status === 'failed' ? { error: 'the fake task failed (scripted)' } : {}),
    urls: { get: `${base}/v1/tasks/${t.id}`, cancel: `${base}/v1/tasks/${t.id}/cancel` },
  };
}
