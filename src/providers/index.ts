/**
 * The providers layer's public surface: the interface, the factory, the
 * classification, the adapters (whole and streamed answers), the accumulator
 * and the wire types. The endpoints' translators are `src/protocols/`.
 */
export * from './provider.ts';
export type * from './wire-types.ts';
export { createProvider, providerConfigProblems } from './create-provider.ts';
export type { CreateProviderOptions } from './create-provider.ts';
export { classifyStatus, STATUS_TABLE } from './classify-outcome.ts';
export type { StatusClassification } from './classify-outcome.ts';
export { attemptHeaders } from './attempt-headers.ts';
export { CompletionAccumulator, accumulateDeltas, completionDeltas } from './completion-accumulator.ts';
export type { StreamDecoder, StreamStep, WireProtocol } from './http-chat-provider.ts';
export {
  OpenAIProvider,
  OpenAIStreamDecoder,
  ANTHROPIC_ONLY_MEMBERS,
  buildOpenAIRequestBody,
  openAIChatCompletionsUrl,
  openAICompletionDeltas,
  unsupportedOpenAIMembers,
} from './openai/openai-provider.ts';
export {
  AnthropicProvider,
  AnthropicStreamDecoder,
  ANTHROPIC_VERSION,
  ANTHROPIC_FINISH_REASONS,
  anthropicMessageDeltas,
  anthropicMessagesUrl,
  buildAnthropicRequestBody,
  unsupportedAnthropicMembers,
} from './anthropic/anthropic-provider.ts';
export { FakeProviderAdapter, FAKE_DEFAULT_MODEL } from './fake/fake-provider-adapter.ts';
export type { FakeProviderConfig } from './fake/fake-provider-config.ts';
