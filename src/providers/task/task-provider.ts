/**
 * The `task` adapter (CONTRACT §11): long-running work behind a
 * prediction-style API, as image and video services (and your own services)
 * expose it.
 *
 * - Create: `POST {baseUrl}` with `{"input": <the job's input>}` and
 *   `Idempotency-Key: <attempt id>`; the answer is a task
 *   `{"id", "status", "output"?, "error"?, "urls"?: {"get", "cancel"}}`.
 *   Its `id` is the attempt's `provider_request_id`, reported at once.
 * - Follow: `GET urls.get` (default `{baseUrl}/{id}`) every `pollIntervalMs`
 *   until the status is final; the same request is the lookup of an attempt
 *   in doubt.
 * - Stop: `POST urls.cancel` (default `{baseUrl}/{id}/cancel`).
 *
 * Status `starting`/`processing` → still running, `succeeded` → the output
 * (the job's `result.content` is the task's `output` as given),
 * `failed`/`canceled` → a definite failure (`provider_task_failed`).
 */
import type { Dispatcher } from 'undici';
import { attemptHeaders, jsonApiHeaders, mergeHeaders } from '../attempt-headers.ts';
import { outcomeFromExchange, failure } from '../classify-outcome.ts';
import { createProviderAgent, postJson, type HttpExchange } from '../http-exchange.ts';
import { DEFAULT_PROVIDER_TIMEOUT_MS, type TaskProviderConfig } from '../provider-config.ts';
import type {
  ChatRequest,
  LookupAnswer,
  LookupRequest,
  NormalizedCompletion,
  Provider,
  ProviderOutcome,
  ProviderRequest,
  StopRequest,
} from '../provider.ts';
import { abortableSleep } from '../abortable-sleep.ts';
import { answerAboutAnother } from '../lookup-identity.ts';

/** Default pause between two polls of a running task. */
export const DEFAULT_TASK_POLL_INTERVAL_MS = 1_000;

/** A task as the service answers it. */
export interface TaskBody {
  readonly id: string;
  readonly status: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled';
  readonly output?: unknown;
  readonly error?: unknown;
  readonly urls?: { readonly get?: string; readonly cancel?: string };
}

/** What a task's status means for its attempt. */
export type TaskReading =
  | { readonly kind: 'running'; readonly task: TaskBody }
  | { readonly kind: 'succeeded'; readonly task: TaskBody }
  | { readonly kind: 'failed'; readonly task: TaskBody }
  | { readonly kind: 'malformed'; readonly reason: string };

const RUNNING = new Set(['starting', 'processing']);
const FAILED = new Set(['failed', 'canceled', 'cancelled']);

/**
 * Reads a task body (the create answer, a poll, a callback's body).
 *
 * @example readTask({ id: 't1', status: 'succeeded', output: { url: 'https://…' } }) // { kind: 'succeeded', task }
 */
export function readTask(body: unknown): TaskReading {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { kind: 'malformed', reason: 'not an object' };
  const b = body as Record<string, unknown>;
  if (typeof b.id !== 'string' || b.id === '') return { kind: 'malformed', reason: 'no task id' };
  if (typeof b.status !== 'string') return { kind: 'malformed', reason: 'no status' };
  const task = b as unknown as TaskBody;
  if (RUNNING.has(b.status)) return { kind: 'running', task };
  if (b.status === 'succeeded') return { kind: 'succeeded', task };
  if (FAILED.has(b.status)) return { kind: 'failed', task };
  return { kind: 'malformed', reason: `unknown status ${JSON.stringify(b.status).slice(0, 40)}` };
}

/** The error recorded for a task that ended `failed` or `canceled`. */
export function taskFailure(provider: string, task: TaskBody): { code: 'provider_task_failed'; message: string; details: Record<string, unknown> } {
  return {
    code: 'provider_task_failed',
    message: `${provider}: task ${task.id} ended ${task.status}`,
    details: { provider, task_id: task.id, status: task.status, ...(task.error === undefined ? {} : { task_error: task.error }) },
  };
}

/**
 * The normalized completion of a succeeded task. `content` is the task's
 * `output` as given (any JSON, not only text: CONTRACT §11).
 */
export function taskCompletion(provider: string, model: string, task: TaskBody): NormalizedCompletion {
  return {
    // A task's output is any JSON value; the job's result.content is exactly it.
    content: (task.output ?? null) as string,
    finish_reason: 'stop',
    model,
    provider,
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    tool_calls: null,
  };
}

/**
 * A task service.
 *
 * @example new TaskProvider('render', { type: 'task', baseUrl: 'http://127.0.0.1:4100/tasks' })
 */
export class TaskProvider implements Provider {
  readonly type = 'task' as const;
  readonly name: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly contextWindow: number | null;
  readonly settleUnknownAfterMs: number | null;
  readonly #config: TaskProviderConfig;
  readonly #base: string;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #pollMs: number;
  /** The `urls.cancel` each task's create answered (CONTRACT §15), by task id. */
  readonly #cancelUrls = new BoundedUrls(10_000);

  constructor(name: string, config: TaskProviderConfig, options: { readonly dispatcher?: Dispatcher | undefined } = {}) {
    this.name = name;
    this.model = config.model ?? 'task';
    this.timeoutMs = config.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    this.contextWindow = null;
    this.settleUnknownAfterMs = config.settleUnknownAfterMs ?? null;
    this.#config = config;
    this.#base = config.baseUrl.replace(/\/+$/, '');
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createProviderAgent();
    this.#pollMs = config.pollIntervalMs ?? DEFAULT_TASK_POLL_INTERVAL_MS;
  }

  /** The provider's callback key, when configured (`POST /v1/attempts/{id}/callback`). */
  get callbackSecret(): string | null {
    return this.#config.callbackSecret ?? null;
  }

  unsupportedMembers(_input: ChatRequest): string[] {
    return [];
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const exchange = await postJson(this.#dispatcher, {
      url: new URL(this.#base),
      headers: mergeHeaders(this.#headers(), attemptHeaders(request), { 'idempotency-key': request.attemptId }),
      body: { input: request.input },
      signal: request.signal,
      onDispatched: request.onDispatched,
    });
    const created = this.#reading(exchange);
    if ('outcome' in created) return created.outcome;
    const reported = new Set<string>();
    const report = (id: string) => {
      if (reported.has(id)) return;
      reported.add(id);
      try {
        request.onProviderRequestId?.(id);
      } catch {
        // The listener's failure is the caller's business.
      }
    };
    let reading = created.reading;
    report(reading.task.id);
    this.#cancelUrls.remember(reading.task.id, this.#ownUrl(reading.task.urls?.cancel));
    const getUrl = this.#getUrl(reading.task);
    // Follow the task until it ends, or until the caller's signal stops listening (then: in doubt).
    while (reading.kind === 'running') {
      const waited = await abortableSleep(this.#pollMs, request.signal);
      if (!waited) return this.#abandoned(reading.task);
      const polled = await this.#get(getUrl, request.signal);
      if (polled.kind === 'not_sent' && polled.aborted) return this.#abandoned(reading.task);
      const next = this.#reading(polled);
      // A poll that fails says nothing new about the task: ask again at the next interval.
      if ('outcome' in next) {
        if (request.signal.aborted) return this.#abandoned(reading.task);
        continue;
      }
      reading = next.reading;
    }
    this.#cancelUrls.take(reading.task.id); // ended: nothing to stop
    return this.#final(reading);
  }

  stream(request: ProviderRequest): Promise<ProviderOutcome> {
    // A task has no token stream: the whole output arrives at once.
    return this.call(request);
  }

  async lookup(request: LookupRequest): Promise<LookupAnswer> {
    if (request.providerRequestId === null) return { kind: 'error', message: `${this.name}: no task id was recorded for attempt ${request.attemptId}; the task cannot be asked about` };
    const exchange = await this.#get(this.#getUrl({ id: request.providerRequestId }), request.signal);
    if (exchange.kind === 'response' && exchange.status === 404) {
      const max = this.#config.maxDurationMs ?? null;
      if (max !== null && request.now.getTime() - request.startedAt.getTime() >= max) {
        return { kind: 'failed', error: { code: 'not_found_at_provider', message: `${this.name} has no task ${request.providerRequestId}, and its maxDurationMs (${max}) has passed`, details: { provider: this.name, task_id: request.providerRequestId } } };
      }
      return { kind: 'not_found' };
    }
    const read = this.#reading(exchange);
    if ('outcome' in read) return { kind: 'error', message: read.outcome.kind === 'success' ? 'unexpected' : read.outcome.error.message };
    return answerAboutAnother(this.name, 'task', request.providerRequestId, read.reading.task.id) ?? taskLookupAnswer(this.name, this.model, read.reading);
  }

  /**
   * Stops the task at the `urls.cancel` its create answered, when it
   * answered one (CONTRACT §15; on the service's own origin), else at
   * `{baseUrl}/{id}/cancel`. The given URL is remembered by this provider
   * object (bounded), not stored: another process, or this one after a
   * restart, uses the default.
   */
  async stopUpstream(request: StopRequest): Promise<void> {
    if (request.providerRequestId === null) return;
    const url = this.#cancelUrls.take(request.providerRequestId) ?? new URL(`${this.#base}/${encodeURIComponent(request.providerRequestId)}/cancel`);
    await postJson(this.#dispatcher, { url, headers: this.#headers(), body: {}, signal: request.signal });
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.destroy();
  }

  #headers(): Record<string, string> {
    return jsonApiHeaders(this.#config.apiKey, this.#config.headers);
  }

  #getUrl(task: Pick<TaskBody, 'id' | 'urls'>): URL {
    return this.#ownUrl(task.urls?.get) ?? new URL(`${this.#base}/${encodeURIComponent(task.id)}`);
  }

  /** A URL a task body gave, when it is on the service's own origin (a task body cannot send our key elsewhere); else null. */
  #ownUrl(given: unknown): URL | null {
    if (typeof given !== 'string') return null;
    try {
      const url = new URL(given, `${this.#base}/`);
      return url.origin === new URL(this.#base).origin ? url : null;
    } catch {
      return null;
    }
  }

  #get(url: URL, signal: AbortSignal): Promise<HttpExchange> {
    return postJson(this.#dispatcher, { url, method: 'GET', headers: this.#headers(), body: null, signal });
  }

  /** A task read from an exchange, or the outcome the exchange is instead (status, transport, not JSON). */
  #reading(exchange: HttpExchange): { reading: Exclude<TaskReading, { kind: 'malformed' }> } | { outcome: ProviderOutcome } {
    let reading: TaskReading | undefined;
    const outcome = outcomeFromExchange(exchange, this.name, (body) => {
      reading = readTask(body);
      if (reading.kind === 'malformed') return { malformed: reading.reason };
      return taskCompletion(this.name, this.model, reading.task);
    });
    if (outcome.kind !== 'success' || reading === undefined || reading.kind === 'malformed') return { outcome };
    return { reading };
  }

  #final(reading: Exclude<TaskReading, { kind: 'malformed' | 'running' }>): ProviderOutcome {
    if (reading.kind === 'succeeded') {
      return { kind: 'success', completion: taskCompletion(this.name, this.model, reading.task), raw: reading.task, providerRequestId: reading.task.id };
    }
    const e = taskFailure(this.name, reading.task);
    const outcome = failure(e.code, e.message, { provider: this.name, phase: 'after_body', provider_request_id: reading.task.id });
    return outcome.kind === 'failure' ? { ...outcome, error: { ...outcome.error, details: { ...outcome.error.details, ...e.details } } } : outcome;
  }

  #abandoned(task: TaskBody): ProviderOutcome {
    return {
      kind: 'ambiguous',
      error: {
        code: 'aborted_after_send',
        message: `${this.name}: stopped following task ${task.id} while it was ${task.status}; it may still finish (the lookup asks again)`,
        details: { provider: this.name, phase: 'after_body', provider_request_id: task.id },
      },
    };
  }
}

/**
 * URLs by task id, at most `limit` (the oldest forgotten first): what a
 * provider object remembers of the `urls.cancel` its tasks answered.
 */
class BoundedUrls {
  readonly #urls = new Map<string, URL>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  remember(id: string, url: URL | null): void {
    if (url === null) return;
    this.#urls.delete(id);
    this.#urls.set(id, url);
    if (this.#urls.size > this.#limit) this.#urls.delete(this.#urls.keys().next().value!);
  }

  /** The URL of `id`, forgotten once taken (a task is stopped once). */
  take(id: string): URL | undefined {
    const url = this.#urls.get(id);
    this.#urls.delete(id);
    return url;
  }
}

/** A task's reading as a lookup answer. */
export function taskLookupAnswer(provider: string, model: string, reading: TaskReading): LookupAnswer {
  switch (reading.kind) {
    case 'running':
      return { kind: 'running' };
    case 'succeeded':
      return { kind: 'succeeded', completion: taskCompletion(provider, model, reading.task), raw: reading.task, providerRequestId: reading.task.id };
    case 'failed':
      return { kind: 'failed', error: taskFailure(provider, reading.task) };
    case 'malformed':
      return { kind: 'error', message: `${provider}: the task cannot be read (${reading.reason})` };
  }
}

