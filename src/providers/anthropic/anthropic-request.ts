/**
 * OpenAI Chat Completions request → Anthropic Messages request: what the
 * `anthropic` adapter sends for a chat job's input, and the members it cannot
 * express (so the router skips it with `unsupported:<member>` instead of
 * dropping them). The translation table is in `docs/providers.md`.
 */
import { contentText } from '../chat-request.ts';
import type { ChatMessage, ChatRequest } from '../provider.ts';
import type {
  AnthropicContentBlockParam,
  AnthropicMessageParam,
  AnthropicRequestBody,
  AnthropicTool,
  AnthropicToolChoice,
} from '../wire-types.ts';

/** `max_tokens` when neither the input nor `maxOutputTokens` gives one. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

/**
 * Request members the translation carries (with their Anthropic
 * equivalents, see `docs/providers.md`). Anything else with a value is
 * unsupported, except {@link NEUTRAL_VALUES}.
 */
const TRANSLATED_MEMBERS = new Set([
  'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'user', 'safety_identifier',
  'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'thinking',
  // transport: the adapter sets these itself
  'stream', 'stream_options', 'model',
]);

/** Members whose value asks for nothing beyond the default: expressible by sending nothing. */
const NEUTRAL_VALUES: Readonly<Record<string, (v: unknown) => boolean>> = {
  n: (v) => v === 1,
  logprobs: (v) => v === false,
  store: (v) => v === false,
  frequency_penalty: (v) => v === 0,
  presence_penalty: (v) => v === 0,
  logit_bias: (v) => typeof v === 'object' && v !== null && Object.keys(v).length === 0,
  modalities: (v) => Array.isArray(v) && v.every((m) => m === 'text'),
};

/**
 * The members of a (valid) chat input the Messages API cannot express, by
 * name: top-level members (`logprobs`, `n`, `seed`, …), and inside messages
 * and tools `messages.name`, `messages.role.function`,
 * `messages.content.<part type>`, `messages.function_call`, `messages.audio`,
 * `tools.<type>`, `tool_choice.<type>`, `response_format.json_object`.
 * Null members and neutral values (`n: 1`, `logprobs: false`, …) are fine.
 *
 * @example unsupportedAnthropicMembers({ messages, logprobs: true, n: 2, seed: 7 }) // ['logprobs', 'n', 'seed']
 */
export function unsupportedAnthropicMembers(input: ChatRequest): string[] {
  const out = new Set<string>();
  for (const [key, value] of Object.entries(input)) {
    if (value === null || value === undefined || TRANSLATED_MEMBERS.has(key)) continue;
    if (NEUTRAL_VALUES[key]?.(value) === true) continue;
    out.add(key);
  }
  for (const m of input.messages) {
    const message = m as Record<string, unknown>;
    if (message.role === 'function') out.add('messages.role.function');
    if (typeof message.name === 'string') out.add('messages.name');
    if (message.function_call !== undefined && message.function_call !== null) out.add('messages.function_call');
    if (message.audio !== undefined && message.audio !== null) out.add('messages.audio');
    if (Array.isArray(message.content)) {
      for (const part of message.content as { type?: unknown }[]) {
        const type = String(part?.type);
        if (type !== 'text' && type !== 'image_url' && type !== 'refusal') out.add(`messages.content.${type}`);
      }
    }
  }
  for (const tool of (input.tools ?? []) as { type?: unknown }[]) {
    if (tool?.type !== 'function') out.add(`tools.${String(tool?.type)}`);
  }
  const choice = input.tool_choice as unknown;
  if (typeof choice === 'object' && choice !== null) {
    const type = (choice as { type?: unknown }).type;
    if (type !== 'function') out.add(`tool_choice.${String(type)}`);
  }
  const format = input.response_format as { type?: unknown } | undefined | null;
  if (format?.type === 'json_object') out.add('response_format.json_object');
  else if (format !== undefined && format !== null && format.type !== 'text' && format.type !== 'json_schema') out.add(`response_format.${String(format.type)}`);
  return [...out];
}

/**
 * Translates a chat input (OpenAI shape) into a Messages API body, or says why
 * it cannot. Check {@link unsupportedAnthropicMembers} first: members it
 * lists are not translated here.
 *
 * @example buildAnthropicRequestBody({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }, 'claude-x')
 * // { body: { model: 'claude-x', max_tokens: 4096, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] } }
 */
export function buildAnthropicRequestBody(
  input: ChatRequest,
  model: string,
  maxOutputTokens?: number,
  stream = false,
): { readonly body: AnthropicRequestBody } | { readonly error: string } {
  const system: string[] = [];
  const messages: AnthropicMessageParam[] = [];
  const push = (role: 'user' | 'assistant', blocks: AnthropicContentBlockParam[] | string) => {
    const last = messages[messages.length - 1];
    if (last !== undefined && last.role === role) {
      // Consecutive turns of one role (e.g. several tool results) become one message.
      last.content = [...asBlocks(last.content), ...asBlocks(blocks)];
    } else {
      messages.push({ role, content: blocks });
    }
  };
  for (const [i, m] of input.messages.entries()) {
    const message = m as ChatMessage & Record<string, unknown>;
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(contentText(message.content));
        break;
      case 'user': {
        const content = userContent(message.content, i);
        if ('error' in content) return content;
        push('user', content.content);
        break;
      }
      case 'assistant': {
        const blocks: AnthropicContentBlockParam[] = [];
        const text = contentText(message.content);
        if (text !== '') blocks.push({ type: 'text', text });
        if (typeof message.refusal === 'string' && message.refusal !== '' && text === '') blocks.push({ type: 'text', text: message.refusal });
        for (const [j, call] of (message.tool_calls ?? []).entries()) {
          if (call.type !== 'function') return { error: `messages[${i}].tool_calls[${j}]: only function tool calls can be translated` };
          let args: unknown;
          try {
            args = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
          } catch {
            return { error: `messages[${i}].tool_calls[${j}].function.arguments is not JSON` };
          }
          blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: args });
        }
        // Anthropic refuses an empty assistant turn; an assistant message with nothing in it says nothing.
        if (blocks.length > 0) push('assistant', blocks.length === 1 && blocks[0]?.type === 'text' && typeof message.content === 'string' ? text : blocks);
        break;
      }
      case 'tool': {
        const toolCallId = message.tool_call_id as string;
        push('user', [{ type: 'tool_result', tool_use_id: toolCallId, content: contentText(message.content) }]);
        break;
      }
      default:
        return { error: `messages[${i}]: role ${JSON.stringify(message.role)} cannot be translated to the Messages API` };
    }
  }
  if (messages.length === 0) return { error: 'messages must include at least one user or assistant message' };

  const body: { -readonly [K in keyof AnthropicRequestBody]: AnthropicRequestBody[K] } = {
    model,
    max_tokens: numberOr(input.max_tokens, numberOr(input.max_completion_tokens, maxOutputTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS)),
    messages,
  };
  if (system.length > 0) body.system = system.join('\n\n');
  if (typeof input.temperature === 'number') body.temperature = input.temperature;
  if (typeof input.top_p === 'number') body.top_p = input.top_p;
  if (typeof input.top_k === 'number') body.top_k = input.top_k;
  if (input.stop !== undefined && input.stop !== null) body.stop_sequences = typeof input.stop === 'string' ? [input.stop] : [...input.stop];
  const userId = typeof input.safety_identifier === 'string' ? input.safety_identifier : typeof input.user === 'string' ? input.user : undefined;
  if (userId !== undefined) body.metadata = { user_id: userId };
  if (Array.isArray(input.tools) && input.tools.length > 0) {
    const tools: AnthropicTool[] = [];
    for (const tool of input.tools) {
      if (tool.type !== 'function') return { error: `tools: a ${tool.type} tool cannot be translated` };
      const schema = (tool.function.parameters ?? { type: 'object', properties: {} }) as AnthropicTool['input_schema'];
      tools.push({
        name: tool.function.name,
        ...(tool.function.description === undefined ? {} : { description: tool.function.description }),
        input_schema: { ...schema, type: 'object' },
        ...(typeof tool.function.strict === 'boolean' ? { strict: tool.function.strict } : {}),
      });
    }
    body.tools = tools;
  }
  const choice = toolChoice(input);
  if (choice !== undefined) body.tool_choice = choice;
  const format = input.response_format;
  if (format?.type === 'json_schema') {
    body.output_config = { format: { type: 'json_schema', schema: format.json_schema.schema ?? {} } };
  }
  if (input.thinking !== undefined && input.thinking !== null) body.thinking = input.thinking as AnthropicRequestBody['thinking'];
  if (stream) body.stream = true;
  return { body };
}

/**
 * OpenAI `tool_choice` (+ `parallel_tool_calls: false`) → Anthropic's:
 * `auto` → auto, `none` → none, `required` → any, a named function → tool.
 */
function toolChoice(input: ChatRequest): AnthropicToolChoice | undefined {
  const noParallel = input.parallel_tool_calls === false;
  const choice = input.tool_choice;
  const parallel = noParallel ? { disable_parallel_tool_use: true } : {};
  if (choice === undefined || choice === null) return noParallel && Array.isArray(input.tools) && input.tools.length > 0 ? { type: 'auto', ...parallel } : undefined;
  if (choice === 'none') return { type: 'none' };
  if (choice === 'auto') return { type: 'auto', ...parallel };
  if (choice === 'required') return { type: 'any', ...parallel };
  if (typeof choice === 'object' && choice.type === 'function') return { type: 'tool', name: choice.function.name, ...parallel };
  return undefined; // listed by unsupportedAnthropicMembers
}

type UserContent = { content: string | AnthropicContentBlockParam[] } | { error: string };

function userContent(content: ChatMessage['content'], i: number): UserContent {
  if (typeof content === 'string') return { content };
  if (!Array.isArray(content)) return { content: '' };
  const blocks: AnthropicContentBlockParam[] = [];
  for (const [j, part] of (content as { type: string; text?: string; refusal?: string; image_url?: { url?: string } }[]).entries()) {
    if (part.type === 'text') blocks.push({ type: 'text', text: part.text ?? '' });
    else if (part.type === 'refusal') blocks.push({ type: 'text', text: part.refusal ?? '' });
    else if (part.type === 'image_url') {
      const url = part.image_url?.url ?? '';
      const data = /^data:(image\/(?:jpeg|png|gif|webp));base64,(.*)$/s.exec(url);
      if (data !== null) {
        blocks.push({ type: 'image', source: { type: 'base64', media_type: data[1] as 'image/png', data: data[2] ?? '' } });
      } else if (/^https?:\/\//.test(url)) {
        blocks.push({ type: 'image', source: { type: 'url', url } });
      } else {
        return { error: `messages[${i}].content[${j}]: an image must be an http(s) URL or a base64 data URL of a JPEG, PNG, GIF or WebP image` };
      }
    } else return { error: `messages[${i}].content[${j}]: a ${part.type} part cannot be translated to the Messages API` };
  }
  return { content: blocks };
}

function asBlocks(content: AnthropicMessageParam['content']): AnthropicContentBlockParam[] {
  return typeof content === 'string' ? (content === '' ? [] : [{ type: 'text', text: content }]) : content;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}
