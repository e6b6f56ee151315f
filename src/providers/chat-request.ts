/**
 * Checks on a chat job's input (an OpenAI-style request body) before any
 * adapter turns it into a wire request. A bad input is a definite failure:
 * nothing is sent.
 */
import type { ChatContentPart, ChatRequest } from './provider.ts';

/**
 * Why `input` is not a usable chat request, or null when it is.
 *
 * @example invalidChatRequestReason({ messages: [] }) // 'messages must be a non-empty array'
 */
export function invalidChatRequestReason(input: unknown): string | null {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return 'input must be an object with messages';
  const messages = (input as { messages?: unknown }).messages;
  if (!Array.isArray(messages) || messages.length === 0) return 'messages must be a non-empty array';
  for (const [i, m] of messages.entries()) {
    if (typeof m !== 'object' || m === null) return `messages[${i}] must be an object`;
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || role === '') return `messages[${i}].role must be a string`;
    if (content !== null && content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
      return `messages[${i}].content must be a string, an array of parts, or null`;
    }
  }
  if ((input as { stream?: unknown }).stream === true) return 'streaming is not supported (stream must be false or absent)';
  return null;
}

/** Narrows `input` to a {@link ChatRequest} after {@link invalidChatRequestReason} said null. */
export function asChatRequest(input: unknown): ChatRequest {
  return input as ChatRequest;
}

/** The text of a message's content: a string, or the text parts of an array joined. */
export function contentText(content: string | readonly ChatContentPart[] | null | undefined): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as readonly ChatContentPart[]).map((p) => (typeof p.text === 'string' ? p.text : '')).join('');
}
