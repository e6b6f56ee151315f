/**
 * The `openai` adapter: any OpenAI-compatible Chat Completions server
 * (OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, onejob's fake…).
 *
 * POST `{baseUrl}/chat/completions` with the job's input, the configured
 * `model` and `stream: false`; `Authorization: Bearer <apiKey>` when a key is
 * configured. No retries: one call is one attempt.
 */
import type { CompletionParser } from '../classify-outcome.ts';
import { contentText } from '../chat-request.ts';
import { HttpChatProvider, type HttpChatProviderOptions, type WireProtocol } from '../http-chat-provider.ts';
import {
  type ChatContentPart,
  type ChatRequest,
  type HttpProviderConfig,
  type NormalizedCompletion,
} from '../provider.ts';

/** Options of {@link OpenAIProvider}. */
export type OpenAIProviderOptions = HttpChatProviderOptions;

/** The OpenAI Chat Completions wire protocol. */
export const OPENAI_PROTOCOL: WireProtocol = {
  type: 'openai',
  url: (baseUrl) => openAIChatCompletionsUrl(baseUrl),
  headers: {},
  authHeaders: (apiKey) => ({ authorization: `Bearer ${apiKey}` }),
  body: (input, config) => ({ body: buildOpenAIRequestBody(input, config.model) }),
  parser: (provider, model) => openAICompletionParser(provider, model),
};

/**
 * An OpenAI-compatible provider.
 *
 * @example new OpenAIProvider('primary', { type: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', model: 'llama3.2' })
 */
export class OpenAIProvider extends HttpChatProvider {
  constructor(name: string, config: HttpProviderConfig, options: OpenAIProviderOptions = {}) {
    super(name, config, OPENAI_PROTOCOL, options);
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
