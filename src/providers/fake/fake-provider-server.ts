/**
 * A scriptable fake inference provider for tests (yours and ours): a real
 * HTTP server on loopback speaking the OpenAI Chat Completions and the
 * Anthropic Messages wire protocols, and the APIs a reconciler asks (stored
 * completions, the Responses API in background mode, a task API), recording
 * every chat call it receives.
 *
 * This module is the server: the script (queue, rules, default, gates), the
 * call log, the control plane and the routing. Each protocol is its own
 * object beside it, as the real adapters are: `fake-chat-completions.ts` and
 * `fake-anthropic-messages.ts` (run by `fake-chat-api.ts`),
 * `fake-stored-completions.ts`, `fake-responses-api.ts`, `fake-task-api.ts`.
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
import { randomBytes } from 'node:crypto';
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
import type { FakeApiContext, FakeCallSource } from './fake-api-context.ts';
import { fakeAnthropicMessages } from './fake-anthropic-messages.ts';
import { FakeCallLog, type FakeCall } from './fake-call.ts';
import { FakeChatApi } from './fake-chat-api.ts';
import { fakeChatCompletions } from './fake-chat-completions.ts';
import { readBody, sendJson } from './fake-http.ts';
import { requestText } from './fake-reply.ts';
import { FakeResponsesApi, type FakeResponse } from './fake-responses-api.ts';
import { FakeStoredCompletions } from './fake-stored-completions.ts';
import { FakeTaskApi, type FakeTask, type FakeTaskCallbackTarget } from './fake-task-api.ts';

export type { FakeBehaviour, FakeMatch, FakeProtocol, FakeRule, FakeScript } from './fake-behaviour.ts';
export type { FakeCall, FakeCallResult } from './fake-call.ts';
export type { FakeResponse } from './fake-responses-api.ts';
export type { FakeTask } from './fake-task-api.ts';

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
   * Tasks call back when they end (CONTRACT §11, §15): `POST url` (`{attempt}`
   * replaced by the task's `Idempotency-Key`, onejob's attempt id) with the
   * task as the body, signed `Onejob-Signature: t=<unix s>,v1=<hex
   * HMAC-SHA256 of "<t>.<attempt id>.<body>" with secret>` (`signature:
   * 'v3'`: `sha256=<hex HMAC-SHA256 of the body>`).
   *
   * @example { url: 'http://127.0.0.1:8080/v1/attempts/{attempt}/callback', secret: 'whsec_…' }
   */
  readonly taskCallback?: FakeTaskCallbackTarget;
  /**
   * Response and task ids carry a token of this start (`task_fake_<token>_1`), so a fake restarted after a kill
   * never hands out an id it gave before (a real service does not reuse ids; by default they are `task_fake_1`, …).
   */
  readonly uniqueIds?: boolean;
  /**
   * `GET /v1/chat/completions?metadata[…]=…` ignores its filter and lists
   * every stored completion, newest first (several OpenAI-compatible servers
   * do): a stored-completions lookup must take only the completion whose
   * `metadata.onejob_attempt_id` is its attempt's (CONTRACT §15).
   */
  readonly ignoreLookupFilter?: boolean;
}

/** Where a call's behaviour came from. */
export type { FakeCallSource } from './fake-api-context.ts';

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
  /**
   * Work submitted, per onejob attempt (the `Onejob-Attempt-Id` header of a
   * chat, messages, background-response or task create; `GET /submits` over
   * HTTP): how many creates arrived, and the reply each chose. onejob sends
   * each attempt's work once (CONTRACT §11: a lookup never submits again).
   */
  readonly submits: ReadonlyMap<string, FakeSubmits>;
  /** Resolves once call `seq` is finished (replied, reset, closed…), with its record. */
  waitForResult(seq: number): Promise<FakeCall>;
  /** Stops listening and cuts every open connection (hanging calls end as `server-closed`). */
  close(): Promise<void>;
}

/** The creates one attempt sent ({@link FakeProvider.submits}). */
export interface FakeSubmits {
  /** Creates received with this attempt's id (1: the work was sent once). */
  readonly submits: number;
  /** The scripted `reply` of each create that chose a behaviour (null: none scripted, an echo). */
  readonly replies: readonly unknown[];
}

interface RuleState {
  readonly rule: FakeRule;
  remaining: number;
}

interface Gate {
  open: boolean;
  readonly waiters: Set<() => void>;
}

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
  #queue: FakeBehaviour[] = [];
  #rules: RuleState[] = [];
  #default: FakeBehaviour = {};
  #gates = new Map<string, Gate>();
  readonly #closed = new AbortController();
  #lookups = 0;
  readonly #idPart: string;
  readonly #submits = new Map<string, { submits: number; replies: unknown[] }>();
  #host = '127.0.0.1';
  #port = 0;
  readonly #log = new FakeCallLog();
  readonly #stored: FakeStoredCompletions;
  readonly #chat: FakeChatApi;
  readonly #responsesApi: FakeResponsesApi;
  readonly #taskApi: FakeTaskApi;

  constructor(options: StartFakeProviderOptions) {
    this.#apiKey = options.apiKey;
    this.#idPart = options.uniqueIds === true ? `${randomBytes(4).toString('hex')}_` : '';
    const context = this.#apiContext();
    this.#stored = new FakeStoredCompletions(context, options.ignoreLookupFilter === true);
    this.#chat = new FakeChatApi(context, this.#log, this.#stored);
    this.#responsesApi = new FakeResponsesApi(context);
    this.#taskApi = new FakeTaskApi(context, options.taskCallback);
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
    return this.#log.calls;
  }
  get storedCompletions(): readonly Record<string, unknown>[] {
    return this.#stored.all;
  }
  get tasks(): readonly FakeTask[] {
    return this.#taskApi.tasks;
  }
  get callbacks(): readonly { readonly taskId: string; readonly status: string; readonly answered: number | null }[] {
    return this.#taskApi.callbacks;
  }
  get responses(): readonly FakeResponse[] {
    return this.#responsesApi.responses;
  }
  get lookups(): number {
    return this.#lookups;
  }
  get submits(): ReadonlyMap<string, FakeSubmits> {
    return new Map([...this.#submits].map(([id, s]) => [id, { submits: s.submits, replies: [...s.replies] }]));
  }

  /** Counts a create of `headers`' attempt; `behaviour` is the one it chose, when it chose one. */
  #noteSubmit(headers: Readonly<Record<string, string>>, behaviour?: FakeBehaviour): void {
    const id = headers['onejob-attempt-id'];
    if (id === undefined) return;
    const s = this.#submits.get(id) ?? { submits: 0, replies: [] };
    this.#submits.set(id, s);
    if (behaviour === undefined) s.submits += 1;
    else s.replies.push(behaviour.reply ?? null);
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
    this.#log.reset();
    this.#stored.reset();
    this.#taskApi.reset();
    this.#responsesApi.reset();
    this.#lookups = 0;
    this.#submits.clear();
  }

  waitForCalls(count: number): Promise<readonly FakeCall[]> {
    return this.#log.waitForCalls(count);
  }

  waitForResult(seq: number): Promise<FakeCall> {
    return this.#log.waitForResult(seq);
  }

  close(): Promise<void> {
    // Work in progress stops (gates, delays, responses); the connections closed below end as `server-closed`.
    this.#closed.abort();
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
      checkAuth: (protocol, headers) => this.#checkAuth(protocol, headers),
      choose: (protocol, headers, body) => this.#choose(protocol, headers, body),
      waitGate: (gate, signal) => this.#waitGate(gate, signal),
      noteSubmit: (headers, behaviour) => this.#noteSubmit(headers, behaviour),
      countLookup: () => {
        this.#lookups += 1;
      },
      closing: this.#closed.signal,
      idPart: this.#idPart,
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

  /** Routes a request: the control plane, then each protocol's paths. */
  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const method = req.method ?? 'GET';

    // Control plane, for other processes.
    if (path === '/calls' && method === 'GET') return sendJson(res, 200, { data: this.calls });
    if (path === '/healthz' && method === 'GET') return sendJson(res, 200, { ok: true });
    if (path === '/submits' && method === 'GET') return sendJson(res, 200, { data: [...this.submits].map(([attemptId, s]) => ({ attempt_id: attemptId, ...s })) });
    if (path === '/v1/models' && method === 'GET') {
      return sendJson(res, 200, { object: 'list', data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'onejob' }] });
    }
    if ((path === '/script' || path === '/release' || path === '/reset') && method === 'POST') {
      return this.#control(path, req, res);
    }
    const chat = path === '/v1/chat/completions' || path === '/chat/completions';
    // Questions about earlier work (CONTRACT §11): stored completions, background responses, tasks.
    if (chat && method === 'GET') return this.#stored.list(req, res);
    const response = /^(?:\/v1)?\/responses(?:\/([^/]+)(\/cancel)?)?$/.exec(path);
    if (response !== null) return this.#responsesApi.handle(req, res, method, response[1] === undefined ? undefined : decodeURIComponent(response[1]), response[2] !== undefined);
    const task = /^(?:\/v1)?\/tasks(?:\/([^/]+)(\/cancel)?)?$/.exec(path);
    if (task !== null) return this.#taskApi.handle(req, res, method, task[1] === undefined ? undefined : decodeURIComponent(task[1]), task[2] !== undefined);
    if (chat) return this.#chat.handle(req, res, fakeChatCompletions, method, path);
    if (path === '/v1/messages' || path === '/messages') return this.#chat.handle(req, res, fakeAnthropicMessages, method, path);
    return sendJson(res, 404, { error: { message: `fake provider: no route ${method} ${path}`, type: 'invalid_request_error' } });
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

  #checkAuth(protocol: FakeProtocol, headers: Readonly<Record<string, string>>): { status: number; message: string } | null {
    if (this.#apiKey === undefined) return null;
    const given = protocol === 'openai' ? headers.authorization?.replace(/^Bearer\s+/i, '') : headers['x-api-key'];
    return given === this.#apiKey ? null : { status: 401, message: 'invalid API key' };
  }

  #choose(protocol: FakeProtocol, headers: Readonly<Record<string, string>>, body: unknown): { behaviour: FakeBehaviour; source: FakeCallSource } {
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
}

function matches(match: FakeMatch, protocol: FakeProtocol, headers: Readonly<Record<string, string>>, text: string, model: string | undefined): boolean {
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
