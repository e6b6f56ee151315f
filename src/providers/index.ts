/**
 * The providers layer's public surface: the interface, the factory, the
 * classification, and the adapters.
 */
export * from './provider.ts';
export { createProvider, providerConfigProblems } from './create-provider.ts';
export type { CreateProviderOptions } from './create-provider.ts';
export { classifyStatus, STATUS_TABLE } from './classify-outcome.ts';
export type { StatusClassification } from './classify-outcome.ts';
export { attemptHeaders } from './attempt-headers.ts';
export { OpenAIProvider, buildOpenAIRequestBody, openAIChatCompletionsUrl } from './openai/openai-provider.ts';
export { AnthropicProvider, ANTHROPIC_VERSION, ANTHROPIC_FINISH_REASONS, buildAnthropicRequestBody, anthropicMessagesUrl } from './anthropic/anthropic-provider.ts';
export { FakeProviderAdapter, FAKE_DEFAULT_MODEL } from './fake/fake-provider-adapter.ts';
export type { FakeProviderConfig } from './fake/fake-provider-config.ts';
