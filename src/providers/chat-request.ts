/**
 * Checks on a chat job's input (an OpenAI Chat Completions request body)
 * before any adapter turns it into a wire request. A bad input is a definite
 * failure: nothing is sent.
 */
import type { ChatMessage, ChatRequest } from './provider.ts';

/** Members that say how to transport an answer, not what to answer: each adapter sets them itself. */
export const TRANSPORT_MEMBERS: ReadonlySet<string> = new Set(['stream', 'stream_options', 'model']);

/**
 * Why `input` is not a usable chat request, or null when it is. `stream` may
 * be anything: it is transport (see {@link TRANSPORT_MEMBERS}).
 *
 * @example invalidChatRequestReason({ messages: [] }) // 'messages must be a non-empty array'
 */
export function invalidChatRequestReason(input: unknown): string | null {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return 'input must be an object with messages';
  const messages = (input as { messages?: unknown }).messages;
  if (!Array.isArray(messages) || messages.length === 0) return 'messages must be a non-empty array';
  for (const [i, m] of messages.entries()) {
    if (typeof m !== 'object' || m === null) return `messages[${i}] must be an object`;
    const { role, content, tool_calls: toolCalls, tool_call_id: toolCallId } = m as Record<string, unknown>;
    if (typeof role !== 'string' || role === '') return `messages[${i}].role must be a string`;
    if (content !== null && content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
      return `messages[${i}].content must be a string, an array of parts, or null`;
    }
    if (Array.isArray(content)) {
      for (const [j, part] of content.entries()) {
        if (typeof part !== 'object' || part === null || typeof (part as { type?: unknown }).type !== 'string') {
          return `messages[${i}].content[${j}] must be an object with a type`;
        }
      }
    }
    if (toolCalls !== undefined && toolCalls !== null) {
      if (!Array.isArray(toolCalls)) return `messages[${i}].tool_calls must be an array`;
      for (const [j, call] of toolCalls.entries()) {
        const c = call as { id?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
        if (typeof c?.id !== 'string' || typeof c.function?.name !== 'string' || typeof c.function.arguments !== 'string') {
          return `messages[${i}].tool_calls[${j}] must be { id, type: "function", function: { name, arguments } }`;
        }
      }
    }
    if (role === 'tool' && typeof toolCallId !== 'string') return `messages[${i}].tool_call_id must be a string`;
  }
  const tools = (input as { tools?: unknown }).tools;
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) return 'tools must be an array';
    for (const [i, tool] of tools.entries()) {
      const t = tool as { type?: unknown; function?: { name?: unknown } } | null;
      if (typeof t?.type !== 'string') return `tools[${i}] must be an object with a type`;
      if (t.type === 'function' && typeof t.function?.name !== 'string') return `tools[${i}].function.name must be a string`;
    }
  }
  return null;
}

/** Narrows `input` to a {@link ChatRequest}; check it with {@link invalidChatRequestReason} first. */
export function asChatRequest(input: unknown): ChatRequest {
  return input as ChatRequest;
}

/**
 * The input without its transport members (`stream`, `stream_options`,
 * `model`) and without members whose value is `null` (OpenAI's "not given").
 */
export function intentMembers(input: ChatRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (TRANSPORT_MEMBERS.has(key) || value === null || value === undefined) continue;
    out[key] = value;
  }
  return out;
}

/** The text of a message's content: a string, or the text (and refusal) parts of an array joined. */
export function contentText(content: ChatMessage['content'] | unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p: unknown) => {
      const part = p as { text?: unknown; refusal?: unknown } | null;
      return typeof part?.text === 'string' ? part.text : typeof part?.refusal === 'string' ? part.refusal : '';
    })
    .join('');
}
