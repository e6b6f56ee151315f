/**
 * The fake provider's OpenAI Chat Completions wire (`POST
 * /v1/chat/completions`): `chat.completion` answers, `chat.completion.chunk`
 * streams ending in `data: [DONE]` (a usage chunk with
 * `stream_options.include_usage`), OpenAI's error bodies, `x-request-id`.
 */
import type { FakeWireProtocol } from './fake-wire-protocol.ts';
import { chatBodyProblem, streamSteps } from './fake-wire-protocol.ts';
import { sendJson } from './fake-http.ts';
import { replyParts } from './fake-reply.ts';
import { argumentPieces, defaultChunks } from './fake-reply-pieces.ts';

const OPENAI_ERRORS: Record<number, { type: string; code: string | null; message: string }> = {
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request.' },
  401: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory', message: 'Country, region, or territory not supported.' },
  404: { type: 'invalid_request_error', code: 'model_not_found', message: 'The model does not exist or you do not have access to it.' },
  429: { type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests.' },
  500: { type: 'server_error', code: null, message: 'The server had an error while processing your request.' },
  503: { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later.' },
};

/** OpenAI Chat Completions, as the fake speaks it. */
export const fakeChatCompletions: FakeWireProtocol = {
  protocol: 'openai',

  validate: chatBodyProblem,

  requestIdHeader: (seq) => ({ 'x-request-id': `req_fake_${seq}` }),

  completion(call, b) {
    const r = replyParts(call, b);
    const message: Record<string, unknown> = { role: 'assistant', content: r.content === '' && r.toolCalls.length > 0 ? null : r.content, refusal: r.refusal };
    if (r.toolCalls.length > 0) message.tool_calls = r.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
    return {
      id: `chatcmpl-fake-${call.seq}`,
      object: 'chat.completion',
      created: Math.floor(Date.parse(call.receivedAt) / 1000),
      model: r.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: r.finish }],
      usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
      system_fingerprint: 'fp_onejob_fake',
    };
  },

  streamPlan(call, b) {
    const r = replyParts(call, b);
    const pieces = b.chunks !== undefined ? [...b.chunks] : defaultChunks(r.content);
    const { steps, framing, content, end } = streamSteps();
    const base = { id: `chatcmpl-fake-${call.seq}`, object: 'chat.completion.chunk', created: Math.floor(Date.parse(call.receivedAt) / 1000), model: r.model, system_fingerprint: 'fp_onejob_fake' };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    framing(chunk({ role: 'assistant', content: '', refusal: null }));
    for (const piece of pieces) content(chunk({ content: piece }));
    if (r.refusal !== null) content(chunk({ refusal: r.refusal }));
    for (const [index, t] of r.toolCalls.entries()) {
      framing(chunk({ tool_calls: [{ index, id: t.id, type: 'function', function: { name: t.name, arguments: '' } }] }));
      for (const piece of argumentPieces(t.arguments)) content(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
    end(chunk({}, r.finish));
    const includeUsage = ((call.body as { stream_options?: { include_usage?: unknown } } | null)?.stream_options?.include_usage) === true;
    if (includeUsage) framing({ ...base, choices: [], usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens } });
    framing('[DONE]');
    return steps;
  },

  errorEvent: (e) => ({ data: { error: { message: e.message ?? 'The server had an error while processing your request.', type: e.type ?? 'server_error', param: null, code: null } } }),

  sendError(res, status, override, headers = {}) {
    const base = OPENAI_ERRORS[status] ?? { type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null, message: `HTTP ${status}` };
    sendJson(res, status, { error: { message: override.message ?? base.message, type: override.type ?? base.type, param: null, code: override.code ?? base.code } }, headers);
  },
};
