/**
 * The outbound direction of the OpenAI Responses API (CONTRACT §11's
 * `openai-responses` provider type): a chat job's input (an OpenAI Chat
 * Completions request) as a Responses request, and a Responses `Response`
 * as the deltas a chat answer reads as. Typed from the `openai` package's
 * Responses types (STYLE example 20). The inbound direction (the
 * `/v1/responses` endpoint) is its own module.
 *
 * Members Chat Completions has and Responses cannot express (`n`, `stop`,
 * `logprobs`, penalties, `seed`, `logit_bias`, audio) are listed by
 * {@link responsesUnsupportedMembers}: the router skips the provider for
 * them rather than drop them.
 */
import type {
  EasyInputMessage,
  FunctionTool,
  Response,
  ResponseCreateParamsBase,
  ResponseInputItem,
} from 'openai/resources/responses/responses';
import type { ChatDelta, ChatRequest } from '../providers/provider.ts';
import { usageOf } from '../providers/completion-accumulator.ts';

/** Chat members the Responses API has no equivalent for. */
export const RESPONSES_UNSUPPORTED_MEMBERS: readonly string[] = [
  'n', 'stop', 'logprobs', 'top_logprobs', 'presence_penalty', 'frequency_penalty', 'seed', 'logit_bias', 'audio', 'modalities', 'prediction', 'thinking',
];

/**
 * The members of a chat input a Responses upstream cannot express.
 *
 * @example responsesUnsupportedMembers({ messages, n: 2 }) // ['n']
 */
export function responsesUnsupportedMembers(input: ChatRequest): string[] {
  return RESPONSES_UNSUPPORTED_MEMBERS.filter((m) => input[m] !== undefined && input[m] !== null && !(m === 'n' && input[m] === 1) && !(m === 'logprobs' && input[m] === false));
}

/**
 * A chat request as a Responses request body (without `model`, `background`,
 * `store`, `metadata`: the provider adds them).
 *
 * @example chatToResponsesRequest({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 })
 * // { input: [{ role: 'user', content: 'hi' }], max_output_tokens: 50 }
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
  else if (typeof choice === 'object' && choice !== null && (choice as { function?: { name?: string } }).function?.name) {
    body.tool_choice = { type: 'function', name: (choice as { function: { name: string } }).function.name };
  }
  const format = input.response_format as { type?: string; json_schema?: { name: string; schema?: unknown; strict?: boolean | null } } | undefined;
  if (format?.type === 'json_schema' && format.json_schema) {
    body.text = { format: { type: 'json_schema', name: format.json_schema.name, schema: format.json_schema.schema ?? {}, strict: format.json_schema.strict ?? null } };
  } else if (format?.type === 'json_object') body.text = { format: { type: 'json_object' } };
  if (typeof input.parallel_tool_calls === 'boolean') body.parallel_tool_calls = input.parallel_tool_calls;
  if (typeof input.user === 'string') body.user = input.user;
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
