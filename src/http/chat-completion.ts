/**
 * The OpenAI-compatible view of onejob (CONTRACT §3, `POST
 * /v1/chat/completions`): which route a `model` names, a succeeded job as an
 * OpenAI `chat.completion`, and onejob's problem documents with the `error`
 * member the OpenAI SDKs read. Pure functions; the route lives in
 * `routes/chat-routes.ts`.
 */
import type { JobWithAttempts } from '../core/types.ts';
import type { OnejobConfig } from '../config/config.ts';

/** The prefix that names a route explicitly in `model`: `route:<name>`. */
export const ROUTE_MODEL_PREFIX = 'route:';

/**
 * The route a request's `model` names: a configured route name as it is, else
 * `route:<name>`; null when neither names a configured route.
 *
 * @example chatRouteOf('route:summarize', config.routes) // 'summarize'
 */
export function chatRouteOf(model: string, routes: OnejobConfig['routes']): string | null {
  if (Object.hasOwn(routes, model)) return model;
  if (model.startsWith(ROUTE_MODEL_PREFIX)) {
    const name = model.slice(ROUTE_MODEL_PREFIX.length);
    if (Object.hasOwn(routes, name)) return name;
  }
  return null;
}

/** An OpenAI `chat.completion` object, as answered by onejob. */
export interface ChatCompletionResponse {
  readonly id: string;
  readonly object: 'chat.completion';
  /** When the winning attempt finished, in Unix seconds. */
  readonly created: number;
  readonly model: string;
  /** The configured provider whose attempt won. */
  readonly provider: string;
  readonly choices: readonly [
    {
      readonly index: 0;
      readonly message: {
        readonly role: 'assistant';
        /** The text; null when the answer is only tool calls or only a refusal (as OpenAI sends it). */
        readonly content: string | null;
        readonly refusal: string | null;
        /** Present when the answer called tools (OpenAI's shape). */
        readonly tool_calls?: readonly ChatToolCall[];
      };
      readonly finish_reason: string;
      /** The token log probabilities when the request asked for them and the provider sent them, else null. */
      readonly logprobs: unknown;
    },
  ];
  readonly usage: { readonly prompt_tokens: number; readonly completion_tokens: number; readonly total_tokens: number };
}

/** A tool call in OpenAI's shape, as stored in the job's `result.tool_calls`. */
export interface ChatToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** The well-formed tool calls of a stored result (an explicit resolve may store anything). */
function toolCallsOf(v: unknown): ChatToolCall[] {
  if (!Array.isArray(v)) return [];
  return v.filter(
    (c): c is ChatToolCall => isRecord(c) && typeof c.id === 'string' && isRecord(c.function) && typeof c.function.name === 'string' && typeof c.function.arguments === 'string',
  ).map((c) => ({ id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } }));
}

/** The completion id of a job: the same for every answer of that job. */
export function chatCompletionId(jobId: string): string {
  return `chatcmpl-${jobId}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0;
}

/**
 * A succeeded job as an OpenAI `chat.completion`.
 *
 * The job's result is normally the normalized completion of CONTRACT §4 and
 * §7 (`{content, finish_reason, model, provider, usage, tool_calls, refusal?,
 * logprobs?}`): `tool_calls`, `refusal` and `logprobs` come back in OpenAI's
 * shape (`content: null` when there is no text beside them); `content` is sent as
 * it is when it is text, else as its JSON text (a route contract with an
 * output schema stores the parsed value). A result given by an explicit
 * resolve may be any JSON: when it has no `content` member, the whole result
 * is the content, `finish_reason` is `stop`, usage is zero, and the model is
 * the winning provider's configured one.
 *
 * @example chatCompletionOf(job, config) // { id: 'chatcmpl-job_…', object: 'chat.completion', choices: [...], … }
 */
export function chatCompletionOf(job: JobWithAttempts, config: OnejobConfig): ChatCompletionResponse {
  const winner = job.attempts.find((a) => a.id === job.completedBy);
  const result = job.result;
  const normalized = isRecord(result) && Object.hasOwn(result, 'content') ? result : null;
  const value = normalized === null ? result : normalized.content;
  const text = typeof value === 'string' ? value : JSON.stringify(value ?? null);
  const toolCalls = toolCallsOf(normalized?.tool_calls);
  const refusal = typeof normalized?.refusal === 'string' ? normalized.refusal : null;
  // OpenAI sends `content: null` beside tool calls or a refusal when there is no text.
  const content = text === '' && (toolCalls.length > 0 || refusal !== null) ? null : text;
  const logprobs = isRecord(normalized?.logprobs) ? normalized.logprobs : null;
  const provider = typeof normalized?.provider === 'string' ? normalized.provider : (winner?.provider ?? '');
  const configuredModel = Object.hasOwn(config.providers, provider) ? config.providers[provider]?.model : undefined;
  const model = typeof normalized?.model === 'string' && normalized.model !== '' ? normalized.model : (configuredModel ?? job.route);
  const finishReason = typeof normalized?.finish_reason === 'string' && normalized.finish_reason !== '' ? normalized.finish_reason : 'stop';
  const usage = isRecord(normalized?.usage) ? normalized.usage : {};
  const promptTokens = count(usage.prompt_tokens);
  const completionTokens = count(usage.completion_tokens);
  const finishedAt = winner?.finishedAt ?? job.updatedAt;
  return {
    id: chatCompletionId(job.id),
    object: 'chat.completion',
    created: Math.floor(finishedAt.getTime() / 1000),
    model,
    provider,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        finish_reason: finishReason,
        logprobs,
      },
    ],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: Object.hasOwn(usage, 'total_tokens') ? count(usage.total_tokens) : promptTokens + completionTokens,
    },
  };
}

/** Members of a problem document that are RFC 9457's own, not extensions. */
const PROBLEM_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'code', 'error']);

/**
 * A problem document with an OpenAI-style `error` member added: the OpenAI
 * SDKs read `error.message` and `error.code` (as `err.message`/`err.code`),
 * so onejob's `code` reaches SDK users. The problem's extension members
 * (`job_id`, `attempt_id`, `job_error`, …) are repeated inside `error`.
 *
 * @example withOpenAiError({ type, title, status: 409, detail: 'reused', code: 'idempotency_key_reused' }).error
 * // { message: 'reused', type: 'idempotency_key_reused', code: 'idempotency_key_reused', param: null }
 */
export function withOpenAiError(problem: Record<string, unknown>): Record<string, unknown> {
  const extensions = Object.fromEntries(Object.entries(problem).filter(([k]) => !PROBLEM_MEMBERS.has(k)));
  const code = typeof problem.code === 'string' ? problem.code : 'internal';
  const message = typeof problem.detail === 'string' ? problem.detail : String(problem.title ?? code);
  // OpenAI's type for a spent budget, which its SDKs show as such (CONTRACT §16).
  const type = code === 'budget_exceeded' ? 'insufficient_quota' : code;
  return { ...problem, error: { message, type, code, param: typeof problem.field === 'string' ? problem.field : null, ...extensions } };
}
