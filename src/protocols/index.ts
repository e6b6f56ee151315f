/**
 * The endpoints' protocol translators: the Anthropic Messages request,
 * response and event stream, and OpenAI's `chat.completion.chunk` stream,
 * to and from the internal chat input, result and deltas. Pure functions.
 */
export {
  chatResultToMessagesResponse,
  FINISH_TO_STOP_REASON,
  messagesRequestToChatInput,
  messagesSseEvent,
  MessagesStreamEncoder,
  normalizedOf,
} from './anthropic-messages.ts';
export type { MessagesRequestTranslation, MessagesResponseOptions } from './anthropic-messages.ts';
export { ChatChunkEncoder, chatSseEvent } from './openai-chat-stream.ts';
export type { ChatChunkEncoderOptions } from './openai-chat-stream.ts';
