/**
 * The `anthropic` adapter: Anthropic's Messages API.
 *
 * POST `{baseUrl}/v1/messages` with `x-api-key` and
 * `anthropic-version: 2023-06-01`. The job's OpenAI-style input is
 * translated: `system` (and `developer`) messages become the top-level
 * `system`, `max_tokens` is required (input, else `maxOutputTokens`, else
 * 4096), `stop` becomes `stop_sequences`; `stop_reason` is mapped back to an
 * OpenAI `finish_reason`. Text content only. No retries.
 */
import { contentText } from '../chat-request.ts';
import type { CompletionParser } from '../classify-outcome.ts';
import { HttpChatProvider, type HttpChatProviderOptions, type WireProtocol } from '../http-chat-provider.ts';
import {
  type ChatRequest,
  type HttpProviderConfig,
  type NormalizedCompletion,
} from '../provider.ts';

/** The Messages API version onejob speaks. */
export const ANTHROPIC_VERSION = '2023-06-01';

/** `max_tokens` when neither the input nor `maxOutputTokens` gives one. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

/** Anthropic `stop_reason` → OpenAI `finish_reason`; unmapped values pass through. */
export const ANTHROPIC_FINISH_REASONS: Readonly<Record<string, string>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

/** Options of {@link AnthropicProvider}. */
export type AnthropicProviderOptions = HttpChatProviderOptions;

/** The Anthropic Messages wire protocol. */
export const ANTHROPIC_PROTOCOL: WireProtocol = {
  type: 'anthropic',
  url: (baseUrl) => anthropicMessagesUrl(baseUrl),
  headers: { 'anthropic-version': ANTHROPIC_VERSION },
  authHeaders: (apiKey) => ({ 'x-api-key': apiKey }),
  body: (input, config) => buildAnthropicRequestBody(input, config.model, config.maxOutputTokens),
  parser: (provider, model) => anthropicCompletionParser(provider, model),
};

/**
 * An Anthropic Messages API provider.
 *
 * @example new AnthropicProvider('fallback', { type: 'anthropic', baseUrl: 'https://api.anthropic.com', apiKey, model: 'claude-sonnet-4-5' })
 */
export class AnthropicProvider extends HttpChatProvider {
  constructor(name: string, config: HttpProviderConfig, options: AnthropicProviderOptions = {}) {
    super(name, config, ANTHROPIC_PROTOCOL, options);
  }
}

/**
 * `{baseUrl}/v1/messages`; a `baseUrl` that already ends in `/v1` gets `/messages`.
 *
 * @example anthropicMessagesUrl('https://api.anthropic.com').href // 'https://api.anthropic.com/v1/messages'
 */
export function anthropicMessagesUrl(baseUrl: string): URL {
  const base = baseUrl.replace(/\/+$/, '');
  return new URL(base.endsWith('/v1') ? `${base}/messages` : `${base}/v1/messages`);
}

type AnthropicBlock = { type: 'text'; text: string };
type AnthropicMessage = { role: 'user' | 'assistant'; content: string | AnthropicBlock[] };

/**
 * Translates an OpenAI-style chat request into a Messages API body, or says why it cannot.
 *
 * @example buildAnthropicRequestBody({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }, 'claude-x')
 * // { body: { model: 'claude-x', max_tokens: 4096, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] } }
 */
export function buildAnthropicRequestBody(
  input: ChatRequest,
  model: string,
  maxOutputTokens?: number,
): { readonly body: Record<string, unknown> } | { readonly error: string } {
  const system: string[] = [];
  const messages: AnthropicMessage[] = [];
  for (const [i, m] of input.messages.entries()) {
    if (m.role === 'system' || m.role === 'developer') {
      system.push(contentText(m.content));
      continue;
    }
    if (m.role !== 'user' && m.role !== 'assistant') return { error: `messages[${i}]: role ${JSON.stringify(m.role)} is not supported by the anthropic adapter` };
    const role: 'user' | 'assistant' = m.role === 'user' ? 'user' : 'assistant';
    if (Array.isArray(m.content)) {
      const blocks: AnthropicBlock[] = [];
      for (const [j, part] of m.content.entries()) {
        if (part.type !== 'text' || typeof part.text !== 'string') {
          return { error: `messages[${i}].content[${j}]: only text parts are supported by the anthropic adapter` };
        }
        blocks.push({ type: 'text', text: part.text });
      }
      messages.push({ role, content: blocks });
    } else {
      messages.push({ role, content: typeof m.content === 'string' ? m.content : '' });
    }
  }
  if (messages.length === 0) return { error: 'messages must include at least one user or assistant message' };

  const body: Record<string, unknown> = {
    model,
    max_tokens: input.max_tokens ?? input.max_completion_tokens ?? maxOutputTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages,
  };
  if (system.length > 0) body.system = system.join('\n\n');
  if (input.temperature !== undefined) body.temperature = input.temperature;
  if (input.top_p !== undefined) body.top_p = input.top_p;
  if (typeof input.top_k === 'number') body.top_k = input.top_k;
  if (input.stop !== undefined) body.stop_sequences = typeof input.stop === 'string' ? [input.stop] : [...input.stop];
  if (typeof input.user === 'string') body.metadata = { user_id: input.user };
  return { body };
}

/** Reads a Messages API response: text blocks joined, `stop_reason` mapped, usage summed OpenAI-style. */
export function anthropicCompletionParser(provider: string, configuredModel: string): CompletionParser {
  return (body) => {
    if (typeof body !== 'object' || body === null) return { malformed: 'not an object' };
    const b = body as { type?: unknown; content?: unknown; model?: unknown; stop_reason?: unknown; usage?: unknown };
    if (b.type !== 'message') return { malformed: `type is ${JSON.stringify(b.type)}, not "message"` };
    if (!Array.isArray(b.content)) return { malformed: 'content is not an array' };
    const text = b.content
      .map((block) => (typeof block === 'object' && block !== null && (block as { type?: unknown }).type === 'text' ? String((block as { text?: unknown }).text ?? '') : ''))
      .join('');
    const stop = typeof b.stop_reason === 'string' ? b.stop_reason : 'end_turn';
    const u = (typeof b.usage === 'object' && b.usage !== null ? b.usage : {}) as Record<string, unknown>;
    const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
    // Anthropic's input_tokens excludes cached tokens; OpenAI's prompt_tokens includes them.
    const prompt = count(u.input_tokens) + count(u.cache_creation_input_tokens) + count(u.cache_read_input_tokens);
    const completionTokens = count(u.output_tokens);
    const completion: NormalizedCompletion = {
      content: text,
      finish_reason: ANTHROPIC_FINISH_REASONS[stop] ?? stop,
      model: typeof b.model === 'string' && b.model !== '' ? b.model : configuredModel,
      provider,
      usage: { prompt_tokens: prompt, completion_tokens: completionTokens, total_tokens: prompt + completionTokens },
    };
    return completion;
  };
}
