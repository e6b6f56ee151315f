/**
 * The wire formats onejob speaks, typed from their owners' own packages:
 * OpenAI Chat Completions from `openai`, Anthropic Messages from
 * `@anthropic-ai/sdk` (STYLE example 20). Types only: every import here is
 * `import type`, erased at compile time, so neither SDK is loaded at run
 * time. They are `dependencies` (not dev) because the library's published
 * declarations name these types, and a TypeScript consumer must resolve them.
 *
 * Version notes: `@anthropic-ai/sdk` 0.137.0 is the last release for API
 * version `2023-06-01`, the `anthropic-version` onejob sends (1.x types the
 * 2026-10-21 API, which dropped `temperature`/`top_p`/`top_k`).
 */
import type {
  ChatCompletion,
  ChatCompletionAssistantMessageParam,
  ChatCompletionChunk,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsBase,
  ChatCompletionFunctionTool,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTokenLogprob,
  ChatCompletionToolChoiceOption,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions';
import type { CompletionUsage as OpenAICompletionUsage } from 'openai/resources/completions';
import type {
  ContentBlock as AnthropicContentBlock,
  ContentBlockParam as AnthropicContentBlockParam,
  Message as AnthropicMessage,
  MessageCreateParamsBase as AnthropicMessageCreateParamsBase,
  MessageParam as AnthropicMessageParam,
  RawMessageStreamEvent as AnthropicStreamEvent,
  StopReason as AnthropicStopReason,
  TextBlockParam as AnthropicTextBlockParam,
  Tool as AnthropicTool,
  ToolChoice as AnthropicToolChoice,
  ToolResultBlockParam as AnthropicToolResultBlockParam,
  ToolUseBlock as AnthropicToolUseBlock,
  ToolUseBlockParam as AnthropicToolUseBlockParam,
  ImageBlockParam as AnthropicImageBlockParam,
  Usage as AnthropicUsage,
  MessageDeltaUsage as AnthropicMessageDeltaUsage,
} from '@anthropic-ai/sdk/resources/messages';

// --- OpenAI Chat Completions ------------------------------------------------

/** A Chat Completions request body (`POST /chat/completions`), as the `openai` package types it. */
export type OpenAIChatRequestBody = ChatCompletionCreateParamsBase;
/** One message of a Chat Completions request. */
export type OpenAIMessageParam = ChatCompletionMessageParam;
/** An assistant message of a request (may carry `tool_calls`). */
export type OpenAIAssistantMessageParam = ChatCompletionAssistantMessageParam;
/** A `tool` role message (a tool's result). */
export type OpenAIToolMessageParam = ChatCompletionToolMessageParam;
/** One content part of a user message. */
export type OpenAIContentPart = ChatCompletionContentPart;
/** A function tool of a request. */
export type OpenAIFunctionTool = ChatCompletionFunctionTool;
/** `tool_choice`. */
export type OpenAIToolChoice = ChatCompletionToolChoiceOption;
/** A completed tool call of an answer: the shape onejob's results carry. */
export type OpenAIToolCall = ChatCompletionMessageFunctionToolCall;
/** A `chat.completion` response. */
export type OpenAIChatCompletion = ChatCompletion;
/** A `chat.completion.chunk` stream event. */
export type OpenAIChatChunk = ChatCompletionChunk;
/** One token's log probability. */
export type OpenAITokenLogprob = ChatCompletionTokenLogprob;
/** A choice's `logprobs` member. */
export type OpenAIChoiceLogprobs = ChatCompletion.Choice.Logprobs;
/** OpenAI's `usage`. */
export type OpenAIUsage = OpenAICompletionUsage;

// --- Anthropic Messages -----------------------------------------------------

/** A Messages request body (`POST /v1/messages`), as `@anthropic-ai/sdk` types it. */
export type AnthropicRequestBody = AnthropicMessageCreateParamsBase;
export type {
  AnthropicContentBlock,
  AnthropicContentBlockParam,
  AnthropicImageBlockParam,
  AnthropicMessage,
  AnthropicMessageDeltaUsage,
  AnthropicMessageParam,
  AnthropicStopReason,
  AnthropicStreamEvent,
  AnthropicTextBlockParam,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlockParam,
  AnthropicToolUseBlock,
  AnthropicToolUseBlockParam,
  AnthropicUsage,
};
