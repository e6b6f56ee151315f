/**
 * The `openai` adapter: any OpenAI-compatible Chat Completions server
 * (OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, onejob's fake…).
 *
 * POST `{baseUrl}/chat/completions` with the job's input, the configured
 * `model` and `stream: false`; `Authorization: Bearer <apiKey>` when a key is
 * configured. No retries: one call is one attempt.
 */
import type { Dispatcher } from 'undici';
import { attemptHeaders, mergeHeaders, ONEJOB_USER_AGENT } from '../attempt-headers.ts';
import { failure, outcomeFromExchange, type CompletionParser } from '../classify-outcome.ts';
import { contentText, invalidChatRequestReason } from '../chat-request.ts';
import { createProviderAgent, postJson } from '../http-exchange.ts';
import {
  DEFAULT_PROVIDER_TIMEOUT_MS,
  type ChatContentPart,
  type ChatRequest,
  type HttpProviderConfig,
  type NormalizedCompletion,
  type Provider,
  type ProviderOutcome,
  type ProviderRequest,
} from '../provider.ts';

/** Options of {@link OpenAIProvider}. */
export interface OpenAIProviderOptions {
  /** The undici dispatcher to use; default a private agent, closed by {@link OpenAIProvider.close}. */
  readonly dispatcher?: Dispatcher | undefined;
}

/**
 * An OpenAI-compatible provider.
 *
 * @example new OpenAIProvider('primary', { type: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', model: 'llama3.2' })
 */
export class OpenAIProvider implements Provider {
  readonly type = 'openai' as const;
  readonly name: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly contextWindow: number | null;
  readonly #config: HttpProviderConfig;
  readonly #url: URL;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;

  constructor(name: string, config: HttpProviderConfig, options: OpenAIProviderOptions = {}) {
    this.name = name;
    this.model = config.model;
    this.timeoutMs = config.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    this.contextWindow = config.contextWindow ?? null;
    this.#config = config;
    this.#url = openAIChatCompletionsUrl(config.baseUrl);
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createProviderAgent();
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const invalid = invalidChatRequestReason(request.input);
    if (invalid !== null) {
      return failure('invalid_input', `${this.name}: ${invalid}`, { provider: this.name, phase: 'before_send' });
    }
    const headers = mergeHeaders(
      { accept: 'application/json', 'user-agent': ONEJOB_USER_AGENT },
      this.#config.apiKey ? { authorization: `Bearer ${this.#config.apiKey}` } : undefined,
      this.#config.headers,
      attemptHeaders(request),
    );
    const exchange = await postJson(this.#dispatcher, {
      url: this.#url,
      headers,
      body: buildOpenAIRequestBody(request.input, this.model),
      signal: request.signal,
      onDispatched: request.onDispatched,
    });
    return outcomeFromExchange(exchange, this.name, openAICompletionParser(this.name, this.model));
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.destroy();
  }
}

/**
 * `{baseUrl}/chat/completions`, with any trailing slash of `baseUrl` ignored.
 *
 * @example openAIChatCompletionsUrl('https://api.openai.com/v1/').href // 'https://api.openai.com/v1/chat/completions'
 */
export function openAIChatCompletionsUrl(baseUrl: string): URL {
  return new URL(`${baseUrl.replace(/\/+$/, '')}/chat/completions`);
}

/**
 * The wire body: the input as given, with the configured model and
 * `stream: false` (streaming is not supported; `stream_options` is dropped).
 */
export function buildOpenAIRequestBody(input: ChatRequest, model: string): Record<string, unknown> {
  const { stream_options: _ignored, ...rest } = input as Record<string, unknown>;
  return { ...rest, model, stream: false };
}

/**
 * Reads a Chat Completions response: the first choice's text, its
 * `finish_reason` (`stop` when the server sent none), the model and usage.
 */
export function openAICompletionParser(provider: string, configuredModel: string): CompletionParser {
  return (body) => {
    if (typeof body !== 'object' || body === null) return { malformed: 'not an object' };
    const b = body as { choices?: unknown; model?: unknown; usage?: unknown };
    if (!Array.isArray(b.choices) || b.choices.length === 0) return { malformed: 'no choices' };
    const choice = b.choices[0] as { message?: unknown; finish_reason?: unknown } | null;
    if (typeof choice !== 'object' || choice === null || typeof choice.message !== 'object' || choice.message === null) {
      return { malformed: 'choices[0].message missing' };
    }
    const content = (choice.message as { content?: unknown }).content;
    if (content !== null && content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
      return { malformed: 'choices[0].message.content is neither text nor parts' };
    }
    const completion: NormalizedCompletion = {
      content: contentText(content as string | readonly ChatContentPart[] | null | undefined),
      finish_reason: typeof choice.finish_reason === 'string' ? choice.finish_reason : 'stop',
      model: typeof b.model === 'string' && b.model !== '' ? b.model : configuredModel,
      provider,
      usage: openAIUsage(b.usage),
    };
    return completion;
  };
}

function openAIUsage(usage: unknown): NormalizedCompletion['usage'] {
  const u = (typeof usage === 'object' && usage !== null ? usage : {}) as Record<string, unknown>;
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  const prompt = count(u.prompt_tokens);
  const completion = count(u.completion_tokens);
  const total = typeof u.total_tokens === 'number' ? count(u.total_tokens) : prompt + completion;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total };
}
