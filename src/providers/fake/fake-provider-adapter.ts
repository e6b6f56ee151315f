/**
 * The `fake` provider type: the real `openai` or `anthropic` adapter, pointed
 * at onejob's fake server. Embedded (no `baseUrl`): the server is started on
 * loopback at the first call, with the configured script, and scripted
 * further through {@link FakeProviderAdapter.server}, or over HTTP at its URL.
 */
import type { Dispatcher } from 'undici';
import type { FakeProvider } from './fake-provider-server.ts';
import { AnthropicProvider, unsupportedAnthropicMembers } from '../anthropic/anthropic-provider.ts';
import { failure } from '../classify-outcome.ts';
import { invalidChatRequestReason } from '../chat-request.ts';
import { OpenAIProvider, unsupportedOpenAIMembers } from '../openai/openai-provider.ts';
import {
  DEFAULT_PROVIDER_IDLE_TIMEOUT_MS,
  DEFAULT_PROVIDER_TIMEOUT_MS,
  type ChatDeltaListener,
  type ChatRequest,
  type HttpProviderConfig,
  type Provider,
  type ProviderOutcome,
  type ProviderRequest,
} from '../provider.ts';
import type { FakeProviderConfig } from './fake-provider-config.ts';

/** The model name of a `fake` provider that names none. */
export const FAKE_DEFAULT_MODEL = 'fake-model';

/** Options of {@link FakeProviderAdapter}. */
export interface FakeProviderAdapterOptions {
  readonly dispatcher?: Dispatcher | undefined;
}

/**
 * A `fake` provider.
 *
 * @example
 * const p = new FakeProviderAdapter('demo', { type: 'fake', script: [{ status: 503 }] });
 * (await p.server())?.setDefault({ reply: { summary: 'ok' } });
 */
export class FakeProviderAdapter implements Provider {
  readonly type = 'fake' as const;
  readonly name: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxDurationMs: number | null;
  readonly contextWindow: number | null;
  readonly #config: FakeProviderConfig;
  readonly #options: FakeProviderAdapterOptions;
  #server: Promise<FakeProvider> | null = null;
  #inner: Promise<Provider> | null = null;
  #closed = false;

  constructor(name: string, config: FakeProviderConfig, options: FakeProviderAdapterOptions = {}) {
    this.name = name;
    this.model = config.model ?? FAKE_DEFAULT_MODEL;
    this.timeoutMs = config.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    this.idleTimeoutMs = config.idleTimeoutMs ?? DEFAULT_PROVIDER_IDLE_TIMEOUT_MS;
    this.maxDurationMs = config.maxDurationMs ?? null;
    this.contextWindow = config.contextWindow ?? null;
    this.#config = config;
    this.#options = options;
  }

  /** The embedded fake server, started if need be; null when the config names an external `baseUrl`. */
  async server(): Promise<FakeProvider | null> {
    if (this.#config.baseUrl !== undefined) return null;
    if (this.#server === null) {
      const script = this.#config.script;
      this.#server = import('./fake-provider-server.ts').then(({ startFakeProvider }) =>
        startFakeProvider(script === undefined ? {} : { script }),
      );
    }
    return this.#server;
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const inner = await this.#innerOrFailure();
    return 'kind' in inner ? inner : inner.call(request);
  }

  async stream(request: ProviderRequest, onDelta: ChatDeltaListener): Promise<ProviderOutcome> {
    const inner = await this.#innerOrFailure();
    return 'kind' in inner ? inner : inner.stream(request, onDelta);
  }

  /** The members its protocol (`openai` or `anthropic`) cannot express. */
  unsupportedMembers(input: ChatRequest): string[] {
    if (invalidChatRequestReason(input) !== null) return [];
    return (this.#config.protocol ?? 'openai') === 'openai' ? unsupportedOpenAIMembers(input) : unsupportedAnthropicMembers(input);
  }

  async #innerOrFailure(): Promise<Provider | ProviderOutcome> {
    try {
      return await this.#innerProvider();
    } catch (err) {
      return failure('provider_unreachable', `${this.name}: the embedded fake server did not start (${String(err)})`, { provider: this.name, phase: 'before_send' }, err);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const inner = this.#inner;
    const server = this.#server;
    if (inner !== null) await (await inner.catch(() => null))?.close();
    if (server !== null) await (await server.catch(() => null))?.close();
  }

  #innerProvider(): Promise<Provider> {
    if (this.#closed) return Promise.reject(new Error('provider closed'));
    if (this.#inner === null) {
      this.#inner = (async () => {
        const protocol = this.#config.protocol ?? 'openai';
        let baseUrl = this.#config.baseUrl;
        if (baseUrl === undefined) {
          const server = (await this.server()) as FakeProvider;
          baseUrl = protocol === 'openai' ? `${server.url}/v1` : server.url;
        }
        const config: HttpProviderConfig = {
          type: protocol,
          baseUrl,
          model: this.model,
          apiKey: this.#config.apiKey ?? null,
          timeoutMs: this.timeoutMs,
          idleTimeoutMs: this.idleTimeoutMs,
          maxDurationMs: this.maxDurationMs,
          headers: this.#config.headers,
          contextWindow: this.#config.contextWindow,
          maxOutputTokens: this.#config.maxOutputTokens,
        };
        return protocol === 'openai'
          ? new OpenAIProvider(this.name, config, this.#options)
          : new AnthropicProvider(this.name, config, this.#options);
      })();
      // A server that failed to start is tried again at the next call.
      this.#inner.catch(() => {
        this.#inner = null;
        this.#server = null;
      });
    }
    return this.#inner;
  }
}
