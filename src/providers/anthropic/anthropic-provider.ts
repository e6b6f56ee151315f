/**
 * The `anthropic` adapter: Anthropic's Messages API.
 *
 * POST `{baseUrl}/v1/messages` with `x-api-key` and
 * `anthropic-version: 2023-06-01`, non-streaming or `stream: true`. The
 * job's OpenAI-style input is translated (`anthropic-request.ts`: system
 * prompts, tools, tool calls and results, stop sequences, `response_format`)
 * and the answer read back (`anthropic-response.ts`). No retries.
 */
import { HttpChatProvider, type HttpChatProviderOptions, type WireProtocol } from '../http-chat-provider.ts';
import type { HttpProviderConfig } from '../provider.ts';
import { buildAnthropicRequestBody, unsupportedAnthropicMembers } from './anthropic-request.ts';
import { anthropicMessageDeltas, AnthropicStreamDecoder } from './anthropic-response.ts';

export { ANTHROPIC_DEFAULT_MAX_TOKENS, buildAnthropicRequestBody, unsupportedAnthropicMembers } from './anthropic-request.ts';
export { ANTHROPIC_FINISH_REASONS, AnthropicStreamDecoder, anthropicMessageDeltas, anthropicUsage, finishReasonOf } from './anthropic-response.ts';

/** The Messages API version onejob speaks. */
export const ANTHROPIC_VERSION = '2023-06-01';

/** Options of {@link AnthropicProvider}. */
export type AnthropicProviderOptions = HttpChatProviderOptions;

/** The Anthropic Messages wire protocol. */
export const ANTHROPIC_PROTOCOL: WireProtocol = {
  type: 'anthropic',
  url: (baseUrl) => anthropicMessagesUrl(baseUrl),
  headers: { 'anthropic-version': ANTHROPIC_VERSION },
  authHeaders: (apiKey) => ({ 'x-api-key': apiKey }),
  unsupportedMembers: (input) => unsupportedAnthropicMembers(input),
  body: (input, config, stream) => buildAnthropicRequestBody(input, config.model, config.maxOutputTokens, stream),
  completionDeltas: (body) => anthropicMessageDeltas(body),
  streamDecoder: () => new AnthropicStreamDecoder(),
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
