/**
 * The `openai` adapter: any OpenAI-compatible Chat Completions server
 * (OpenAI, vLLM, Ollama, llama.cpp server, OpenRouter, onejob's fake…).
 *
 * POST `{baseUrl}/chat/completions` with the job's input as it is (every
 * member the protocol defines, and extensions such as `top_k`), the
 * configured `model`, and `stream: false`, or `stream: true` with
 * `stream_options.include_usage`; `Authorization: Bearer <apiKey>` when a key
 * is configured. No retries: one call is one attempt.
 */
import { intentMembers } from '../chat-request.ts';
import { usageOf } from '../completion-accumulator.ts';
import { HttpChatProvider, type HttpChatProviderOptions, type StreamDecoder, type WireProtocol } from '../http-chat-provider.ts';
import { storedFor } from '../lookup-identity.ts';
import type { ChatDelta, ChatRequest, HttpProviderConfig, LookupAnswer, LookupRequest } from '../provider.ts';
import type { OpenAIChatChunk, OpenAIChatCompletion, OpenAIChatRequestBody } from '../wire-types.ts';

/** Options of {@link OpenAIProvider}. */
export type OpenAIProviderOptions = HttpChatProviderOptions;

/**
 * Members of a chat input that only the Anthropic protocol can express (an
 * input translated from `POST /v1/messages` may carry them): an
 * OpenAI-compatible provider is skipped for them.
 */
export const ANTHROPIC_ONLY_MEMBERS: readonly string[] = ['thinking'];

/** The OpenAI Chat Completions wire protocol. */
export const OPENAI_PROTOCOL: WireProtocol = {
  type: 'openai',
  url: (baseUrl) => openAIChatCompletionsUrl(baseUrl),
  headers: {},
  authHeaders: (apiKey) => ({ authorization: `Bearer ${apiKey}` }),
  unsupportedMembers: (input, config) => unsupportedOpenAIMembers(input, config.lookup === 'stored-completions'),
  body: (input, config, stream, attempt) => {
    const body = buildOpenAIRequestBody(input, config.model, stream);
    return { body: config.lookup === 'stored-completions' ? storedCompletionBody(body, attempt.attemptId) : body };
  },
  completionDeltas: (body) => openAICompletionDeltas(body),
  streamDecoder: () => new OpenAIStreamDecoder(),
};

/**
 * An OpenAI-compatible provider.
 *
 * @example new OpenAIProvider('primary', { type: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', model: 'llama3.2' })
 */
export class OpenAIProvider extends HttpChatProvider {
  readonly settleUnknownAfterMs: number | null;
  readonly #config: HttpProviderConfig;

  constructor(name: string, config: HttpProviderConfig, options: OpenAIProviderOptions = {}) {
    super(name, config, OPENAI_PROTOCOL, options);
    this.#config = config;
    this.settleUnknownAfterMs = config.settleUnknownAfterMs ?? null;
    // Only a provider whose requests are stored can be asked about them (CONTRACT §11).
    if (config.lookup !== 'stored-completions') this.lookup = undefined;
  }

  /**
   * `lookup: "stored-completions"` (CONTRACT §11): lists
   * `GET {baseUrl}/chat/completions?metadata[onejob_attempt_id]=<id>`; a
   * stored completion whose `metadata.onejob_attempt_id` is the attempt's
   * is the output (any other entry is another attempt's); none is `not_found`, a definite
   * `not_found_at_provider` failure only once `maxDurationMs` has passed
   * since the attempt started (without `maxDurationMs`: never).
   */
  lookup?: (request: LookupRequest) => Promise<LookupAnswer> = async (request) => {
    const url = openAIChatCompletionsUrl(this.#config.baseUrl);
    url.searchParams.set('metadata[onejob_attempt_id]', request.attemptId);
    const exchange = await this.getExchange(url, request.signal);
    if (exchange.kind !== 'response') return { kind: 'error', message: `${this.name}: the stored completions could not be listed (${exchange.kind})` };
    if (exchange.status < 200 || exchange.status >= 300) return { kind: 'error', message: `${this.name}: listing stored completions answered ${exchange.status}` };
    let list: unknown;
    try {
      list = JSON.parse(exchange.body);
    } catch {
      return { kind: 'error', message: `${this.name}: the stored completions list is not JSON` };
    }
    const data = (list as { data?: unknown } | null)?.data;
    if (!Array.isArray(data)) return { kind: 'error', message: `${this.name}: the stored completions list has no data` };
    // Only the attempt's own: a server that ignores the filter lists others' completions too (CONTRACT §15).
    const found = storedFor(data, request.attemptId);
    if (found === undefined) {
      const max = this.#config.maxDurationMs ?? null;
      if (max !== null && request.now.getTime() - request.startedAt.getTime() >= max) {
        return {
          kind: 'failed',
          error: { code: 'not_found_at_provider', message: `${this.name} stored no completion for attempt ${request.attemptId}, and its maxDurationMs (${max}) has passed`, details: { provider: this.name } },
        };
      }
      return { kind: 'not_found' };
    }
    const completion = this.completionOf(found);
    if ('malformed' in completion) return { kind: 'error', message: `${this.name}: the stored completion cannot be read (${completion.malformed})` };
    const id = (found as { id?: unknown }).id;
    return { kind: 'succeeded', completion, raw: found, ...(typeof id === 'string' ? { providerRequestId: id } : {}) };
  };
}

/**
 * A request body that asks OpenAI to store the completion, tagged with the
 * attempt's id so that it can be found again (CONTRACT §11). The input's own
 * metadata is kept.
 *
 * @example storedCompletionBody({ model: 'gpt-4o-mini', messages }, 'att_1') // { …, store: true, metadata: { onejob_attempt_id: 'att_1' } }
 */
export function storedCompletionBody(body: OpenAIChatRequestBody, attemptId: string): OpenAIChatRequestBody {
  const given = (body as { metadata?: unknown }).metadata;
  const metadata = typeof given === 'object' && given !== null && !Array.isArray(given) ? (given as Record<string, string>) : {};
  return { ...body, store: true, metadata: { ...metadata, onejob_attempt_id: attemptId } } as OpenAIChatRequestBody;
}

/**
 * `{baseUrl}/chat/completions`, with any trailing slash of `baseUrl` ignored.
 *
 * @example openAIChatCompletionsUrl('https://api.openai.com/v1/').href // 'https://api.openai.com/v1/chat/completions'
 */
export function openAIChatCompletionsUrl(baseUrl: string): URL {
  return new URL(`${baseUrl.replace(/\/+$/, '')}/chat/completions`);
}

/**
 * The members of `input` an OpenAI-compatible server cannot be sent as
 * given: the Anthropic-only ones ({@link ANTHROPIC_ONLY_MEMBERS}), and on a
 * provider that stores its completions (`lookup: "stored-completions"`,
 * whose lookup needs `store: true`) a caller's `store: false` and a
 * `metadata` that sets the provider's own `onejob_attempt_id` (CONTRACT
 * §15). Everything else is the protocol's own and passes through as given
 * (the allow-list of this type is the protocol: a server that does not know
 * a member rejects it, 400, a definite failure, never a silent drop).
 *
 * @example unsupportedOpenAIMembers({ messages, store: false }, true) // ['store']
 */
export function unsupportedOpenAIMembers(input: ChatRequest, storesCompletions = false): string[] {
  const out = ANTHROPIC_ONLY_MEMBERS.filter((m) => input[m] !== undefined && input[m] !== null);
  if (storesCompletions) {
    if (input.store === false) out.push('store');
    const metadata = input.metadata as unknown;
    if (typeof metadata === 'object' && metadata !== null && Object.hasOwn(metadata, 'onejob_attempt_id')) out.push('metadata.onejob_attempt_id');
  }
  return out;
}

/**
 * The wire body: the input's members as given (null members left out), with
 * the configured model, and `stream: false`, or `stream: true` with
 * `stream_options: { include_usage: true }` (usage comes in the last chunk).
 *
 * @example buildOpenAIRequestBody({ messages, tools }, 'gpt-4o-mini', true)
 * // { messages, tools, model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true } }
 */
export function buildOpenAIRequestBody(input: ChatRequest, model: string, stream = false): OpenAIChatRequestBody {
  const body = { ...intentMembers(input), model } as unknown as OpenAIChatRequestBody;
  return stream ? { ...body, stream: true, stream_options: { include_usage: true } } : { ...body, stream: false };
}

/**
 * The deltas a whole Chat Completions response would have streamed (its first
 * choice), or why it is not a completion. Folded by the accumulator into the
 * normalized completion.
 */
export function openAICompletionDeltas(body: unknown): ChatDelta[] | { readonly malformed: string } {
  if (typeof body !== 'object' || body === null) return { malformed: 'not an object' };
  const b = body as Partial<OpenAIChatCompletion>;
  if (!Array.isArray(b.choices) || b.choices.length === 0) return { malformed: 'no choices' };
  const choice = b.choices[0];
  if (typeof choice !== 'object' || choice === null || typeof choice.message !== 'object' || choice.message === null) {
    return { malformed: 'choices[0].message missing' };
  }
  const message = choice.message as unknown as Record<string, unknown>;
  const content = message.content;
  if (content !== null && content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
    return { malformed: 'choices[0].message.content is neither text nor parts' };
  }
  const deltas: ChatDelta[] = [];
  if (typeof b.model === 'string' && b.model !== '') deltas.push({ type: 'model', model: b.model });
  const text = typeof content === 'string' ? content : Array.isArray(content) ? content.map((p: { text?: unknown }) => (typeof p?.text === 'string' ? p.text : '')).join('') : '';
  if (text !== '') deltas.push({ type: 'text', text });
  if (typeof message.refusal === 'string') deltas.push({ type: 'refusal', text: message.refusal });
  const toolCalls = message.tool_calls;
  if (Array.isArray(toolCalls)) {
    for (const [index, call] of toolCalls.entries()) {
      const c = call as { id?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
      if (typeof c?.function?.name !== 'string') return { malformed: `choices[0].message.tool_calls[${index}] has no function name` };
      deltas.push({
        type: 'tool_call',
        index,
        ...(typeof c.id === 'string' ? { id: c.id } : {}),
        name: c.function.name,
        arguments: typeof c.function.arguments === 'string' ? c.function.arguments : JSON.stringify(c.function.arguments ?? {}),
      });
    }
  }
  const logprobs = choice.logprobs;
  if (logprobs !== null && logprobs !== undefined) {
    deltas.push({ type: 'logprobs', ...(logprobs.content ? { content: logprobs.content } : {}), ...(logprobs.refusal ? { refusal: logprobs.refusal } : {}) });
  }
  deltas.push({ type: 'finish', finish_reason: typeof choice.finish_reason === 'string' ? choice.finish_reason : 'stop' });
  const u = (b.usage ?? {}) as Partial<Record<'prompt_tokens' | 'completion_tokens' | 'total_tokens', unknown>>;
  deltas.push({ type: 'usage', usage: usageOf(u.prompt_tokens, u.completion_tokens, u.total_tokens) });
  return deltas;
}

/**
 * Reads an OpenAI SSE stream: `data: <chat.completion.chunk>` events (the
 * first choice's deltas; a last chunk with no choices carries `usage`), then
 * `data: [DONE]`. A chunk with an `error` member (or an `event: error`) is the
 * provider reporting a failure.
 */
export class OpenAIStreamDecoder implements StreamDecoder {
  #done = false;
  #finished = false;
  #model: string | null = null;

  get done(): boolean {
    // Some OpenAI-compatible servers end the body cleanly after the finish
    // reason without `[DONE]`; the answer is whole then too.
    return this.#done || this.#finished;
  }

  decode(event: string | undefined, data: string): ReturnType<StreamDecoder['decode']> {
    if (data.trim() === '[DONE]') {
      this.#done = true;
      return { deltas: [] };
    }
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      return { malformed: `a stream event is not JSON: ${data.slice(0, 80)}` };
    }
    if (event === 'error' || (typeof json === 'object' && json !== null && 'error' in json)) {
      const err = (json as { error?: unknown }).error ?? json;
      const e = (typeof err === 'object' && err !== null ? err : { message: String(err) }) as { type?: unknown; code?: unknown; message?: unknown };
      const type = typeof e.type === 'string' ? e.type : typeof e.code === 'string' ? e.code : undefined;
      return { error: { ...(type === undefined ? {} : { type }), ...(typeof e.message === 'string' ? { message: e.message } : {}) } };
    }
    const chunk = json as Partial<OpenAIChatChunk>;
    const deltas: ChatDelta[] = [];
    if (typeof chunk.model === 'string' && chunk.model !== '' && chunk.model !== this.#model) {
      this.#model = chunk.model;
      deltas.push({ type: 'model', model: chunk.model });
    }
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find((c) => (c?.index ?? 0) === 0) : undefined;
    if (choice !== undefined) {
      const d = choice.delta ?? {};
      if (typeof d.content === 'string' && d.content !== '') deltas.push({ type: 'text', text: d.content });
      if (typeof d.refusal === 'string' && d.refusal !== '') deltas.push({ type: 'refusal', text: d.refusal });
      for (const call of d.tool_calls ?? []) {
        deltas.push({
          type: 'tool_call',
          index: typeof call.index === 'number' ? call.index : 0,
          ...(typeof call.id === 'string' ? { id: call.id } : {}),
          ...(typeof call.function?.name === 'string' ? { name: call.function.name } : {}),
          ...(typeof call.function?.arguments === 'string' ? { arguments: call.function.arguments } : {}),
        });
      }
      const lp = choice.logprobs;
      if (lp !== null && lp !== undefined && (lp.content || lp.refusal)) {
        deltas.push({ type: 'logprobs', ...(lp.content ? { content: lp.content } : {}), ...(lp.refusal ? { refusal: lp.refusal } : {}) });
      }
      if (typeof choice.finish_reason === 'string') {
        this.#finished = true;
        deltas.push({ type: 'finish', finish_reason: choice.finish_reason });
      }
    }
    if (chunk.usage !== null && chunk.usage !== undefined) {
      deltas.push({ type: 'usage', usage: usageOf(chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.total_tokens) });
    }
    return { deltas };
  }
}
