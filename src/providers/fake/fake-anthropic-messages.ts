/**
 * The fake provider's Anthropic Messages wire (`POST /v1/messages`):
 * `message` answers with `text` and `tool_use` blocks, the named event
 * stream (`message_start`, `ping`, `content_block_*`, `message_delta`,
 * `message_stop`), Anthropic's error bodies, `request-id`. It refuses what
 * the real API refuses: no `max_tokens`, a role other than `user` or
 * `assistant` inside `messages`.
 */
import type { FakeWireProtocol } from './fake-wire-protocol.ts';
import { chatBodyProblem, streamSteps } from './fake-wire-protocol.ts';
import { sendJson } from './fake-http.ts';
import { parseArguments, replyParts } from './fake-reply.ts';
import { argumentPieces, defaultChunks } from './fake-reply-pieces.ts';

/** OpenAI's finish reasons in Anthropic's words. */
const ANTHROPIC_STOP_REASON: Record<string, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  content_filter: 'refusal',
};

const ANTHROPIC_ERRORS: Record<number, { type: string; message: string }> = {
  400: { type: 'invalid_request_error', message: 'Invalid request.' },
  401: { type: 'authentication_error', message: 'invalid x-api-key' },
  403: { type: 'permission_error', message: 'Your API key does not have permission to use the specified resource.' },
  404: { type: 'not_found_error', message: 'The requested resource was not found.' },
  413: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' },
  429: { type: 'rate_limit_error', message: 'Number of requests has exceeded your rate limit.' },
  500: { type: 'api_error', message: 'Internal server error' },
  504: { type: 'timeout_error', message: 'Request timed out.' },
  529: { type: 'overloaded_error', message: 'Overloaded' },
};

/** Anthropic Messages, as the fake speaks it. */
export const fakeAnthropicMessages: FakeWireProtocol = {
  protocol: 'anthropic',

  validate(body) {
    const problem = chatBodyProblem(body);
    if (problem !== null) return problem;
    const b = body as Record<string, unknown>;
    if (typeof b.max_tokens !== 'number') return { status: 400, message: 'max_tokens: Field required' };
    for (const [i, m] of (b.messages as unknown[]).entries()) {
      const role = (m as { role?: unknown } | null)?.role;
      if (role !== 'user' && role !== 'assistant') {
        return { status: 400, message: `messages.${i}.role: Input should be 'user' or 'assistant'` };
      }
    }
    return null;
  },

  requestIdHeader: (seq) => ({ 'request-id': `req_fake_${seq}` }),

  completion(call, b) {
    const r = replyParts(call, b);
    const text = r.content + (r.refusal ?? '');
    const content: Record<string, unknown>[] = [];
    if (text !== '' || r.toolCalls.length === 0) content.push({ type: 'text', text });
    for (const t of r.toolCalls) content.push({ type: 'tool_use', id: t.id, name: t.name, input: parseArguments(t.arguments) });
    return {
      id: `msg_fake_${call.seq}`,
      type: 'message',
      role: 'assistant',
      model: r.model,
      content,
      stop_reason: ANTHROPIC_STOP_REASON[r.finish] ?? r.finish,
      stop_sequence: null,
      usage: { input_tokens: r.promptTokens, output_tokens: r.completionTokens },
    };
  },

  streamPlan(call, b) {
    const r = replyParts(call, b);
    const pieces = b.chunks !== undefined ? [...b.chunks] : defaultChunks(r.content);
    const { steps, framing, content, end } = streamSteps();
    framing({
      type: 'message_start',
      message: { id: `msg_fake_${call.seq}`, type: 'message', role: 'assistant', model: r.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: r.promptTokens, output_tokens: 1 } },
    }, 'message_start');
    framing({ type: 'ping' }, 'ping');
    let index = 0;
    const text = [...pieces, ...(r.refusal === null ? [] : [r.refusal])];
    if (text.length > 0 || r.toolCalls.length === 0) {
      framing({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, 'content_block_start');
      for (const piece of text) content({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }, 'content_block_delta');
      framing({ type: 'content_block_stop', index }, 'content_block_stop');
      index += 1;
    }
    for (const t of r.toolCalls) {
      framing({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} } }, 'content_block_start');
      for (const piece of argumentPieces(t.arguments)) content({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } }, 'content_block_delta');
      framing({ type: 'content_block_stop', index }, 'content_block_stop');
      index += 1;
    }
    end({ type: 'message_delta', delta: { stop_reason: ANTHROPIC_STOP_REASON[r.finish] ?? r.finish, stop_sequence: null }, usage: { output_tokens: r.completionTokens } }, 'message_delta');
    framing({ type: 'message_stop' }, 'message_stop');
    return steps;
  },

  errorEvent: (e) => ({ name: 'error', data: { type: 'error', error: { type: e.type ?? 'overloaded_error', message: e.message ?? 'Overloaded' } } }),

  sendError(res, status, override, headers = {}) {
    const base = ANTHROPIC_ERRORS[status] ?? { type: status >= 500 ? 'api_error' : 'invalid_request_error', message: `HTTP ${status}` };
    sendJson(res, status, { type: 'error', error: { type: override.type ?? base.type, message: override.message ?? base.message } }, headers);
  },
};
