/**
 * {@link HttpChatProvider}: the one HTTP adapter skeleton. A provider type is
 * a {@link WireProtocol} (its URL, auth header, request body and response
 * parser); sending, identity headers, dispatch tracking and outcome
 * classification live here once.
 */
import type { Dispatcher } from 'undici';
import { attemptHeaders, mergeHeaders, ONEJOB_USER_AGENT } from './attempt-headers.ts';
import { invalidChatRequestReason } from './chat-request.ts';
import { failure, outcomeFromExchange, type CompletionParser } from './classify-outcome.ts';
import { createProviderAgent, postJson } from './http-exchange.ts';
import { DEFAULT_PROVIDER_TIMEOUT_MS, type ChatRequest, type HttpProviderConfig, type Provider, type ProviderOutcome, type ProviderRequest } from './provider.ts';

/** What makes one provider type's wire protocol. */
export interface WireProtocol {
  readonly type: 'openai' | 'anthropic';
  /** The endpoint for a configured `baseUrl`. */
  url(baseUrl: string): URL;
  /** Protocol headers sent with every request (versions…). */
  readonly headers: Readonly<Record<string, string>>;
  /** The header carrying the API key. */
  authHeaders(apiKey: string): Record<string, string>;
  /** The wire body for a valid chat request, or why it cannot be sent. */
  body(input: ChatRequest, config: HttpProviderConfig): { readonly body: Record<string, unknown> } | { readonly error: string };
  /** Reads a 2xx body into a normalized completion. */
  parser(provider: string, configuredModel: string): CompletionParser;
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
    this.contextWindow = config.contextWindow ?? null;
    this.#protocol = protocol;
    this.#config = config;
    this.#url = protocol.url(config.baseUrl);
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createProviderAgent();
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const invalid = invalidChatRequestReason(request.input);
    const built = invalid === null ? this.#protocol.body(request.input, this.#config) : { error: invalid };
    if ('error' in built) {
      return failure('invalid_input', `${this.name}: ${built.error}`, { provider: this.name, phase: 'before_send' });
    }
    const headers = mergeHeaders(
      { accept: 'application/json', 'user-agent': ONEJOB_USER_AGENT, ...this.#protocol.headers },
      this.#config.apiKey ? this.#protocol.authHeaders(this.#config.apiKey) : undefined,
      this.#config.headers,
      attemptHeaders(request),
    );
    const exchange = await postJson(this.#dispatcher, {
      url: this.#url,
      headers,
      body: built.body,
      signal: request.signal,
      onDispatched: request.onDispatched,
    });
    return outcomeFromExchange(exchange, this.name, this.#protocol.parser(this.name, this.model));
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.destroy();
  }
}
