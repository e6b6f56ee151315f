/**
 * The settings every provider type shares, and the HTTP provider types'
 * configuration. Its own module (imported by `provider.ts` and by the `fake`
 * type's config alike) so that no import circle runs through `provider.ts`.
 */

/** The provider types onejob can call. */
export const ProviderType = {
  /** Any OpenAI-compatible Chat Completions server: POST `{baseUrl}/chat/completions`. */
  OpenAI: 'openai',
  /** Anthropic's Messages API: POST `{baseUrl}/v1/messages`. */
  Anthropic: 'anthropic',
  /** onejob's fake provider (embedded or external), for demos and tests. */
  Fake: 'fake',
  /** Long-running work behind a prediction-style API: POST `{baseUrl}`, GET/cancel the task (CONTRACT §11). */
  Task: 'task',
  /** The OpenAI Responses API in background mode: POST `{baseUrl}/responses`, GET/cancel the response (CONTRACT §11). */
  OpenAIResponses: 'openai-responses',
  /** One tool of an upstream MCP server (`mcpServers`, CONTRACT §14): built by the gateway, never configured under `providers`. */
  Mcp: 'mcp',
} as const;
export type ProviderType = (typeof ProviderType)[keyof typeof ProviderType];

/** The default of `timeoutMs`: to the answer of a non-streamed attempt, to the first output of a streamed one. */
export const DEFAULT_PROVIDER_TIMEOUT_MS = 20_000;
/** The default of `idleTimeoutMs`: the longest silence between events of a stream after its first output. */
export const DEFAULT_PROVIDER_IDLE_TIMEOUT_MS = 30_000;

/** Settings shared by every provider type. */
export interface ProviderConfigBase {
  /**
   * The time to the answer of a non-streamed attempt, to the first output of
   * a streamed one; past it the attempt is `unknown` (`deadline_exceeded`).
   * Enforced by the caller (the executor's timer), not the adapter. Default 20000.
   */
  readonly timeoutMs?: number | undefined;
  /**
   * The longest silence between events of a stream after its first output;
   * past it the attempt is `unknown` (`stream_stalled`). A stream that keeps
   * sending is never cut, however long it runs. Default 30000.
   */
  readonly idleTimeoutMs?: number | undefined;
  /**
   * The provider's own promise that no request runs longer than this on its
   * side (for lookups: "not found" after it is definite). Recorded, not
   * enforced. Default null (no promise).
   */
  readonly maxDurationMs?: number | null | undefined;
  /** Extra headers sent with every request (onejob's identity headers win on a clash). */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** The model's context window in tokens, for contract verification. */
  readonly contextWindow?: number | undefined;
  /** The most output tokens to ask for when the input names none (Anthropic requires a value; default 4096 there). */
  readonly maxOutputTokens?: number | undefined;
  /**
   * Opt-in, never a default (CONTRACT §11): an attempt still `unknown` this
   * many ms after its start is resolved `failed` with code
   * `settled_by_policy`. Only for providers that do nothing but compute and
   * whose `maxDurationMs` bounds every request.
   */
  readonly settleUnknownAfterMs?: number | null | undefined;
}

/**
 * A real inference API reached over HTTP(S).
 *
 * @example { type: 'openai', baseUrl: 'https://api.openai.com/v1', apiKey: 'sk-…', model: 'gpt-4o-mini' }
 */
export interface HttpProviderConfig extends ProviderConfigBase {
  readonly type: 'openai' | 'anthropic';
  /**
   * The API root. OpenAI-compatible: the URL that `/chat/completions` is
   * appended to (e.g. `https://api.openai.com/v1`). Anthropic: the host root
   * (`https://api.anthropic.com`); a trailing `/v1` is accepted too.
   */
  readonly baseUrl: string;
  /** The API key, already resolved (no `env:` prefix). Null or absent for servers that need none. */
  readonly apiKey?: string | null | undefined;
  /** The model name sent to the provider. */
  readonly model: string;
  /**
   * `openai` only: how an attempt in doubt is looked up (CONTRACT §11).
   * `"stored-completions"`: requests carry `store: true` and
   * `metadata.onejob_attempt_id`, and the lookup lists
   * `GET {baseUrl}/chat/completions?metadata[onejob_attempt_id]=<id>`.
   * Default: none.
   */
  readonly lookup?: 'stored-completions' | null | undefined;
}

/**
 * The OpenAI Responses API upstream, in background mode (CONTRACT §11).
 *
 * @example { type: 'openai-responses', baseUrl: 'https://api.openai.com/v1', apiKey: 'env:OPENAI_API_KEY', model: 'gpt-4.1-mini', maxDurationMs: 600000 }
 */
export interface OpenAIResponsesProviderConfig extends ProviderConfigBase {
  readonly type: 'openai-responses';
  /** The API root that `/responses` is appended to. */
  readonly baseUrl: string;
  readonly apiKey?: string | null | undefined;
  readonly model: string;
  /**
   * How an attempt's output is followed (CONTRACT §11). `"stream"`: the
   * create says `stream: true` too; the events are relayed as the job's
   * stream, and a cut is resumed with `GET …/responses/{id}?stream=true&starting_after=<n>`.
   * `"poll"`: `GET …/responses/{id}` every `pollIntervalMs`; a streamed
   * job's answer arrives whole. Default `"stream"`.
   */
  readonly follow?: ResponsesFollow | undefined;
  /** `follow: "poll"`: how often a background response is polled while its attempt waits; `"stream"`: the pause between two resumes that brought nothing. In ms. Default 1000. */
  readonly pollIntervalMs?: number | undefined;
}

/** How an `openai-responses` attempt is followed: by its event stream (resumed after a cut) or by polling. */
export const ResponsesFollow = { Stream: 'stream', Poll: 'poll' } as const;
export type ResponsesFollow = (typeof ResponsesFollow)[keyof typeof ResponsesFollow];

/**
 * A prediction-style task service (CONTRACT §11): `POST {baseUrl}` with
 * `{"input"}` and `Idempotency-Key: <attempt id>`, then `GET urls.get`
 * (default `{baseUrl}/{id}`) until the task ends, `POST urls.cancel`
 * (default `{baseUrl}/{id}/cancel`) to stop it.
 *
 * @example { type: 'task', baseUrl: 'http://127.0.0.1:4100/tasks', callbackSecret: 'env:TASK_SECRET', maxDurationMs: 600000 }
 */
export interface TaskProviderConfig extends ProviderConfigBase {
  readonly type: 'task';
  /** The collection URL tasks are created at. */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` when set. */
  readonly apiKey?: string | null | undefined;
  /** A label for the result's `model` (default `"task"`). */
  readonly model?: string | undefined;
  /** How often a running task is polled while its attempt waits, in ms. Default 1000. */
  readonly pollIntervalMs?: number | undefined;
  /**
   * The key of the signed callback (`POST /v1/attempts/{id}/callback`,
   * `Onejob-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>">`,
   * or the v3 `sha256=<hex HMAC-SHA256 of the body>` for the recorded task
   * only: CONTRACT §15). Without it the provider's callbacks are refused (401).
   */
  readonly callbackSecret?: string | null | undefined;
}

