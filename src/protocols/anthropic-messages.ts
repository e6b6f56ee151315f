/**
 * The Anthropic-compatible endpoint's translators (CONTRACT §7, `POST
 * /v1/messages`), pure functions so that the route stays thin:
 *
 * - {@link messagesRequestToChatInput}: a Messages request body → the
 *   internal chat input (OpenAI shape), the same job input any provider type
 *   can run;
 * - {@link chatResultToMessagesResponse}: a job's result → a Messages
 *   response (`type: "message"`, content blocks, `stop_reason`, `usage`);
 * - {@link MessagesStreamEncoder}: normalized {@link ChatDelta}s → Anthropic's
 *   event sequence (`message_start` … `message_stop`), with
 *   {@link messagesSseEvent} to write one.
 *
 * The table of what maps to what is in `docs/providers.md`.
 */
import { completionDeltas } from '../providers/completion-accumulator.ts';
import type { ChatDelta, ChatMessage, ChatRequest, NormalizedCompletion } from '../providers/provider.ts';
import type {
  AnthropicContentBlock,
  AnthropicMessage,
  AnthropicRequestBody,
  AnthropicStopReason,
  AnthropicStreamEvent,
  OpenAIFunctionTool,
  OpenAIToolCall,
  OpenAIToolChoice,
} from '../providers/wire-types.ts';

/** OpenAI `finish_reason` → Anthropic `stop_reason`; others become `end_turn`. */
export const FINISH_TO_STOP_REASON: Readonly<Record<string, AnthropicStopReason>> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal',
};

/** Messages request members carried into the chat input (see the docs' table). */
const CARRIED = new Set([
  'model', 'max_tokens', 'messages', 'system', 'temperature', 'top_p', 'top_k', 'stop_sequences', 'metadata', 'tools', 'tool_choice',
  'output_config', 'thinking', 'stream',
]);

/** The result of {@link messagesRequestToChatInput}. */
export type MessagesRequestTranslation =
  | {
      readonly ok: true;
      /** The `model` member: the route name (or `route:<name>`). */
      readonly model: string;
      /** Whether the client asked for a stream. */
      readonly stream: boolean;
      /** The job's input. */
      readonly input: ChatRequest;
    }
  | {
      readonly ok: false;
      /** The member at fault, dotted (`messages[2].content[0].type`, `container`, …). */
      readonly member: string;
      /** One line for the client. */
      readonly message: string;
    };

const fail = (member: string, message: string): MessagesRequestTranslation => ({ ok: false, member, message });

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Translates a Messages API request body into the internal chat input, or
 * names the member that is malformed or has no equivalent. `cache_control`
 * markers are left out (a caching hint, it does not change the answer); every
 * other member either maps or is refused.
 *
 * @example
 * messagesRequestToChatInput({ model: 'chat', max_tokens: 100, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] })
 * // { ok: true, model: 'chat', stream: false, input: { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 100 } }
 */
export function messagesRequestToChatInput(body: unknown): MessagesRequestTranslation {
  if (!isRecord(body)) return fail('body', 'the body must be a JSON object');
  const b = body as Partial<AnthropicRequestBody> & Record<string, unknown>;
  for (const key of Object.keys(b)) if (!CARRIED.has(key) && b[key] !== undefined && b[key] !== null) return fail(key, `${key} is not supported by onejob's Messages endpoint`);
  if (typeof b.model !== 'string' || b.model === '') return fail('model', 'model must be a non-empty string');
  if (typeof b.max_tokens !== 'number' || !Number.isInteger(b.max_tokens) || b.max_tokens < 1) return fail('max_tokens', 'max_tokens must be a positive integer');
  if (!Array.isArray(b.messages) || b.messages.length === 0) return fail('messages', 'messages must be a non-empty array');

  const messages: ChatMessage[] = [];
  if (b.system !== undefined) {
    const text = textOf(b.system);
    if (text === null) return fail('system', 'system must be a string or an array of text blocks');
    messages.push({ role: 'system', content: text });
  }
  for (const [i, m] of b.messages.entries()) {
    if (!isRecord(m)) return fail(`messages[${i}]`, 'each message must be an object');
    const at = `messages[${i}]`;
    const role = m.role;
    const content = m.content;
    if (role === 'system') {
      const text = textOf(content);
      if (text === null) return fail(`${at}.content`, 'a system message must be text');
      messages.push({ role: 'system', content: text });
      continue;
    }
    if (role !== 'user' && role !== 'assistant') return fail(`${at}.role`, 'role must be "user" or "assistant"');
    if (typeof content === 'string') {
      messages.push({ role, content });
      continue;
    }
    if (!Array.isArray(content)) return fail(`${at}.content`, 'content must be a string or an array of blocks');
    if (role === 'assistant') {
      let text = '';
      const toolCalls: OpenAIToolCall[] = [];
      for (const [j, block] of content.entries()) {
        const bt = isRecord(block) ? block.type : undefined;
        if (bt === 'text' && typeof (block as { text?: unknown }).text === 'string') text += (block as { text: string }).text;
        else if (bt === 'tool_use' && typeof (block as { id?: unknown }).id === 'string' && typeof (block as { name?: unknown }).name === 'string') {
          const u = block as { id: string; name: string; input?: unknown };
          toolCalls.push({ id: u.id, type: 'function', function: { name: u.name, arguments: JSON.stringify(u.input ?? {}) } });
        } else return fail(`${at}.content[${j}].type`, `an assistant ${JSON.stringify(bt)} block is not supported`);
      }
      messages.push({ role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) });
      continue;
    }
    // user: tool results become `tool` messages (first, as OpenAI expects them right after the assistant's calls), the rest one user message.
    const parts: ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } })[] = [];
    for (const [j, block] of content.entries()) {
      if (!isRecord(block)) return fail(`${at}.content[${j}]`, 'each block must be an object');
      if (block.type === 'text' && typeof block.text === 'string') parts.push({ type: 'text', text: block.text });
      else if (block.type === 'image' && isRecord(block.source)) {
        const s = block.source;
        if (s.type === 'base64' && typeof s.media_type === 'string' && typeof s.data === 'string') parts.push({ type: 'image_url', image_url: { url: `data:${s.media_type};base64,${s.data}` } });
        else if (s.type === 'url' && typeof s.url === 'string') parts.push({ type: 'image_url', image_url: { url: s.url } });
        else return fail(`${at}.content[${j}].source`, 'an image source must be base64 or url');
      } else if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        const text = block.content === undefined ? '' : textOf(block.content);
        if (text === null) return fail(`${at}.content[${j}].content`, 'a tool result must be text');
        messages.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error === true ? `[tool error] ${text}` : text });
      } else return fail(`${at}.content[${j}].type`, `a user ${JSON.stringify(block.type)} block is not supported`);
    }
    if (parts.length > 0) messages.push({ role: 'user', content: parts.every((p) => p.type === 'text') && parts.length === 1 ? (parts[0] as { text: string }).text : parts });
  }

  const input: Record<string, unknown> = { messages, max_tokens: b.max_tokens };
  for (const key of ['temperature', 'top_p', 'top_k'] as const) if (typeof b[key] === 'number') input[key] = b[key];
  if (Array.isArray(b.stop_sequences)) input.stop = [...b.stop_sequences];
  if (isRecord(b.metadata) && typeof b.metadata.user_id === 'string') input.user = b.metadata.user_id;
  if (b.tools !== undefined) {
    if (!Array.isArray(b.tools)) return fail('tools', 'tools must be an array');
    const tools: OpenAIFunctionTool[] = [];
    for (const [i, t] of (b.tools as unknown[]).entries()) {
      if (!isRecord(t) || typeof t.name !== 'string' || !isRecord(t.input_schema) || (t.type !== undefined && t.type !== null && t.type !== 'custom')) {
        return fail(`tools[${i}]`, 'only client tools ({ name, description?, input_schema }) are supported');
      }
      tools.push({
        type: 'function',
        function: {
          name: t.name,
          ...(typeof t.description === 'string' ? { description: t.description } : {}),
          parameters: t.input_schema,
          ...(typeof t.strict === 'boolean' ? { strict: t.strict } : {}),
        },
      });
    }
    input.tools = tools;
  }
  if (b.tool_choice !== undefined) {
    const c = b.tool_choice as { type?: unknown; name?: unknown; disable_parallel_tool_use?: unknown };
    let choice: OpenAIToolChoice;
    if (c.type === 'auto') choice = 'auto';
    else if (c.type === 'any') choice = 'required';
    else if (c.type === 'none') choice = 'none';
    else if (c.type === 'tool' && typeof c.name === 'string') choice = { type: 'function', function: { name: c.name } };
    else return fail('tool_choice', 'tool_choice must be auto, any, none or tool');
    input.tool_choice = choice;
    if (c.disable_parallel_tool_use === true) input.parallel_tool_calls = false;
  }
  if (b.output_config !== undefined) {
    const format = (b.output_config as { format?: unknown }).format;
    const other = Object.keys(b.output_config as object).filter((k) => k !== 'format');
    if (other.length > 0) return fail(`output_config.${other[0]}`, `output_config.${other[0]} is not supported`);
    if (isRecord(format)) {
      if (format.type !== 'json_schema' || !isRecord(format.schema)) return fail('output_config.format', 'output_config.format must be { type: "json_schema", schema }');
      input.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict: true } };
    }
  }
  if (b.thinking !== undefined) input.thinking = b.thinking;
  return { ok: true, model: b.model, stream: b.stream === true, input: input as ChatRequest };
}

/** Options of {@link chatResultToMessagesResponse} and {@link MessagesStreamEncoder}. */
export interface MessagesResponseOptions {
  /** The message id, the same for every answer of a job (e.g. `msg_<jobId>`). */
  readonly id: string;
  /** The model to report when the result names none. */
  readonly model: string;
}

/**
 * A job's result as a Messages API response. The result is normally the
 * normalized completion (`content` text, or a parsed JSON value sent as its
 * text; `tool_calls` become `tool_use` blocks); a result given by an explicit
 * resolve without `content` is the text as a whole.
 *
 * @example chatResultToMessagesResponse(job.result, { id: `msg_${job.id}`, model: 'chat' }).content // [{ type: 'text', text: '…' }]
 */
export function chatResultToMessagesResponse(result: unknown, options: MessagesResponseOptions): AnthropicMessage {
  const c = normalizedOf(result, options.model);
  const content: AnthropicContentBlock[] = [];
  const text = c.content + (c.refusal !== undefined && c.content === '' ? c.refusal : '');
  if (text !== '' || (c.tool_calls ?? []).length === 0) content.push({ type: 'text', text, citations: null });
  for (const call of c.tool_calls ?? []) {
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: parseArguments(call.function.arguments), caller: { type: 'direct' } } as AnthropicContentBlock);
  }
  return {
    id: options.id,
    type: 'message',
    role: 'assistant',
    model: c.model,
    content,
    stop_reason: FINISH_TO_STOP_REASON[c.finish_reason] ?? 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: c.usage.prompt_tokens, output_tokens: c.usage.completion_tokens, cache_creation_input_tokens: null, cache_read_input_tokens: null },
  } as unknown as AnthropicMessage;
}

/** The content block a {@link MessagesStreamEncoder} has open. */
type OpenBlock = { readonly kind: 'text' } | { readonly kind: 'tool'; readonly index: number };

/**
 * Normalized deltas → Anthropic's stream events. Call {@link start} once,
 * {@link delta} per delta, {@link finish} at the end; each returns the events
 * to send in order. A stored result replays with {@link replay}.
 *
 * @example
 * const enc = new MessagesStreamEncoder({ id: `msg_${jobId}`, model: 'chat' });
 * for (const e of [...enc.start(), ...enc.delta({ type: 'text', text: 'Hi' }), ...enc.finish()]) res.write(messagesSseEvent(e));
 */
export class MessagesStreamEncoder {
  readonly #options: MessagesResponseOptions;
  #model: string;
  #open: OpenBlock | null = null;
  #blockIndex = -1;
  #finish = 'stop';
  #usage = { prompt_tokens: 0, completion_tokens: 0 };
  #started = false;

  constructor(options: MessagesResponseOptions) {
    this.#options = options;
    this.#model = options.model;
  }

  /** `message_start` (with the model and the usage known so far). */
  start(model?: string): AnthropicStreamEvent[] {
    if (this.#started) return [];
    this.#started = true;
    if (model !== undefined) this.#model = model;
    return [
      {
        type: 'message_start',
        message: {
          id: this.#options.id,
          type: 'message',
          role: 'assistant',
          model: this.#model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: this.#usage.prompt_tokens, output_tokens: 0 },
        },
      } as unknown as AnthropicStreamEvent,
    ];
  }

  /** The events for one delta (`content_block_start`/`_delta`/`_stop` as blocks open and close). */
  delta(d: ChatDelta): AnthropicStreamEvent[] {
    const out: AnthropicStreamEvent[] = [];
    if (d.type === 'model') {
      if (!this.#started) this.#model = d.model;
      return out;
    }
    if (d.type === 'finish') {
      this.#finish = d.finish_reason;
      return out;
    }
    if (d.type === 'usage') {
      this.#usage = { prompt_tokens: d.usage.prompt_tokens, completion_tokens: d.usage.completion_tokens };
      return out;
    }
    if (d.type === 'logprobs') return out;
    out.push(...this.start());
    if (d.type === 'text' || d.type === 'refusal') {
      if (this.#open?.kind !== 'text') out.push(...this.#close(), ...this.#openBlock({ type: 'text', text: '', citations: null }, { kind: 'text' }));
      if (d.text !== '') out.push({ type: 'content_block_delta', index: this.#blockIndex, delta: { type: 'text_delta', text: d.text } } as AnthropicStreamEvent);
      return out;
    }
    // tool_call
    if (this.#open?.kind !== 'tool' || this.#open.index !== d.index) {
      out.push(
        ...this.#close(),
        ...this.#openBlock({ type: 'tool_use', id: d.id ?? `toolu_${this.#options.id}_${d.index}`, name: d.name ?? '', input: {} }, { kind: 'tool', index: d.index }),
      );
    }
    if (d.arguments !== undefined && d.arguments !== '') {
      out.push({ type: 'content_block_delta', index: this.#blockIndex, delta: { type: 'input_json_delta', partial_json: d.arguments } } as AnthropicStreamEvent);
    }
    return out;
  }

  /** Closes the open block, then `message_delta` (stop reason, usage) and `message_stop`. */
  finish(): AnthropicStreamEvent[] {
    return [
      ...this.start(),
      ...this.#close(),
      {
        type: 'message_delta',
        delta: { stop_reason: FINISH_TO_STOP_REASON[this.#finish] ?? 'end_turn', stop_sequence: null },
        usage: { input_tokens: this.#usage.prompt_tokens, output_tokens: this.#usage.completion_tokens },
      } as unknown as AnthropicStreamEvent,
      { type: 'message_stop' },
    ];
  }

  /** The whole event sequence of a stored result (a replay). */
  replay(result: unknown): AnthropicStreamEvent[] {
    const c = normalizedOf(result, this.#options.model);
    const deltas = completionDeltas(c);
    const usage = deltas.find((d) => d.type === 'usage');
    if (usage !== undefined) this.delta(usage);
    return [...this.start(c.model), ...deltas.flatMap((d) => this.delta(d)), ...this.finish()];
  }

  #openBlock(block: Record<string, unknown>, open: OpenBlock): AnthropicStreamEvent[] {
    this.#blockIndex += 1;
    this.#open = open;
    return [{ type: 'content_block_start', index: this.#blockIndex, content_block: block } as unknown as AnthropicStreamEvent];
  }

  #close(): AnthropicStreamEvent[] {
    if (this.#open === null) return [];
    this.#open = null;
    return [{ type: 'content_block_stop', index: this.#blockIndex }];
  }
}

/**
 * One Anthropic stream event as SSE text: `event: <type>` and `data: <json>`.
 *
 * @example messagesSseEvent({ type: 'message_stop' }) // 'event: message_stop\ndata: {"type":"message_stop"}\n\n'
 */
export function messagesSseEvent(event: AnthropicStreamEvent | { readonly type: 'error'; readonly error: unknown }): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** A job's result as a normalized completion (a resolve's arbitrary JSON is its text). */
export function normalizedOf(result: unknown, model: string): NormalizedCompletion {
  const r = isRecord(result) && Object.hasOwn(result, 'content') ? result : null;
  const value = r === null ? result : r.content;
  const usage = isRecord(r?.usage) ? r.usage : {};
  const n = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0);
  return {
    content: typeof value === 'string' ? value : JSON.stringify(value ?? null),
    finish_reason: typeof r?.finish_reason === 'string' && r.finish_reason !== '' ? r.finish_reason : 'stop',
    model: typeof r?.model === 'string' && r.model !== '' ? r.model : model,
    provider: typeof r?.provider === 'string' ? r.provider : '',
    usage: { prompt_tokens: n(usage.prompt_tokens), completion_tokens: n(usage.completion_tokens), total_tokens: n(usage.total_tokens) || n(usage.prompt_tokens) + n(usage.completion_tokens) },
    tool_calls: Array.isArray(r?.tool_calls) && r.tool_calls.length > 0 ? (r.tool_calls as OpenAIToolCall[]) : null,
    ...(typeof r?.refusal === 'string' ? { refusal: r.refusal } : {}),
  };
}

function textOf(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  let text = '';
  for (const block of content) {
    if (!isRecord(block) || block.type !== 'text' || typeof block.text !== 'string') return null;
    text += block.text;
  }
  return text;
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}
