/**
 * The outbound direction of the OpenAI Responses API (CONTRACT §11's
 * `openai-responses` provider type): a chat job's input (an OpenAI Chat
 * Completions request) as a Responses request, and a Responses `Response`,
 * or its event stream ({@link ResponsesStreamReader}), as the deltas a chat
 * answer reads as. Typed from the `openai` package's Responses types (STYLE
 * example 20). Only this provider uses it; the inbound direction (the
 * `/v1/responses` endpoint) is `src/protocols/openai-responses.ts`.
 *
 * What is sent is an ALLOW-list (CONTRACT §15): the members
 * {@link chatToResponsesRequest} carries, each with its Responses spelling
 * (docs/providers.md). Any other member with a value, and any value of a
 * carried one it cannot pass on as given (`store: false`: this provider's
 * lookup needs the response stored; a custom tool; a message part it has no
 * input type for), is named by {@link responsesUnsupportedMembers}: the
 * router skips the provider with `unsupported:<member>` rather than drop it.
 */
import type {
  EasyInputMessage,
  FunctionTool,
  Response,
  ResponseCreateParamsBase,
  ResponseInputItem,
  ResponseStreamEvent,
} from 'openai/resources/responses/responses';
import type { ChatDelta, ChatRequest } from '../provider.ts';
import { usageOf } from '../completion-accumulator.ts';

/** The metadata member the provider tags every response with (its lookup asks by it). */
export const RESPONSES_ATTEMPT_METADATA_KEY = 'onejob_attempt_id';

/**
 * Chat members a Responses request carries (see {@link chatToResponsesRequest}):
 * the allow-list. `stream`, `stream_options` and `model` are the provider's own.
 */
export const RESPONSES_CARRIED_MEMBERS: ReadonlySet<string> = new Set([
  'messages', 'temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'tools', 'tool_choice', 'response_format',
  'parallel_tool_calls', 'user', 'safety_identifier', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention',
  'reasoning_effort', 'verbosity', 'metadata', 'store',
  'stream', 'stream_options', 'model',
]);

/** Members whose value asks for nothing beyond the default: expressible by sending nothing. */
const NEUTRAL_VALUES: Readonly<Record<string, (v: unknown) => boolean>> = {
  n: (v) => v === 1,
  logprobs: (v) => v === false,
  frequency_penalty: (v) => v === 0,
  presence_penalty: (v) => v === 0,
  logit_bias: (v) => typeof v === 'object' && v !== null && Object.keys(v).length === 0,
  modalities: (v) => Array.isArray(v) && v.every((m) => m === 'text'),
};

/** Content part types of a chat message the translation has a Responses input type for. */
const CARRIED_PARTS = new Set(['text', 'image_url']);

/**
 * The members of a (valid) chat input a Responses upstream cannot be sent as
 * given, by name: top-level members not on the allow-list (`n`, `stop`,
 * `seed`, `audio`, `web_search_options`, …), `store` when `false` (the
 * provider stores every response: its lookup reads it back), a `metadata`
 * that is not an object of strings or that sets the provider's own key, and
 * inside messages and tools `messages.role.function`, `messages.name`,
 * `messages.function_call`, `messages.audio`, `messages.content.<part type>`,
 * `messages.tool_calls.<type>`, `tools.<type>`, `tool_choice.<type>`,
 * `tool_choice.allowed_tools.<type>`, `response_format.<type>`. Null members
 * and neutral values (`n: 1`, `logprobs: false`, …) are fine.
 *
 * @example responsesUnsupportedMembers({ messages, n: 2, store: false, seed: 7 }) // ['n', 'store', 'seed']
 */
export function responsesUnsupportedMembers(input: ChatRequest): string[] {
  const out = new Set<string>();
  for (const [key, value] of Object.entries(input)) {
    if (value === null || value === undefined) continue;
    if (RESPONSES_CARRIED_MEMBERS.has(key)) continue;
    if (NEUTRAL_VALUES[key]?.(value) === true) continue;
    out.add(key);
  }
  if (input.store === false) out.add('store');
  const metadata = input.metadata as unknown;
  if (metadata !== undefined && metadata !== null) {
    if (typeof metadata !== 'object' || Array.isArray(metadata) || !Object.values(metadata).every((v) => typeof v === 'string')) out.add('metadata');
    else if (Object.hasOwn(metadata, RESPONSES_ATTEMPT_METADATA_KEY)) out.add(`metadata.${RESPONSES_ATTEMPT_METADATA_KEY}`);
  }
  for (const m of input.messages) {
    const message = m as unknown as Record<string, unknown>;
    if (message.role === 'function') out.add('messages.role.function');
    if (typeof message.name === 'string') out.add('messages.name');
    if (message.function_call !== undefined && message.function_call !== null) out.add('messages.function_call');
    if (message.audio !== undefined && message.audio !== null) out.add('messages.audio');
    if (Array.isArray(message.content)) {
      for (const part of message.content as { type?: unknown }[]) {
        const type = String(part?.type);
        // An assistant's refusal part is its text, as the translation reads it.
        if (!CARRIED_PARTS.has(type) && !(type === 'refusal' && message.role === 'assistant')) out.add(`messages.content.${type}`);
      }
    }
    for (const call of (Array.isArray(message.tool_calls) ? message.tool_calls : []) as { type?: unknown }[]) {
      if (call?.type !== undefined && call.type !== 'function') out.add(`messages.tool_calls.${String(call.type)}`);
    }
  }
  for (const tool of (Array.isArray(input.tools) ? input.tools : []) as { type?: unknown }[]) {
    if (tool?.type !== 'function') out.add(`tools.${String(tool?.type)}`);
  }
  const choice = input.tool_choice as unknown;
  if (typeof choice === 'object' && choice !== null) {
    const c = choice as { type?: unknown; allowed_tools?: { tools?: unknown } };
    if (c.type === 'allowed_tools') {
      for (const t of (Array.isArray(c.allowed_tools?.tools) ? c.allowed_tools.tools : []) as { type?: unknown }[]) {
        if (t?.type !== 'function') out.add(`tool_choice.allowed_tools.${String(t?.type)}`);
      }
    } else if (c.type !== 'function') out.add(`tool_choice.${String(c.type)}`);
  }
  const format = input.response_format as { type?: unknown } | undefined | null;
  if (format !== undefined && format !== null && format.type !== 'text' && format.type !== 'json_schema' && format.type !== 'json_object') {
    out.add(`response_format.${String(format.type)}`);
  }
  return [...out];
}

/**
 * A chat request as a Responses request body (without `model`, `background`
 * and `store`, which the provider sets, and with the caller's `metadata`
 * only: the provider adds its own key). Check {@link responsesUnsupportedMembers}
 * first: what it names is not translated here.
 *
 * @example chatToResponsesRequest({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 50, reasoning_effort: 'low' })
 * // { input: [{ role: 'user', content: 'hi' }], max_output_tokens: 50, reasoning: { effort: 'low' } }
 */
export function chatToResponsesRequest(input: ChatRequest): Omit<ResponseCreateParamsBase, 'model'> {
  const items: ResponseInputItem[] = [];
  for (const m of input.messages) {
    const message = m as unknown as Record<string, unknown>;
    const role = message.role;
    if (role === 'tool') {
      items.push({ type: 'function_call_output', call_id: String(message.tool_call_id ?? ''), output: textOf(message.content) });
      continue;
    }
    if (role === 'assistant') {
      const text = textOf(message.content);
      if (text !== '') items.push({ role: 'assistant', content: text } satisfies EasyInputMessage);
      for (const call of (message.tool_calls as { id?: string; function?: { name?: string; arguments?: string } }[] | undefined) ?? []) {
        items.push({ type: 'function_call', call_id: call.id ?? '', name: call.function?.name ?? '', arguments: call.function?.arguments ?? '{}' });
      }
      continue;
    }
    const r = role === 'system' || role === 'developer' ? role : 'user';
    items.push({ role: r, content: contentOf(message.content) } as EasyInputMessage);
  }
  const body: Record<string, unknown> = { input: items };
  if (typeof input.temperature === 'number') body.temperature = input.temperature;
  if (typeof input.top_p === 'number') body.top_p = input.top_p;
  const max = input.max_completion_tokens ?? input.max_tokens;
  if (typeof max === 'number') body.max_output_tokens = max;
  if (Array.isArray(input.tools)) {
    body.tools = input.tools
      .filter((t) => (t as { type?: string }).type === 'function')
      .map((t) => {
        const f = (t as { function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null } }).function;
        return { type: 'function', name: f.name, description: f.description ?? null, parameters: f.parameters ?? null, strict: f.strict ?? null } satisfies FunctionTool;
      });
  }
  const choice = input.tool_choice as unknown;
  if (choice === 'auto' || choice === 'none' || choice === 'required') body.tool_choice = choice;
  else if (typeof choice === 'object' && choice !== null) {
    const c = choice as { type?: string; function?: { name?: string }; allowed_tools?: { mode?: string; tools?: { function?: { name?: string } }[] } };
    if (c.type === 'allowed_tools' && c.allowed_tools) {
      body.tool_choice = { type: 'allowed_tools', mode: c.allowed_tools.mode, tools: (c.allowed_tools.tools ?? []).map((t) => ({ type: 'function', name: t.function?.name ?? '' })) };
    } else if (c.function?.name) body.tool_choice = { type: 'function', name: c.function.name };
  }
  const text: Record<string, unknown> = {};
  const format = input.response_format as { type?: string; json_schema?: { name: string; description?: string; schema?: unknown; strict?: boolean | null } } | undefined;
  if (format?.type === 'json_schema' && format.json_schema) {
    const s = format.json_schema;
    text.format = { type: 'json_schema', name: s.name, ...(typeof s.description === 'string' ? { description: s.description } : {}), schema: s.schema ?? {}, strict: s.strict ?? null };
  } else if (format?.type === 'json_object') text.format = { type: 'json_object' };
  if (typeof input.verbosity === 'string') text.verbosity = input.verbosity;
  if (Object.keys(text).length > 0) body.text = text;
  if (typeof input.reasoning_effort === 'string') body.reasoning = { effort: input.reasoning_effort };
  if (typeof input.parallel_tool_calls === 'boolean') body.parallel_tool_calls = input.parallel_tool_calls;
  for (const key of ['user', 'safety_identifier', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention'] as const) {
    if (typeof input[key] === 'string') body[key] = input[key];
  }
  const metadata = input.metadata as unknown;
  if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) body.metadata = { ...metadata };
  return body as Omit<ResponseCreateParamsBase, 'model'>;
}

/**
 * A completed `Response` as the deltas of a chat answer (text, refusal,
 * function calls as tool calls, usage), or why it is not one.
 */
export function responseDeltas(response: unknown): ChatDelta[] | { readonly malformed: string } {
  if (typeof response !== 'object' || response === null) return { malformed: 'not an object' };
  const r = response as Partial<Response>;
  if (!Array.isArray(r.output)) return { malformed: 'no output' };
  const deltas: ChatDelta[] = [];
  if (typeof r.model === 'string' && r.model !== '') deltas.push({ type: 'model', model: r.model });
  let calls = 0;
  for (const item of r.output) {
    if (item.type === 'message') {
      for (const part of item.content) {
        if (part.type === 'output_text' && part.text !== '') deltas.push({ type: 'text', text: part.text });
        else if (part.type === 'refusal') deltas.push({ type: 'refusal', text: part.refusal });
      }
    } else if (item.type === 'function_call') {
      deltas.push({ type: 'tool_call', index: calls++, id: item.call_id, name: item.name, arguments: item.arguments });
    }
  }
  deltas.push({ type: 'finish', finish_reason: calls > 0 ? 'tool_calls' : 'stop' });
  const u = r.usage;
  deltas.push({ type: 'usage', usage: usageOf(u?.input_tokens, u?.output_tokens, u?.total_tokens) });
  return deltas;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p: { text?: unknown }) => (typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

/** A user/system message's content: a string stays one; parts become Responses input parts. */
function contentOf(content: unknown): EasyInputMessage['content'] {
  if (!Array.isArray(content)) return textOf(content);
  return content.map((p: { type?: string; text?: string; image_url?: { url?: string; detail?: 'low' | 'high' | 'auto' } }) =>
    p.type === 'image_url'
      ? { type: 'input_image' as const, image_url: p.image_url?.url ?? '', detail: p.image_url?.detail ?? 'auto' }
      : { type: 'input_text' as const, text: p.text ?? '' },
  ) as EasyInputMessage['content'];
}

/** What one event of a Responses stream means to the attempt that follows it. */
export type ResponsesStreamStep =
  /** An event already seen (its `sequence_number` is not past the cursor): skipped, as a resume after `starting_after` must. */
  | { readonly kind: 'seen' }
  /** An event to apply: its deltas (possibly none), and the response id when it names one. */
  | { readonly kind: 'event'; readonly deltas: readonly ChatDelta[]; readonly responseId?: string | undefined }
  /** `response.completed`: the final Response (its usage and finish are in `deltas`). */
  | { readonly kind: 'completed'; readonly deltas: readonly ChatDelta[]; readonly response: unknown }
  /** `response.failed` / `response.incomplete`: the response ended without an answer. */
  | { readonly kind: 'failed'; readonly status: string; readonly details: unknown }
  /** An `error` event: this connection is over; the response itself may still run. */
  | { readonly kind: 'error'; readonly message: string }
  /** The event cannot be read. */
  | { readonly kind: 'malformed'; readonly reason: string };

/**
 * Reads the server-sent events of one Responses API response across every
 * connection that follows it (the create's stream, then each resume with
 * `starting_after`), as chat deltas: text and refusal deltas, function calls
 * as tool calls (numbered by their order among the function-call items),
 * the model, and at `response.completed` the usage and finish. It keeps the
 * cursor (the last `sequence_number` applied): events at or before it are
 * `seen` and skipped, so a server that replays from the start on a resume
 * never doubles the text. Pure.
 *
 * @example
 * const reader = new ResponsesStreamReader();
 * reader.read('{"type":"response.output_text.delta","sequence_number":3,"delta":"Hi",…}') // { kind: 'event', deltas: [{ type: 'text', text: 'Hi' }] }
 * reader.cursor // 3: resume with ?stream=true&starting_after=3
 */
export class ResponsesStreamReader {
  #cursor = -1;
  #calls = 0;
  readonly #callOfOutput = new Map<number, number>();
  #modelSent = false;

  /** The `sequence_number` of the last event applied; -1 before the first. */
  get cursor(): number {
    return this.#cursor;
  }

  /** One SSE event's `data`. */
  read(data: string): ResponsesStreamStep {
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(data) as Record<string, unknown>;
    } catch {
      return { kind: 'malformed', reason: 'an event that is not JSON' };
    }
    if (typeof event !== 'object' || event === null || typeof event.type !== 'string') return { kind: 'malformed', reason: 'an event without a type' };
    const seq = event.sequence_number;
    if (typeof seq === 'number') {
      if (seq <= this.#cursor) return { kind: 'seen' };
      this.#cursor = seq;
    }
    const e = event as unknown as ResponseStreamEvent;
    switch (e.type) {
      case 'response.created':
      case 'response.queued':
      case 'response.in_progress':
        return { kind: 'event', deltas: this.#model(e.response), responseId: e.response?.id };
      case 'response.output_item.added': {
        if (e.item.type !== 'function_call') return { kind: 'event', deltas: [] };
        const index = this.#calls++;
        this.#callOfOutput.set(e.output_index, index);
        return { kind: 'event', deltas: [{ type: 'tool_call', index, id: e.item.call_id, name: e.item.name, ...(e.item.arguments ? { arguments: e.item.arguments } : {}) }] };
      }
      case 'response.function_call_arguments.delta': {
        const index = this.#callOfOutput.get(e.output_index);
        if (index === undefined) return { kind: 'malformed', reason: `arguments for output ${e.output_index}, which is not a function call` };
        return { kind: 'event', deltas: e.delta === '' ? [] : [{ type: 'tool_call', index, arguments: e.delta }] };
      }
      case 'response.output_text.delta':
        return { kind: 'event', deltas: e.delta === '' ? [] : [{ type: 'text', text: e.delta }] };
      case 'response.refusal.delta':
        return { kind: 'event', deltas: e.delta === '' ? [] : [{ type: 'refusal', text: e.delta }] };
      case 'response.completed': {
        const u = e.response.usage;
        return {
          kind: 'completed',
          response: e.response,
          deltas: [
            ...this.#model(e.response),
            { type: 'finish', finish_reason: this.#calls > 0 ? 'tool_calls' : 'stop' },
            { type: 'usage', usage: usageOf(u?.input_tokens, u?.output_tokens, u?.total_tokens) },
          ],
        };
      }
      case 'response.failed':
      case 'response.incomplete':
        return { kind: 'failed', status: e.response.status ?? (e.type === 'response.failed' ? 'failed' : 'incomplete'), details: e.response.error ?? e.response.incomplete_details ?? null };
      case 'error':
        return { kind: 'error', message: e.message };
      default:
        return { kind: 'event', deltas: [] };
    }
  }

  #model(response: Partial<Response> | undefined): ChatDelta[] {
    if (this.#modelSent || typeof response?.model !== 'string' || response.model === '') return [];
    this.#modelSent = true;
    return [{ type: 'model', model: response.model }];
  }
}
