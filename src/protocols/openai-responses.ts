/**
 * The Responses API endpoint's translators (CONTRACT §12, `POST
 * /v1/responses`), inbound: pure functions, typed from the `openai`
 * package's own Responses types (STYLE example 20), so that the route stays thin.
 *
 * - {@link responsesRequestToChatInput}: a Responses create body (with the
 *   conversation a `previous_response_id` names, already resolved by the
 *   route) → the internal chat input (OpenAI Chat Completions shape), the job
 *   input every provider type runs; plus the {@link ResponsesRecord} kept on
 *   the job to answer it as a Response later.
 * - {@link conversationOf}: a finished Responses job → the chat messages a
 *   Response that continues it starts with (its input and its output; never
 *   its `instructions`, as OpenAI does).
 * - {@link responseOf}: a job → the Response object (`status` from the job's
 *   state, `output` items from its result).
 * - {@link responseInputItems}: a job's input items, each with an `id`.
 *
 * The event stream is in `openai-responses-stream.ts`. What maps to what,
 * and what is refused, is in `docs/responses-api.md`. The other direction
 * (a chat job sent to an upstream Responses API) is not here.
 */
import type {
  FunctionTool,
  Response,
  ResponseCreateParamsBase,
  ResponseError,
  ResponseFunctionToolCall,
  ResponseInputItem,
  ResponseItem,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseOutputText,
  ResponseStatus,
  ResponseUsage,
  Tool,
} from 'openai/resources/responses/responses';
import type { JobState } from '../core/states.ts';
import type { ChatContentPart, ChatMessage, ChatRequest, NormalizedCompletion } from '../providers/provider.ts';
import type { OpenAIToolCall } from '../providers/wire-types.ts';
import { normalizedOf } from './anthropic-messages.ts';

/** The job metadata member that holds a Responses job's {@link ResponsesRecord}. */
export const RESPONSES_RECORD_KEY = 'onejob:responses';

/** The prefix of a Response id: `resp_<job id>` names exactly one job. */
export const RESPONSE_ID_PREFIX = 'resp_';

/**
 * What a Responses job keeps beside its chat input (in the job's metadata,
 * under {@link RESPONSES_RECORD_KEY}) to answer as a Response: the members
 * a Response echoes, and this request's own input items.
 */
export interface ResponsesRecord {
  /** The request's `model` (a route name or `route:<name>`), reported until a provider names its own. */
  readonly model: string;
  /** The request's members a Response echoes (`instructions`, `tools`, `text`, `metadata`, …): the body without `input`, `stream`, `stream_options`. */
  readonly request: Readonly<Record<string, unknown>>;
  /** This request's input items as sent (a string input as one user message item). */
  readonly input_items: readonly unknown[];
  /** Whether the job input's first message is this request's `instructions` (left out when a later Response continues this one). */
  readonly instructions_first: boolean;
}

/**
 * Members of the create body and what becomes of them: `map` (translated
 * into the chat input), `echo` (kept on the Response only), `onejob`
 * (handled by onejob itself). A member not listed, or listed under
 * {@link REFUSED_MEMBERS}, is refused (422) when it asks for something.
 */
const CARRIED = new Set([
  'model', 'input', 'instructions', 'max_output_tokens', 'temperature', 'top_p', 'tools', 'tool_choice', 'parallel_tool_calls',
  'text', 'reasoning', 'user', 'safety_identifier', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention', 'top_logprobs',
  'include', 'metadata', 'store', 'truncation', 'max_tool_calls', 'previous_response_id', 'stream', 'background', 'stream_options',
]);

/** Members onejob cannot serve on any provider it has, with the reason given to the client. */
const REFUSED_MEMBERS: Readonly<Record<string, string>> = {
  conversation: 'OpenAI conversations live at OpenAI: continue a Response with previous_response_id instead',
  prompt: 'prompt templates live at OpenAI: send the prompt as input and instructions',
  context_management: 'context management is not supported',
};

/** The result of {@link responsesRequestToChatInput}. */
export type ResponsesRequestTranslation =
  | {
      readonly ok: true;
      /** The `model` member: the route name (or `route:<name>`). */
      readonly model: string;
      /** `stream: true`: deliver as server-sent events. */
      readonly stream: boolean;
      /** `background: true`: answer at once, the job runs on. */
      readonly background: boolean;
      /** The job's input (a Responses job always streams from its provider, so any request of it can follow it live). */
      readonly input: ChatRequest;
      /** What the job keeps to answer as a Response. */
      readonly record: ResponsesRecord;
    }
  | {
      readonly ok: false;
      /** The member at fault, dotted (`input[2].type`, `tools[0].type`, `reasoning.summary`, …). */
      readonly member: string;
      readonly message: string;
    };

const fail = (member: string, message: string): ResponsesRequestTranslation => ({ ok: false, member, message });

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const given = (v: unknown): boolean => v !== undefined && v !== null;

/** A failure inside the item translation: the member and the message. */
class ItemError extends Error {
  constructor(readonly member: string, message: string) {
    super(message);
  }
}

/**
 * Translates a Responses create body into the internal chat input, or names
 * the member that is malformed or that onejob cannot serve. `previous` is
 * the conversation `previous_response_id` names ({@link conversationOf}), or
 * null. The members Chat Completions expresses are mapped (see the module
 * docs); those a provider's protocol cannot express stay in the chat input
 * and skip that provider with `unsupported:<member>` (e.g. Anthropic and
 * `reasoning_effort`), never silently.
 *
 * @example
 * responsesRequestToChatInput({ model: 'chat', instructions: 'Be brief.', input: 'Hi' }, null)
 * // { ok: true, model: 'chat', stream: false, background: false,
 * //   input: { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], stream: true }, record: {…} }
 */
export function responsesRequestToChatInput(body: unknown, previous: readonly ChatMessage[] | null): ResponsesRequestTranslation {
  if (!isRecord(body)) return fail('body', 'the body must be a JSON object');
  const b = body as Partial<ResponseCreateParamsBase> & Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (!given(b[key])) continue;
    const refused = REFUSED_MEMBERS[key];
    if (refused !== undefined) return fail(key, `${key} is not supported: ${refused}`);
    if (!CARRIED.has(key)) return fail(key, `${key} is not supported by onejob's Responses endpoint`);
  }
  if (typeof b.model !== 'string' || b.model === '') return fail('model', 'model must be a non-empty string');
  if (b.input === undefined || b.input === null || (Array.isArray(b.input) && b.input.length === 0) || b.input === '') {
    return fail('input', 'input must be a non-empty string or array of items');
  }
  if (typeof b.input !== 'string' && !Array.isArray(b.input)) return fail('input', 'input must be a string or an array of items');

  const messages: ChatMessage[] = [];
  let instructionsFirst = false;
  if (given(b.instructions)) {
    if (typeof b.instructions !== 'string') return fail('instructions', 'instructions must be a string');
    messages.push({ role: 'system', content: b.instructions });
    instructionsFirst = true;
  }
  if (previous !== null) messages.push(...previous);
  const items: unknown[] = typeof b.input === 'string' ? [{ type: 'message', role: 'user', content: b.input }] : b.input;
  try {
    messages.push(...itemsToMessages(items));
  } catch (e) {
    if (e instanceof ItemError) return fail(e.member, e.message);
    throw e;
  }

  const input: Record<string, unknown> = { messages };
  for (const key of ['temperature', 'top_p'] as const) {
    if (!given(b[key])) continue;
    if (typeof b[key] !== 'number') return fail(key, `${key} must be a number`);
    input[key] = b[key];
  }
  if (given(b.max_output_tokens)) {
    if (typeof b.max_output_tokens !== 'number' || !Number.isInteger(b.max_output_tokens) || b.max_output_tokens < 1) {
      return fail('max_output_tokens', 'max_output_tokens must be a positive integer');
    }
    input.max_completion_tokens = b.max_output_tokens;
  }
  for (const key of ['user', 'safety_identifier', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention'] as const) {
    if (!given(b[key])) continue;
    if (typeof b[key] !== 'string') return fail(key, `${key} must be a string`);
    input[key] = b[key];
  }
  if (given(b.parallel_tool_calls)) {
    if (typeof b.parallel_tool_calls !== 'boolean') return fail('parallel_tool_calls', 'parallel_tool_calls must be a boolean');
    input.parallel_tool_calls = b.parallel_tool_calls;
  }
  if (given(b.metadata) && !isRecord(b.metadata)) return fail('metadata', 'metadata must be an object of strings');
  if (given(b.store) && typeof b.store !== 'boolean') return fail('store', 'store must be a boolean');
  if (given(b.truncation) && b.truncation !== 'disabled') return fail('truncation', 'truncation "auto" is not supported: onejob sends the whole conversation');
  if (given(b.max_tool_calls) && (typeof b.max_tool_calls !== 'number' || !Number.isInteger(b.max_tool_calls) || b.max_tool_calls < 1)) {
    return fail('max_tool_calls', 'max_tool_calls must be a positive integer');
  }
  if (given(b.include)) {
    if (!Array.isArray(b.include) || !b.include.every((i) => typeof i === 'string')) return fail('include', 'include must be an array of strings');
    // Every other includable adds data to item types onejob never outputs (reasoning, built-in tool calls): nothing to add.
    if (b.include.includes('message.output_text.logprobs')) input.logprobs = true;
  }
  if (given(b.top_logprobs)) {
    if (typeof b.top_logprobs !== 'number' || !Number.isInteger(b.top_logprobs) || b.top_logprobs < 0) return fail('top_logprobs', 'top_logprobs must be a non-negative integer');
    input.logprobs = true;
    input.top_logprobs = b.top_logprobs;
  }
  if (given(b.reasoning)) {
    if (!isRecord(b.reasoning)) return fail('reasoning', 'reasoning must be an object');
    for (const [k, v] of Object.entries(b.reasoning)) {
      if (!given(v)) continue;
      if (k === 'effort') {
        if (typeof v !== 'string') return fail('reasoning.effort', 'reasoning.effort must be a string');
        input.reasoning_effort = v;
      } else {
        return fail(`reasoning.${k}`, `reasoning.${k} is not supported: Chat Completions providers return no reasoning items`);
      }
    }
  }
  if (given(b.text)) {
    if (!isRecord(b.text)) return fail('text', 'text must be an object');
    for (const [k, v] of Object.entries(b.text)) {
      if (!given(v)) continue;
      if (k === 'verbosity') input.verbosity = v;
      else if (k === 'format') {
        const format = textFormatToResponseFormat(v);
        if (typeof format === 'string') return fail('text.format', format);
        if (format !== null) input.response_format = format;
      } else return fail(`text.${k}`, `text.${k} is not supported`);
    }
  }
  if (given(b.tools)) {
    if (!Array.isArray(b.tools)) return fail('tools', 'tools must be an array');
    const tools: unknown[] = [];
    for (const [i, t] of (b.tools as unknown[]).entries()) {
      const tool = toolToChatTool(t);
      if (typeof tool === 'string') return fail(`tools[${i}]`, tool);
      tools.push(tool);
    }
    if (tools.length > 0) input.tools = tools;
  }
  if (given(b.tool_choice)) {
    const choice = toolChoiceToChat(b.tool_choice);
    if (typeof choice === 'string' && choice.startsWith('!')) return fail('tool_choice', choice.slice(1));
    input.tool_choice = choice;
  }
  input.stream = true;

  const request: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(b)) if (k !== 'input' && k !== 'stream' && k !== 'stream_options' && v !== undefined) request[k] = v;
  return {
    ok: true,
    model: b.model,
    stream: b.stream === true,
    background: b.background === true,
    input: input as ChatRequest,
    record: { model: b.model, request, input_items: items, instructions_first: instructionsFirst },
  };
}

/** Responses `text.format` → Chat `response_format`, or why not; null for plain text. */
function textFormatToResponseFormat(v: unknown): Record<string, unknown> | null | string {
  if (!isRecord(v)) return 'text.format must be an object';
  if (v.type === 'text') return null;
  if (v.type === 'json_object') return { type: 'json_object' };
  if (v.type === 'json_schema') {
    if (typeof v.name !== 'string' || !isRecord(v.schema)) return 'text.format json_schema needs name and schema';
    return {
      type: 'json_schema',
      json_schema: {
        name: v.name,
        schema: v.schema,
        ...(typeof v.description === 'string' ? { description: v.description } : {}),
        ...(typeof v.strict === 'boolean' ? { strict: v.strict } : {}),
      },
    };
  }
  return `text.format type ${JSON.stringify(v.type)} is not supported`;
}

/** A Responses tool → a Chat tool (function or custom), or why not. */
function toolToChatTool(t: unknown): Record<string, unknown> | string {
  if (!isRecord(t)) return 'each tool must be an object';
  const tool = t as unknown as Tool;
  if (tool.type === 'function') {
    const f = tool as FunctionTool;
    if (typeof f.name !== 'string' || f.name === '') return 'a function tool needs a name';
    return {
      type: 'function',
      function: {
        name: f.name,
        ...(typeof f.description === 'string' ? { description: f.description } : {}),
        ...(isRecord(f.parameters) ? { parameters: f.parameters } : {}),
        ...(typeof f.strict === 'boolean' ? { strict: f.strict } : {}),
      },
    };
  }
  if (tool.type === 'custom') {
    if (typeof tool.name !== 'string' || tool.name === '') return 'a custom tool needs a name';
    return {
      type: 'custom',
      custom: {
        name: tool.name,
        ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
        ...(given(tool.format) ? { format: tool.format } : {}),
      },
    };
  }
  return `a ${JSON.stringify(String(tool.type))} tool is an OpenAI-hosted tool: onejob runs function and custom tools only (the caller runs them)`;
}

/** Responses `tool_choice` → Chat `tool_choice`; a string starting with `!` is why not. */
function toolChoiceToChat(c: unknown): unknown {
  if (c === 'none' || c === 'auto' || c === 'required') return c;
  if (!isRecord(c)) return '!tool_choice must be none, auto, required or an object';
  if (c.type === 'function' && typeof c.name === 'string') return { type: 'function', function: { name: c.name } };
  if (c.type === 'custom' && typeof c.name === 'string') return { type: 'custom', custom: { name: c.name } };
  if (c.type === 'allowed_tools' && (c.mode === 'auto' || c.mode === 'required') && Array.isArray(c.tools)) {
    const tools: unknown[] = [];
    for (const t of c.tools as unknown[]) {
      if (!isRecord(t) || typeof t.name !== 'string') return '!tool_choice.tools must name function or custom tools';
      if (t.type === 'function') tools.push({ type: 'function', function: { name: t.name } });
      else if (t.type === 'custom') tools.push({ type: 'custom', custom: { name: t.name } });
      else return `!tool_choice.tools: a ${JSON.stringify(String(t.type))} tool is not supported`;
    }
    return { type: 'allowed_tools', allowed_tools: { mode: c.mode, tools } };
  }
  return `!tool_choice type ${JSON.stringify(String(c.type))} is not supported`;
}

/** The text of a content list of text parts (`input_text`, `output_text`), or null when it holds anything else. */
function textOnly(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  let text = '';
  for (const p of content) {
    if (!isRecord(p) || (p.type !== 'input_text' && p.type !== 'output_text') || typeof p.text !== 'string') return null;
    text += p.text;
  }
  return text;
}

/** A user message's Responses content → Chat content. */
function userContent(content: unknown, at: string): string | ChatContentPart[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new ItemError(`${at}.content`, 'content must be a string or an array of parts');
  const parts: ChatContentPart[] = [];
  for (const [j, p] of content.entries()) {
    const pat = `${at}.content[${j}]`;
    if (!isRecord(p)) throw new ItemError(pat, 'each part must be an object');
    if (p.type === 'input_text' && typeof p.text === 'string') parts.push({ type: 'text', text: p.text });
    else if (p.type === 'input_image') {
      if (given(p.file_id) || typeof p.image_url !== 'string') throw new ItemError(`${pat}.file_id`, 'an image must be given as image_url (a URL or a data: URL): OpenAI file ids live at OpenAI');
      const detail = p.detail === 'low' || p.detail === 'high' || p.detail === 'auto' ? p.detail : undefined;
      parts.push({ type: 'image_url', image_url: { url: p.image_url, ...(detail === undefined ? {} : { detail }) } });
    } else if (p.type === 'input_file') {
      if (given(p.file_url)) throw new ItemError(`${pat}.file_url`, 'a file must be given as file_data');
      if (typeof p.file_data !== 'string' && typeof p.file_id !== 'string') throw new ItemError(pat, 'a file needs file_data or file_id');
      parts.push({
        type: 'file',
        file: {
          ...(typeof p.file_data === 'string' ? { file_data: p.file_data } : {}),
          ...(typeof p.file_id === 'string' ? { file_id: p.file_id } : {}),
          ...(typeof p.filename === 'string' ? { filename: p.filename } : {}),
        },
      });
    } else if (p.type === 'input_audio' && isRecord(p.input_audio)) {
      parts.push({ type: 'input_audio', input_audio: p.input_audio as { data: string; format: 'wav' | 'mp3' } });
    } else throw new ItemError(`${pat}.type`, `a ${JSON.stringify(p.type)} part is not supported`);
  }
  return parts.length === 1 && parts[0]!.type === 'text' ? parts[0]!.text : parts;
}

/**
 * Responses input items → Chat messages: messages by role, `function_call`
 * items as the assistant's `tool_calls` (joined with the assistant text
 * before them), `function_call_output` items as `tool` messages.
 */
function itemsToMessages(items: readonly unknown[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let assistant: { text: string; refusal: string; calls: OpenAIToolCall[] } | null = null;
  const flush = (): void => {
    if (assistant === null) return;
    const a = assistant;
    assistant = null;
    out.push({
      role: 'assistant',
      content: a.text === '' && (a.calls.length > 0 || a.refusal !== '') ? null : a.text,
      ...(a.refusal === '' ? {} : { refusal: a.refusal }),
      ...(a.calls.length > 0 ? { tool_calls: a.calls } : {}),
    } as ChatMessage);
  };
  for (const [i, raw] of items.entries()) {
    const at = `input[${i}]`;
    if (!isRecord(raw)) throw new ItemError(at, 'each input item must be an object');
    const item = raw as unknown as ResponseInputItem & Record<string, unknown>;
    const type = item.type ?? ('role' in item ? 'message' : undefined);
    if (type === 'message') {
      const role = item.role;
      if (role === 'assistant') {
        assistant ??= { text: '', refusal: '', calls: [] };
        if (typeof item.content === 'string') assistant.text += item.content;
        else if (Array.isArray(item.content)) {
          for (const [j, p] of (item.content as unknown[]).entries()) {
            if (isRecord(p) && (p.type === 'output_text' || p.type === 'input_text') && typeof p.text === 'string') assistant.text += p.text;
            else if (isRecord(p) && p.type === 'refusal' && typeof p.refusal === 'string') assistant.refusal += p.refusal;
            else throw new ItemError(`${at}.content[${j}].type`, 'an assistant message holds output_text and refusal parts');
          }
        } else throw new ItemError(`${at}.content`, 'content must be a string or an array of parts');
        continue;
      }
      flush();
      if (role === 'system' || role === 'developer') {
        const text = textOnly(item.content);
        if (text === null) throw new ItemError(`${at}.content`, `a ${role} message must be text`);
        out.push({ role, content: text });
      } else if (role === 'user') out.push({ role: 'user', content: userContent(item.content, at) });
      else throw new ItemError(`${at}.role`, 'role must be user, assistant, system or developer');
      continue;
    }
    if (type === 'function_call') {
      const call = item as ResponseFunctionToolCall;
      if (typeof call.call_id !== 'string' || typeof call.name !== 'string' || typeof call.arguments !== 'string') {
        throw new ItemError(at, 'a function_call item needs call_id, name and arguments (text)');
      }
      assistant ??= { text: '', refusal: '', calls: [] };
      assistant.calls.push({ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } });
      continue;
    }
    if (type === 'function_call_output') {
      flush();
      const o = item as ResponseInputItem.FunctionCallOutput;
      if (typeof o.call_id !== 'string') throw new ItemError(`${at}.call_id`, 'a function_call_output item needs call_id');
      const text = textOnly(o.output);
      if (text === null) throw new ItemError(`${at}.output`, 'a function_call_output must be text');
      out.push({ role: 'tool', tool_call_id: o.call_id, content: text });
      continue;
    }
    throw new ItemError(`${at}.type`, `a ${JSON.stringify(type)} item is not supported (messages, function_call and function_call_output are)`);
  }
  flush();
  return out;
}

/** A Responses job's record, or null when the job is not one (or its metadata was not written by this endpoint). */
export function responsesRecordOf(metadata: unknown): ResponsesRecord | null {
  if (!isRecord(metadata)) return null;
  const r = metadata[RESPONSES_RECORD_KEY];
  if (!isRecord(r) || typeof r.model !== 'string' || !isRecord(r.request) || !Array.isArray(r.input_items)) return null;
  return { model: r.model, request: r.request, input_items: r.input_items, instructions_first: r.instructions_first === true };
}

/** The assistant message of a result (normalized completion), as a Chat message. */
function assistantMessageOf(c: NormalizedCompletion): ChatMessage {
  const calls = c.tool_calls ?? [];
  return {
    role: 'assistant',
    content: c.content === '' && (calls.length > 0 || c.refusal !== undefined) ? null : c.content,
    ...(c.refusal === undefined ? {} : { refusal: c.refusal }),
    ...(calls.length > 0 ? { tool_calls: calls.map((t) => ({ id: t.id, type: 'function' as const, function: { name: t.function.name, arguments: t.function.arguments } })) } : {}),
  } as ChatMessage;
}

/**
 * The conversation a Response continuing a succeeded Responses job starts
 * with: the job's chat messages (everything it continued, and its own
 * input) without its `instructions`, then its answer as the assistant's
 * message. Whatever provider served each step.
 *
 * @example conversationOf(job.input, job.result, record) // [{ role: 'user', … }, { role: 'assistant', content: '…' }]
 */
export function conversationOf(input: unknown, result: unknown, record: ResponsesRecord): ChatMessage[] {
  const messages = isRecord(input) && Array.isArray(input.messages) ? (input.messages as ChatMessage[]) : [];
  const own = record.instructions_first ? messages.slice(1) : messages;
  return [...own, assistantMessageOf(normalizedOf(result, record.model))];
}

/** What {@link responseOf} is given: the job, as far as a Response shows it. */
export interface ResponseJobView {
  readonly jobId: string;
  readonly state: JobState;
  readonly createdAt: Date;
  /** When the winning attempt finished (the Response's `completed_at`), or null. */
  readonly completedAt: Date | null;
  readonly result: unknown;
  readonly error: { readonly code?: string; readonly message?: string } | null;
  readonly record: ResponsesRecord;
}

/** onejob's own member on every Response: the job behind it. */
export interface OnejobResponseMember {
  readonly job_id: string;
  /** The job's state (`unknown`: an attempt is in doubt; the Response is `in_progress`). */
  readonly state: JobState;
  /** A failed job's error, as the job records it. */
  readonly error?: unknown;
}

/** A Response as onejob answers it: OpenAI's object with `onejob` beside. */
export type OnejobResponse = Response & { readonly onejob: OnejobResponseMember };

/** The Response id of a job. */
export function responseId(jobId: string): string {
  return `${RESPONSE_ID_PREFIX}${jobId}`;
}

/** The job id a Response id names, or null when it names none. */
export function jobIdOfResponse(id: string): string | null {
  return id.startsWith(RESPONSE_ID_PREFIX) && id.length > RESPONSE_ID_PREFIX.length ? id.slice(RESPONSE_ID_PREFIX.length) : null;
}

/** The id of a job's first output message item. */
export function messageItemId(jobId: string): string {
  return `msg_${jobId}`;
}

/** The id of a job's function call output item for tool call `index`. */
export function functionCallItemId(jobId: string, index: number): string {
  return `fc_${jobId}_${index}`;
}

/**
 * The job whose Response holds the item `id` names (an output item
 * `msg_<job id>…` / `fc_<job id>_<n>`, or an input item `…_<job id>_in<n>`),
 * or null: how an `item_reference` is resolved from the owner's own jobs.
 *
 * @example jobIdOfItem('fc_job_0193…_0') // 'job_0193…'
 */
export function jobIdOfItem(id: string): string | null {
  const m = /^(?:msg|fc|fco|item)_(job_[0-9A-Za-z-]+)(?:_(?:in)?\d+)?$/.exec(id);
  return m === null ? null : m[1]!;
}

/** Replaces each `item_reference` of `items` with the item it names, found by `find` (null: it names none; the reference's index is given). */
export async function resolveItemReferences(items: readonly unknown[], find: (id: string, index: number) => Promise<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const [i, item] of items.entries()) {
    if (isRecord(item) && item.type === 'item_reference' && typeof item.id === 'string') out.push(await find(item.id, i));
    else out.push(item);
  }
  return out;
}

/** The Response `status` of a job state (and a succeeded job's finish reason). */
export function responseStatusOf(state: JobState, finishReason?: string): ResponseStatus {
  switch (state) {
    case 'queued':
      return 'queued';
    case 'running':
    case 'unknown':
      return 'in_progress';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
    case 'succeeded':
      return finishReason === 'length' || finishReason === 'content_filter' ? 'incomplete' : 'completed';
  }
}

/** Chat log probabilities → Responses `output_text.logprobs`. */
function logprobsOf(c: NormalizedCompletion): ResponseOutputText.Logprob[] {
  return (c.logprobs?.content ?? []).map((t) => ({
    token: t.token,
    logprob: t.logprob,
    bytes: t.bytes ?? [],
    top_logprobs: (t.top_logprobs ?? []).map((x) => ({ token: x.token, logprob: x.logprob, bytes: x.bytes ?? [] })),
  }));
}

/** The output items of a normalized completion: one message (text, refusal), then one `function_call` per tool call. */
export function outputItemsOf(jobId: string, c: NormalizedCompletion): ResponseOutputItem[] {
  const items: ResponseOutputItem[] = [];
  const calls = c.tool_calls ?? [];
  const content: ResponseOutputMessage['content'] = [];
  if (c.content !== '' || (c.refusal === undefined && calls.length === 0)) {
    content.push({ type: 'output_text', text: c.content, annotations: [], logprobs: logprobsOf(c) });
  }
  if (c.refusal !== undefined) content.push({ type: 'refusal', refusal: c.refusal });
  if (content.length > 0) items.push({ id: messageItemId(jobId), type: 'message', role: 'assistant', status: 'completed', content });
  for (const [i, call] of calls.entries()) {
    items.push({ id: functionCallItemId(jobId, i), type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: 'completed' });
  }
  return items;
}

/** Chat usage → Responses usage. */
export function responseUsageOf(c: NormalizedCompletion): ResponseUsage {
  return {
    input_tokens: c.usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: c.usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: c.usage.total_tokens,
  };
}

/**
 * A job as a Response: `status` from the job's state (`unknown` is
 * `in_progress`, with `onejob.state: "unknown"`), `output` and `usage` from
 * a succeeded job's result, `error` from a failed job's, and the request's
 * members echoed.
 *
 * @example responseOf({ jobId, state: 'succeeded', createdAt, completedAt, result, error: null, record }).output_text // 'Hello'
 */
export function responseOf(v: ResponseJobView): OnejobResponse {
  const req = v.record.request as Partial<ResponseCreateParamsBase> & Record<string, unknown>;
  const succeeded = v.state === 'succeeded';
  const c = succeeded ? normalizedOf(v.result, v.record.model) : null;
  const output = c === null ? [] : outputItemsOf(v.jobId, c);
  const status = responseStatusOf(v.state, c?.finish_reason);
  const error: ResponseError | null = v.state === 'failed' ? { code: 'server_error', message: v.error?.message ?? 'every provider failed' } : null;
  const incomplete = status === 'incomplete' ? { reason: c?.finish_reason === 'length' ? ('max_output_tokens' as const) : ('content_filter' as const) } : null;
  const outputText = output
    .flatMap((item) => (item.type === 'message' ? item.content : []))
    .map((p) => (p.type === 'output_text' ? p.text : ''))
    .join('');
  return {
    id: responseId(v.jobId),
    object: 'response',
    created_at: Math.floor(v.createdAt.getTime() / 1000),
    status,
    background: req.background === true,
    completed_at: succeeded && v.completedAt !== null ? Math.floor(v.completedAt.getTime() / 1000) : null,
    error,
    incomplete_details: incomplete,
    instructions: typeof req.instructions === 'string' ? req.instructions : null,
    max_output_tokens: typeof req.max_output_tokens === 'number' ? req.max_output_tokens : null,
    max_tool_calls: typeof req.max_tool_calls === 'number' ? req.max_tool_calls : null,
    metadata: isRecord(req.metadata) ? (req.metadata as Record<string, string>) : {},
    model: c !== null && c.model !== '' ? c.model : v.record.model,
    output,
    output_text: outputText,
    parallel_tool_calls: req.parallel_tool_calls !== false,
    previous_response_id: typeof req.previous_response_id === 'string' ? req.previous_response_id : null,
    reasoning: isRecord(req.reasoning) ? { effort: (req.reasoning.effort ?? null) as never, summary: null } : { effort: null, summary: null },
    store: req.store !== false,
    temperature: typeof req.temperature === 'number' ? req.temperature : null,
    text: isRecord(req.text) ? (req.text as Response['text'] & object) : { format: { type: 'text' } },
    tool_choice: (req.tool_choice ?? 'auto') as Response['tool_choice'],
    tools: Array.isArray(req.tools) ? (req.tools as Tool[]) : [],
    top_p: typeof req.top_p === 'number' ? req.top_p : null,
    truncation: 'disabled',
    usage: c === null ? null : responseUsageOf(c),
    user: typeof req.user === 'string' ? req.user : null,
    onejob: { job_id: v.jobId, state: v.state, ...(v.state === 'failed' && v.error !== null ? { error: v.error } : {}) },
  } as unknown as OnejobResponse;
}

/**
 * A job's input items (this request's, not the conversation it continued),
 * each with an `id`: the item's own, else `<kind>_<job id>_in<index>`.
 */
export function responseInputItems(jobId: string, record: ResponsesRecord): ResponseItem[] {
  return record.input_items.map((raw, i) => {
    const item = (isRecord(raw) ? raw : {}) as Record<string, unknown>;
    const type = item.type ?? 'message';
    const own = typeof item.id === 'string' && item.id !== '' ? item.id : null;
    if (type === 'message') {
      const role = item.role;
      const content = typeof item.content === 'string'
        ? [{ type: role === 'assistant' ? 'output_text' : 'input_text', text: item.content, ...(role === 'assistant' ? { annotations: [] } : {}) }]
        : item.content;
      return { ...item, id: own ?? `msg_${jobId}_in${i}`, type: 'message', role, content, status: item.status ?? 'completed' } as unknown as ResponseItem;
    }
    const prefix = type === 'function_call' ? 'fc' : type === 'function_call_output' ? 'fco' : 'item';
    return { ...item, id: own ?? `${prefix}_${jobId}_in${i}`, status: item.status ?? 'completed' } as unknown as ResponseItem;
  });
}
