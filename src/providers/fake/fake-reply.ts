/**
 * What the fake provider answers a chat call, whatever the protocol: the
 * reply's text, refusal, tool calls, model, finish and token counts from the
 * behaviour (or the request itself: an echo, or `fitRequest`), and the text
 * of a request (for `contains` rules and token estimates).
 */
import type { FakeCall } from './fake-call.ts';
import type { FakeBehaviour } from './fake-behaviour.ts';
import { fakeRequestAnswer } from './fake-request-answer.ts';

/** The parts of one reply, in OpenAI's vocabulary (each protocol renders them). */
export interface ReplyParts {
  readonly content: string;
  readonly refusal: string | null;
  readonly toolCalls: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  readonly model: string;
  readonly finish: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** The reply a behaviour gives a call. */
export function replyParts(call: FakeCall, given: FakeBehaviour): ReplyParts {
  const request = (call.body ?? {}) as { model?: unknown };
  const b = given.fitRequest === true ? fittedBehaviour(call.body, given) : given;
  const content =
    b.reply === undefined ? (b.chunks !== undefined ? b.chunks.join('') : b.toolCalls !== undefined || b.refusal !== undefined ? '' : lastUserText(call.body)) : typeof b.reply === 'string' ? b.reply : JSON.stringify(b.reply);
  const prefix = call.protocol === 'openai' ? 'call_fake' : 'toolu_fake';
  const toolCalls = (b.toolCalls ?? []).map((t, i) => ({
    id: t.id ?? `${prefix}_${call.seq}_${i}`,
    name: t.name,
    arguments: t.arguments === undefined ? '{}' : typeof t.arguments === 'string' ? t.arguments : JSON.stringify(t.arguments),
  }));
  const outputText = content + (b.refusal ?? '') + toolCalls.map((t) => t.name + t.arguments).join('');
  return {
    content,
    refusal: b.refusal ?? null,
    toolCalls,
    model: b.model ?? (typeof request.model === 'string' ? request.model : 'fake-model'),
    finish: b.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : b.refusal !== undefined ? 'content_filter' : 'stop'),
    promptTokens: b.usage?.prompt_tokens ?? estimateTokens(requestText(call.body)),
    completionTokens: b.usage?.completion_tokens ?? estimateTokens(outputText),
  };
}

/** `b` with the answer {@link fakeRequestAnswer} gives the request, when `b` scripts no answer of its own. */
export function fittedBehaviour(body: unknown, b: FakeBehaviour): FakeBehaviour {
  if (b.reply !== undefined || b.toolCalls !== undefined || b.refusal !== undefined || b.chunks !== undefined) return b;
  const answer = fakeRequestAnswer(body);
  if (answer === null) return b;
  return 'toolCall' in answer ? { ...b, toolCalls: [answer.toolCall] } : { ...b, reply: answer.json };
}

/** The text of a message's content (a string, or the text of its parts). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
    .join('');
}

/** All the text of a request (Anthropic `system` and the Responses API's `instructions` and `input` included), for `contains` rules and token estimates. */
export function requestText(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const b = body as { system?: unknown; messages?: unknown; instructions?: unknown; input?: unknown };
  const parts: string[] = [];
  if (b.system !== undefined) parts.push(contentText(b.system));
  if (Array.isArray(b.messages)) for (const m of b.messages) parts.push(contentText((m as { content?: unknown } | null)?.content));
  // The Responses API: `instructions`, and `input` (a string, or items whose `content` is text or parts).
  if (typeof b.instructions === 'string') parts.push(b.instructions);
  if (typeof b.input === 'string') parts.push(b.input);
  else if (Array.isArray(b.input)) for (const item of b.input) parts.push(contentText((item as { content?: unknown } | null)?.content));
  return parts.join('\n');
}

/** The last user message's text (the default reply: an echo). */
export function lastUserText(body: unknown): string {
  const messages = (body as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m?.role === 'user') return contentText(m.content);
  }
  return '';
}

/** About one token per four characters, at least one. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** A tool call's argument text as JSON (`{}` when it is not JSON). */
export function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}
