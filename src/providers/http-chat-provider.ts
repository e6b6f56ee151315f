/**
 * {@link HttpChatProvider}: the one HTTP adapter skeleton. A provider type is
 * a {@link WireProtocol} (its URL, auth header, request body, what it cannot
 * express, and how its answers read as {@link ChatDelta}s, whole or
 * streamed); sending, identity headers, dispatch tracking, SSE parsing,
 * accumulation and outcome classification live here once.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { createParser } from 'eventsource-parser';
import type { Dispatcher } from 'undici';
import { attemptHeaders, mergeHeaders, ONEJOB_USER_AGENT } from './attempt-headers.ts';
import { invalidChatRequestReason } from './chat-request.ts';
import { ambiguous, failure, outcomeFromExchange, type CompletionParser } from './classify-outcome.ts';
import { CompletionAccumulator } from './completion-accumulator.ts';
import { createProviderAgent, postJson, type HttpExchange } from './http-exchange.ts';
import { recordProviderWait } from '../core/provider-waits.ts';
import {
  DEFAULT_PROVIDER_IDLE_TIMEOUT_MS,
  DEFAULT_PROVIDER_TIMEOUT_MS,
  type ChatDelta,
  type ChatDeltaListener,
  type ChatRequest,
  type HttpProviderConfig,
  type NormalizedCompletion,
  type Provider,
  type ProviderErrorDetails,
  type ProviderOutcome,
  type ProviderRequest,
} from './provider.ts';

/** What one SSE event of a provider's stream means. */
export type StreamStep =
  /** Deltas (possibly none: a ping, a block stop, the terminator). */
  | { readonly deltas: readonly ChatDelta[] }
  /** The provider reported an error in the stream: a definite failure. */
  | { readonly error: { readonly type?: string; readonly message?: string } }
  /** The event cannot be read: ambiguous (the provider may have done the work). */
  | { readonly malformed: string };

/** Reads one provider stream, event by event (one instance per stream). */
export interface StreamDecoder {
  /** One SSE event: its `event:` name (undefined for none) and its `data:`. */
  decode(event: string | undefined, data: string): StreamStep;
  /** Whether the stream's terminator (`[DONE]`, `message_stop`) has been read: the answer is whole. */
  readonly done: boolean;
}

/** What makes one provider type's wire protocol. */
export interface WireProtocol {
  readonly type: 'openai' | 'anthropic';
  /** The endpoint for a configured `baseUrl`. */
  url(baseUrl: string): URL;
  /** Protocol headers sent with every request (versions…). */
  readonly headers: Readonly<Record<string, string>>;
  /** The header carrying the API key. */
  authHeaders(apiKey: string): Record<string, string>;
  /** Members of a (valid) input this protocol, as this provider is configured, cannot pass on as given. */
  unsupportedMembers(input: ChatRequest, config: HttpProviderConfig): string[];
  /** The wire body for a valid chat request, or why it cannot be sent. */
  body(input: ChatRequest, config: HttpProviderConfig, stream: boolean, attempt: { readonly attemptId: string }): { readonly body: object } | { readonly error: string };
  /** A whole 2xx body as the deltas it would have streamed, or why it is not an answer. */
  completionDeltas(body: unknown): readonly ChatDelta[] | { readonly malformed: string };
  /** A decoder for one SSE stream. */
  streamDecoder(): StreamDecoder;
}

/** Options of {@link HttpChatProvider}. */
export interface HttpChatProviderOptions {
  /** The undici dispatcher to use; default a private agent, closed by `close()`. */
  readonly dispatcher?: Dispatcher | undefined;
}

/** A provider reached over HTTP with one {@link WireProtocol}. No retries: one call is one attempt. */
export class HttpChatProvider implements Provider {
  readonly type: 'openai' | 'anthropic';
  readonly name: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxDurationMs: number | null;
  readonly contextWindow: number | null;
  readonly #protocol: WireProtocol;
  readonly #config: HttpProviderConfig;
  readonly #url: URL;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;

  constructor(name: string, config: HttpProviderConfig, protocol: WireProtocol, options: HttpChatProviderOptions = {}) {
    this.type = protocol.type;
    this.name = name;
    this.model = config.model;
    this.timeoutMs = config.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    this.idleTimeoutMs = config.idleTimeoutMs ?? DEFAULT_PROVIDER_IDLE_TIMEOUT_MS;
    this.maxDurationMs = config.maxDurationMs ?? null;
    this.contextWindow = config.contextWindow ?? null;
    this.#protocol = protocol;
    this.#config = config;
    this.#url = protocol.url(config.baseUrl);
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createProviderAgent();
  }

  unsupportedMembers(input: ChatRequest): string[] {
    if (invalidChatRequestReason(input) !== null) return [];
    return this.#protocol.unsupportedMembers(input, this.#config);
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const built = this.#build(request, false);
    if ('outcome' in built) return built.outcome;
    const startedMs = performance.now();
    const exchange = await postJson(this.#dispatcher, {
      url: this.#url,
      headers: this.#headers(request, 'application/json'),
      body: built.body,
      signal: request.signal,
      onDispatched: request.onDispatched,
    });
    recordProviderWait(request.jobId, startedMs, performance.now());
    return outcomeFromExchange(exchange, this.name, this.#parser());
  }

  async stream(request: ProviderRequest, onDelta: ChatDeltaListener): Promise<ProviderOutcome> {
    const built = this.#build(request, true);
    if ('outcome' in built) return built.outcome;
    const acc = new CompletionAccumulator();
    const emit = (delta: ChatDelta) => {
      acc.add(delta);
      try {
        onDelta(delta);
      } catch {
        // The listener's failure is the caller's business; the stream goes on.
      }
    };
    const decoder = this.#protocol.streamDecoder();
    const state: { streamed: boolean; stop: StreamStop | null } = { streamed: false, stop: null };

    const startedMs = performance.now();
    const exchange = await postJson(this.#dispatcher, {
      url: this.#url,
      headers: this.#headers(request, 'text/event-stream'),
      body: built.body,
      signal: request.signal,
      onDispatched: request.onDispatched,
      onBody: (_status, headers) => {
        // A stream may run long: its id is worth recording before the answer (CONTRACT §11).
        const requestId = firstHeader(headers, 'x-request-id') ?? firstHeader(headers, 'request-id');
        if (requestId !== undefined) {
          try {
            request.onProviderRequestId?.(requestId);
          } catch {
            // The listener's failure is the caller's business.
          }
        }
        if (!isEventStream(headers)) return null; // a server that ignored stream: true: read the whole answer
        state.streamed = true;
        const text = new TextDecoder('utf-8');
        const parser = createParser({
          onEvent: (event) => {
            if (state.stop !== null) return;
            try {
              request.onEvent?.();
            } catch {
              // The caller's failure is its own business; the stream goes on.
            }
            const step = decoder.decode(event.event, event.data);
            if ('deltas' in step) for (const d of step.deltas) emit(d);
            else if ('error' in step) state.stop = { kind: 'error', ...step.error };
            else state.stop = { kind: 'malformed', reason: step.malformed };
          },
        });
        return (chunk) => {
          parser.feed(text.decode(chunk, { stream: true }));
          return state.stop === null;
        };
      },
    });
    recordProviderWait(request.jobId, startedMs, performance.now());
    return this.#streamOutcome(exchange, state.streamed, decoder, acc, emit, state.stop);
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.destroy();
  }

  /** A GET with this provider's auth and configured headers (lookups): how far it got. */
  protected getExchange(url: URL, signal: AbortSignal): Promise<HttpExchange> {
    return postJson(this.#dispatcher, {
      url, method: 'GET', body: null, signal,
      headers: mergeHeaders(
        { accept: 'application/json', 'user-agent': ONEJOB_USER_AGENT, ...this.#protocol.headers },
        this.#config.apiKey ? this.#protocol.authHeaders(this.#config.apiKey) : undefined,
        this.#config.headers,
      ),
    });
  }

  /** A whole answer body of this protocol as a normalized completion, or why it is not one. */
  protected completionOf(body: unknown): NormalizedCompletion | { readonly malformed: string } {
    return this.#parser()(body);
  }

  #build(request: ProviderRequest, stream: boolean): { body: object } | { outcome: ProviderOutcome } {
    const input = request.input;
    const invalid = invalidChatRequestReason(input);
    const unsupported = invalid === null ? this.#protocol.unsupportedMembers(input, this.#config) : [];
    const built =
      invalid !== null
        ? { error: invalid }
        : unsupported.length > 0
          ? { error: `the ${this.type} protocol cannot express ${unsupported.map((m) => `"${m}"`).join(', ')} (skip this provider: unsupported:${unsupported[0]})` }
          : this.#protocol.body(input, this.#config, stream, request);
    if ('error' in built) {
      return { outcome: failure('invalid_input', `${this.name}: ${built.error}`, { provider: this.name, phase: 'before_send' }) };
    }
    return built;
  }

  #headers(request: ProviderRequest, accept: string): Record<string, string> {
    return mergeHeaders(
      { accept, 'user-agent': ONEJOB_USER_AGENT, ...this.#protocol.headers },
      this.#config.apiKey ? this.#protocol.authHeaders(this.#config.apiKey) : undefined,
      this.#config.headers,
      attemptHeaders(request),
    );
  }

  #parser(): CompletionParser {
    return (body) => {
      const deltas = this.#protocol.completionDeltas(body);
      if ('malformed' in deltas) return deltas;
      const acc = new CompletionAccumulator();
      for (const d of deltas) acc.add(d);
      return acc.result(this.name, this.model);
    };
  }

  #streamOutcome(
    exchange: HttpExchange,
    streamed: boolean,
    decoder: StreamDecoder,
    acc: CompletionAccumulator,
    emit: (d: ChatDelta) => void,
    failedStop: StreamStop | null,
  ): ProviderOutcome {
    const partial = (): NormalizedCompletion | undefined => (acc.hasOutput ? acc.result(this.name, this.model) : undefined);
    const withPartial = (outcome: ProviderOutcome): ProviderOutcome => {
      const p = partial();
      return outcome.kind === 'success' || p === undefined ? outcome : { ...outcome, partial: p };
    };
    if (!streamed) {
      // Nothing was streamed: an error status, a transport failure, or a whole JSON answer.
      const outcome = outcomeFromExchange(exchange, this.name, this.#parser());
      if (outcome.kind === 'success' && exchange.kind === 'response') {
        const deltas = this.#protocol.completionDeltas(JSON.parse(exchange.body));
        if (!('malformed' in deltas)) for (const d of deltas) emit(d);
      }
      return outcome;
    }
    const status = exchange.kind === 'not_sent' ? undefined : exchange.status;
    const headers = exchange.kind === 'response' ? exchange.headers : exchange.kind === 'lost' ? exchange.headers : undefined;
    const requestId = firstHeader(headers, 'x-request-id') ?? firstHeader(headers, 'request-id');
    const base: ProviderErrorDetails = {
      provider: this.name,
      phase: exchange.kind === 'response' ? 'after_body' : 'after_headers',
      ...(status === undefined ? {} : { status }),
      ...(requestId === undefined ? {} : { provider_request_id: requestId }),
    };
    if (failedStop !== null && failedStop.kind === 'error') {
      const type = failedStop.type === undefined ? '' : ` ${failedStop.type}`;
      const message = failedStop.message === undefined ? '' : `: ${failedStop.message}`;
      return withPartial(
        failure('provider_stream_error', `${this.name} reported an error in the stream${type}${message}`, {
          ...base,
          phase: 'after_headers',
          ...(failedStop.type === undefined ? {} : { provider_error_type: failedStop.type }),
          ...(failedStop.message === undefined ? {} : { provider_message: failedStop.message.slice(0, 1000) }),
        }),
      );
    }
    if (failedStop !== null && failedStop.kind === 'malformed') {
      return withPartial(ambiguous('malformed_response', `${this.name} sent a stream that cannot be read: ${failedStop.reason}`, { ...base, phase: 'after_headers' }));
    }
    if (exchange.kind !== 'response') return withPartial(outcomeFromExchange(exchange, this.name, this.#parser()));
    if (!decoder.done) {
      return withPartial(
        ambiguous('connection_lost', `${this.name}: the stream ended before its end event; the answer may be incomplete`, { ...base, phase: 'after_headers' }),
      );
    }
    return { kind: 'success', completion: acc.result(this.name, this.model), raw: null, ...(requestId === undefined ? {} : { providerRequestId: requestId }) };
  }
}

/** Why a stream was stopped before its end. */
type StreamStop = { readonly kind: 'error'; readonly type?: string; readonly message?: string } | { readonly kind: 'malformed'; readonly reason: string };

function isEventStream(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && type.toLowerCase().includes('text/event-stream');
}

function firstHeader(headers: IncomingHttpHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  return Array.isArray(v) ? v[0] : v;
}
