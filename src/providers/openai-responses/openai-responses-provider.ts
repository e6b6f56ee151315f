/**
 * The `openai-responses` adapter (CONTRACT §11): the OpenAI Responses API
 * upstream, in background mode, so that every attempt can be asked about.
 *
 * - Create: `POST {baseUrl}/responses` with the chat job translated
 *   (`./responses-upstream.ts`, an allow-list: a member it cannot send as
 *   given skips the provider), `background: true`, `store: true` (a
 *   caller's `store: false` skips it) and `metadata.onejob_attempt_id`
 *   beside the caller's metadata. The `resp_…` id is the attempt's
 *   `provider_request_id`, recorded the moment it arrives, before the wait.
 * - Follow, by the provider's `follow` setting:
 *   - `"stream"` (the default): the create also says `stream: true`; the id
 *     arrives in the first event (`response.created`), the text and tool
 *     calls as they are made (relayed as the job's stream). A cut connection
 *     is resumed with `GET {baseUrl}/responses/{id}?stream=true&starting_after=<the
 *     last sequence_number>`; the work is never submitted again.
 *   - `"poll"`: `GET {baseUrl}/responses/{id}` every `pollIntervalMs` until
 *     the status is final; a streamed job's answer arrives whole.
 *   The plain GET is also the lookup (`completed` → output; `failed`,
 *   `cancelled`, `incomplete` → failed; `queued`, `in_progress` → still running).
 * - Stop: `POST {baseUrl}/responses/{id}/cancel` (losers, cancelled jobs).
 */
import type { Dispatcher } from 'undici';
import { attemptHeaders, jsonApiHeaders, mergeHeaders } from '../attempt-headers.ts';
import { invalidChatRequestReason } from '../chat-request.ts';
import { failure, outcomeFromExchange } from '../classify-outcome.ts';
import { CompletionAccumulator } from '../completion-accumulator.ts';
import { createProviderAgent, postJson, type HttpExchange } from '../http-exchange.ts';
import { DEFAULT_PROVIDER_IDLE_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUT_MS, type OpenAIResponsesProviderConfig, type ResponsesFollow } from '../provider-config.ts';
import type { ChatDeltaListener, ChatRequest, LookupAnswer, LookupRequest, NormalizedCompletion, Provider, ProviderOutcome, ProviderRequest, StopRequest } from '../provider.ts';
import { chatToResponsesRequest, responseDeltas, responsesUnsupportedMembers, RESPONSES_ATTEMPT_METADATA_KEY } from './responses-upstream.ts';
import { DEFAULT_TASK_POLL_INTERVAL_MS } from '../task/task-provider.ts';
import { abortableSleep } from '../abortable-sleep.ts';
import { answerAboutAnother } from '../lookup-identity.ts';
import { followResponseStream } from './response-stream-follower.ts';

const RUNNING = new Set(['queued', 'in_progress']);
const FAILED = new Set(['failed', 'cancelled', 'incomplete']);

/** A background response as read: still running, completed (with its completion), failed, or not a response. */
type Reading =
  | { readonly kind: 'running'; readonly id: string; readonly status: string }
  | { readonly kind: 'succeeded'; readonly id: string; readonly completion: NormalizedCompletion; readonly raw: unknown }
  | { readonly kind: 'failed'; readonly id: string; readonly status: string; readonly details: unknown }
  | { readonly kind: 'malformed'; readonly reason: string };

/**
 * An OpenAI Responses API provider.
 *
 * @example new OpenAIResponsesProvider('gpt', { type: 'openai-responses', baseUrl: 'https://api.openai.com/v1', apiKey, model: 'gpt-4.1-mini' })
 */
export class OpenAIResponsesProvider implements Provider {
  readonly type = 'openai-responses' as const;
  readonly name: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxDurationMs: number | null;
  readonly contextWindow: number | null;
  readonly settleUnknownAfterMs: number | null = null;
  /** How an attempt's output is followed: `stream` (the default) or `poll`. */
  readonly follow: ResponsesFollow;
  readonly #config: OpenAIResponsesProviderConfig;
  readonly #base: string;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #pollMs: number;

  constructor(name: string, config: OpenAIResponsesProviderConfig, options: { readonly dispatcher?: Dispatcher | undefined } = {}) {
    this.name = name;
    this.model = config.model;
    this.timeoutMs = config.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    this.idleTimeoutMs = config.idleTimeoutMs ?? DEFAULT_PROVIDER_IDLE_TIMEOUT_MS;
    this.maxDurationMs = config.maxDurationMs ?? null;
    this.contextWindow = config.contextWindow ?? null;
    this.follow = config.follow ?? 'stream';
    this.#config = config;
    this.#base = config.baseUrl.replace(/\/+$/, '');
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createProviderAgent();
    this.#pollMs = config.pollIntervalMs ?? DEFAULT_TASK_POLL_INTERVAL_MS;
  }

  unsupportedMembers(input: ChatRequest): string[] {
    if (invalidChatRequestReason(input) !== null) return [];
    return responsesUnsupportedMembers(input);
  }

  call(request: ProviderRequest): Promise<ProviderOutcome> {
    return this.#attempt(request, null);
  }

  stream(request: ProviderRequest, onDelta: ChatDeltaListener): Promise<ProviderOutcome> {
    return this.#attempt(request, onDelta);
  }

  async lookup(request: LookupRequest): Promise<LookupAnswer> {
    if (request.providerRequestId === null) return { kind: 'error', message: `${this.name}: no response id was recorded for attempt ${request.attemptId}; it cannot be asked about` };
    const exchange = await this.#get(request.providerRequestId, request.signal);
    if (exchange.kind === 'response' && exchange.status === 404) {
      const max = this.#config.maxDurationMs ?? null;
      if (max !== null && request.now.getTime() - request.startedAt.getTime() >= max) {
        return { kind: 'failed', error: { code: 'not_found_at_provider', message: `${this.name} has no response ${request.providerRequestId}, and its maxDurationMs (${max}) has passed`, details: { provider: this.name } } };
      }
      return { kind: 'not_found' };
    }
    const read = this.#reading(exchange);
    if ('outcome' in read) return { kind: 'error', message: read.outcome.kind === 'success' ? 'unexpected' : read.outcome.error.message };
    const r = read.reading;
    const other = answerAboutAnother(this.name, 'response', request.providerRequestId, r.id);
    if (other) return other;
    if (r.kind === 'running') return { kind: 'running' };
    if (r.kind === 'succeeded') return { kind: 'succeeded', completion: r.completion, raw: r.raw, providerRequestId: r.id };
    return { kind: 'failed', error: { code: 'provider_task_failed', message: `${this.name}: response ${r.id} ended ${r.status}`, details: { provider: this.name, status: r.status, response_error: r.details } } };
  }

  async stopUpstream(request: StopRequest): Promise<void> {
    if (request.providerRequestId === null) return;
    await postJson(this.#dispatcher, { url: new URL(`${this.#base}/responses/${encodeURIComponent(request.providerRequestId)}/cancel`), headers: this.#headers(), body: {}, signal: request.signal });
  }

  /** One attempt: the create, then the output followed by streaming or by polling (the `follow` setting). */
  async #attempt(request: ProviderRequest, onDelta: ChatDeltaListener | null): Promise<ProviderOutcome> {
    const unsupported = this.unsupportedMembers(request.input);
    const invalid = invalidChatRequestReason(request.input) ?? (unsupported.length > 0 ? `the Responses API cannot express ${unsupported.map((m) => `"${m}"`).join(', ')}` : null);
    if (invalid !== null) return failure('invalid_input', `${this.name}: ${invalid}`, { provider: this.name, phase: 'before_send' });
    const translated = chatToResponsesRequest(request.input);
    const body = {
      ...translated,
      model: this.model,
      background: true,
      store: true,
      metadata: { ...(translated.metadata ?? {}), [RESPONSES_ATTEMPT_METADATA_KEY]: request.attemptId },
    };
    const createHeaders = mergeHeaders(this.#headers(), attemptHeaders(request));
    if (this.follow === 'stream') {
      return followResponseStream({
        name: this.name, model: this.model, base: this.#base, dispatcher: this.#dispatcher,
        body: { ...body, stream: true }, createHeaders, resumeHeaders: this.#headers(),
        request, onDelta, resumeWaitMs: this.#pollMs,
        whole: (exchange) => this.#poll(exchange, request),
      });
    }
    const exchange = await postJson(this.#dispatcher, { url: new URL(`${this.#base}/responses`), headers: createHeaders, body, signal: request.signal, onDispatched: request.onDispatched });
    return this.#poll(exchange, request);
  }

  /** Follows a response by polling from its create's answer (`follow: "poll"`, or a server that answered a streamed create as JSON). */
  async #poll(exchange: HttpExchange, request: ProviderRequest): Promise<ProviderOutcome> {
    const created = this.#reading(exchange);
    if ('outcome' in created) return created.outcome;
    let reading = created.reading;
    try {
      request.onProviderRequestId?.(reading.id);
    } catch {
      // The listener's failure is the caller's business.
    }
    while (reading.kind === 'running') {
      if (!(await abortableSleep(this.#pollMs, request.signal))) return this.#abandoned(reading.id, reading.status);
      const polled = this.#reading(await this.#get(reading.id, request.signal));
      if ('outcome' in polled) {
        if (request.signal.aborted) return this.#abandoned(reading.id, reading.status);
        continue; // a failed poll says nothing new about the response
      }
      reading = polled.reading;
    }
    if (reading.kind === 'succeeded') return { kind: 'success', completion: reading.completion, raw: reading.raw, providerRequestId: reading.id };
    const outcome = failure('provider_task_failed', `${this.name}: response ${reading.id} ended ${reading.status}`, { provider: this.name, phase: 'after_body', provider_request_id: reading.id });
    return outcome.kind === 'failure' ? { ...outcome, error: { ...outcome.error, details: { ...outcome.error.details, status: reading.status, response_error: reading.details } as never } } : outcome;
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.destroy();
  }

  #headers(): Record<string, string> {
    return jsonApiHeaders(this.#config.apiKey, this.#config.headers);
  }

  #get(id: string, signal: AbortSignal): Promise<HttpExchange> {
    return postJson(this.#dispatcher, { url: new URL(`${this.#base}/responses/${encodeURIComponent(id)}`), method: 'GET', headers: this.#headers(), body: null, signal });
  }

  #reading(exchange: HttpExchange): { reading: Exclude<Reading, { kind: 'malformed' }> } | { outcome: ProviderOutcome } {
    let reading: Reading | undefined;
    const outcome = outcomeFromExchange(exchange, this.name, (body) => {
      reading = this.#read(body);
      if (reading.kind === 'malformed') return { malformed: reading.reason };
      return reading.kind === 'succeeded' ? reading.completion : placeholder(this.name, this.model);
    });
    if (outcome.kind !== 'success' || reading === undefined || reading.kind === 'malformed') return { outcome };
    return { reading };
  }

  #read(body: unknown): Reading {
    if (typeof body !== 'object' || body === null) return { kind: 'malformed', reason: 'not an object' };
    const b = body as { id?: unknown; status?: unknown; error?: unknown; incomplete_details?: unknown };
    if (typeof b.id !== 'string' || typeof b.status !== 'string') return { kind: 'malformed', reason: 'no id or status' };
    if (RUNNING.has(b.status)) return { kind: 'running', id: b.id, status: b.status };
    if (FAILED.has(b.status)) return { kind: 'failed', id: b.id, status: b.status, details: b.error ?? b.incomplete_details ?? null };
    if (b.status !== 'completed') return { kind: 'malformed', reason: `unknown status ${b.status}` };
    const deltas = responseDeltas(body);
    if ('malformed' in deltas) return { kind: 'malformed', reason: deltas.malformed };
    const acc = new CompletionAccumulator();
    for (const d of deltas) acc.add(d);
    return { kind: 'succeeded', id: b.id, completion: acc.result(this.name, this.model), raw: body };
  }

  #abandoned(id: string, status: string): ProviderOutcome {
    return {
      kind: 'ambiguous',
      error: { code: 'aborted_after_send', message: `${this.name}: stopped following response ${id} while it was ${status}; it may still complete (the lookup asks again)`, details: { provider: this.name, phase: 'after_body', provider_request_id: id } },
    };
  }
}

function placeholder(provider: string, model: string): NormalizedCompletion {
  return { content: '', finish_reason: 'stop', model, provider, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, tool_calls: null };
}

