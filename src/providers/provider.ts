/**
 * The provider interface: one call of one attempt against one inference API,
 * classified once into success, definite failure or ambiguity.
 *
 * The executor calls {@link Provider.call} for an attempt and gets back a
 * {@link ProviderOutcome}. `call` never throws and never retries (a retry is
 * a new attempt, visible and counted). The caller's `AbortSignal` is the only
 * deadline. See `docs/providers.md` for the classification table.
 */
import type { FakeProviderConfig } from './fake/fake-provider-config.ts';
import type { HttpProviderConfig, OpenAIResponsesProviderConfig, ProviderType, TaskProviderConfig } from './provider-config.ts';
import type {
  OpenAIChatRequestBody,
  OpenAIChoiceLogprobs,
  OpenAIContentPart,
  OpenAIMessageParam,
  OpenAITokenLogprob,
  OpenAIToolCall,
} from './wire-types.ts';

export * from './provider-config.ts';

/** A provider's configuration (CONTRACT §4), by type. */
export type ProviderConfig = HttpProviderConfig | FakeProviderConfig | TaskProviderConfig | OpenAIResponsesProviderConfig;

/** One content part of a user message (OpenAI's shape: `text`, `image_url`, `input_audio`, `file`). */
export type ChatContentPart = OpenAIContentPart;

/**
 * One message of a chat request, in OpenAI's shape (`system`, `developer`,
 * `user`, `assistant` with `tool_calls`, `tool`); other members pass through
 * to OpenAI-compatible servers.
 */
export type ChatMessage = OpenAIMessageParam & { readonly [extra: string]: unknown };

/**
 * A chat job's input: an OpenAI Chat Completions request body, typed by the
 * `openai` package, without `model` (the provider's configured model is
 * used; a `model` given is ignored). `stream` and `stream_options` are
 * transport, not intent: {@link Provider.call} and {@link Provider.stream}
 * choose them. Members outside OpenAI's protocol are passed to
 * OpenAI-compatible servers as they are (`top_k` for vLLM, …); a provider
 * whose protocol cannot express a member lists it in
 * {@link Provider.unsupportedMembers}.
 */
export type ChatRequest = Omit<OpenAIChatRequestBody, 'model' | 'messages'> & {
  readonly model?: string | undefined;
  readonly messages: readonly ChatMessage[];
  readonly [extra: string]: unknown;
};

/** One call of {@link Provider.call}: the input and the attempt it belongs to. */
export interface ProviderRequest {
  /** The chat request (validated by the adapter; a bad one is a definite `invalid_input` failure). */
  readonly input: ChatRequest;
  /** The job's id, sent downstream as `X-Request-Id` and `Onejob-Job-Id`. */
  readonly jobId: string;
  /** The attempt's id, sent downstream as `Onejob-Attempt-Id`. */
  readonly attemptId: string;
  /** The attempt's number (1, 2, …); `Idempotency-Key` is `<jobId>:<attemptNumber>`. */
  readonly attemptNumber: number;
  /**
   * The deadline. Aborting before the request was written gives a definite
   * `aborted_before_send` failure; after, an ambiguous `aborted_after_send`.
   * The adapter sets no timeout of its own.
   */
  readonly signal: AbortSignal;
  /**
   * Called at most once, when the request has been written to an open
   * connection (the provider may now have it: move the attempt to `running`).
   * Never called when the request was not sent. Exceptions it throws are ignored.
   */
  readonly onDispatched?: (() => void) | undefined;
  /**
   * Called as soon as the provider has sent its own id of the request (a
   * Responses `resp_…` id, a task id, else its `x-request-id` /
   * `request-id` header), at most once per id (CONTRACT §11). Exceptions it
   * throws are ignored.
   */
  readonly onProviderRequestId?: ((id: string) => void) | undefined;
  /**
   * Streaming: called on every event the provider's stream delivers (a
   * delta, a ping, the terminator), as a sign of life for the caller's
   * `idleTimeoutMs`. Optional: a caller also counts each delta. Exceptions it
   * throws are ignored.
   */
  readonly onEvent?: (() => void) | undefined;
}

/**
 * One question to a provider about an attempt in doubt (CONTRACT §11): what
 * became of the request onejob sent for `attemptId`?
 */
export interface LookupRequest {
  readonly attemptId: string;
  readonly jobId: string;
  readonly attemptNumber: number;
  /** The job's input (what was sent). */
  readonly input: unknown;
  /** The provider's id of the request, when it was recorded. */
  readonly providerRequestId: string | null;
  /** When the attempt started (`maxDurationMs` counts from here). */
  readonly startedAt: Date;
  /** Now, on the database's clock (the same clock `startedAt` was written with). */
  readonly now: Date;
  /** Bounds the question (the reconciler's own timeout). */
  readonly signal: AbortSignal;
}

/**
 * What a provider said about an attempt in doubt, in the words the
 * reconciler applies (CONTRACT §11):
 *
 * - `succeeded`: the provider has the output; applied through the job's
 *   compare-and-swap (it may be `superseded`).
 * - `failed`: definite failure (the provider says it failed or was
 *   cancelled, or it has no record of it although `maxDurationMs` has
 *   passed: code `not_found_at_provider`); the job moves down its chain.
 * - `running`: still being worked on; ask again later.
 * - `not_found`: no record yet, and not long enough to say it never will be.
 * - `error`: the question could not be asked or answered (connection,
 *   5xx, no id to ask about); ask again later.
 */
export type LookupAnswer =
  | { readonly kind: 'succeeded'; readonly completion: NormalizedCompletion; readonly raw: unknown; readonly providerRequestId?: string | undefined }
  | { readonly kind: 'failed'; readonly error: { readonly code: string; readonly message: string; readonly details?: unknown } }
  | { readonly kind: 'running' }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'error'; readonly message: string };

/** The kind of a {@link LookupAnswer}: the `outcome` label of the lookups metric. */
export type LookupAnswerKind = LookupAnswer['kind'];

/** A request to stop work a provider may still be doing for an attempt (a loser, a cancelled job). */
export interface StopRequest {
  readonly attemptId: string;
  readonly providerRequestId: string | null;
  readonly signal: AbortSignal;
}

/** Token counts, OpenAI-style. */
export interface CompletionUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

/**
 * A completion normalized across providers (CONTRACT §4 and §7). `content` is
 * the provider's raw text; parsing it as JSON is the caller's business.
 * Built in one place, {@link CompletionAccumulator} (`completion-accumulator.ts`),
 * for streamed and whole answers alike.
 */
export interface NormalizedCompletion {
  /** The assistant's text (text blocks concatenated; `''` when there is none). */
  readonly content: string;
  /** OpenAI vocabulary: `stop`, `length`, `tool_calls`, `content_filter`, or the provider's own value when unmapped. */
  readonly finish_reason: string;
  /** The model the provider says answered (falls back to the configured model). */
  readonly model: string;
  /** The configured provider name (the key in `providers`). */
  readonly provider: string;
  readonly usage: CompletionUsage;
  /** The tool calls of the answer, in OpenAI's shape (Anthropic `tool_use` blocks translated), or null when there are none. */
  readonly tool_calls: readonly OpenAIToolCall[] | null;
  /** The model's refusal message, present only when the provider sent one. */
  readonly refusal?: string;
  /** Token log probabilities, present only when asked for (`logprobs: true`) and sent. */
  readonly logprobs?: OpenAIChoiceLogprobs;
}

/**
 * One normalized piece of a streamed answer, in OpenAI's vocabulary whatever
 * the provider's protocol. {@link CompletionAccumulator} folds a sequence of
 * them into the {@link NormalizedCompletion} a whole answer gives.
 *
 * - `text`, `refusal`: the next characters of the content or refusal.
 * - `tool_call`: a piece of tool call `index` (0, 1, … in order of first
 *   appearance): `id` and `name` come with its first piece, `arguments` is
 *   the next slice of the arguments' JSON text.
 * - `logprobs`: log probabilities of the tokens just streamed.
 * - `model`: the model the provider says is answering (usually first).
 * - `finish`: why the answer ended.
 * - `usage`: token counts so far (a later `usage` replaces an earlier one).
 */
export type ChatDelta =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'refusal'; readonly text: string }
  | { readonly type: 'tool_call'; readonly index: number; readonly id?: string; readonly name?: string; readonly arguments?: string }
  | { readonly type: 'logprobs'; readonly content?: readonly OpenAITokenLogprob[]; readonly refusal?: readonly OpenAITokenLogprob[] }
  | { readonly type: 'model'; readonly model: string }
  | { readonly type: 'finish'; readonly finish_reason: string }
  | { readonly type: 'usage'; readonly usage: CompletionUsage };

/**
 * Whether a delta is output (text, refusal or a tool call): the first one is
 * when a streaming attempt "delivers output" and may claim the job's stream
 * (CONTRACT §7).
 */
export function isOutputDelta(delta: ChatDelta): boolean {
  return delta.type === 'text' || delta.type === 'refusal' || delta.type === 'tool_call';
}

/** Receives each {@link ChatDelta} of a stream as it arrives. Exceptions it throws are ignored; do not block in it. */
export type ChatDeltaListener = (delta: ChatDelta) => void;

/** Error codes of provider outcomes. See {@link FAILURE_CODES} and {@link AMBIGUOUS_CODES}. */
export const ProviderErrorCode = {
  /** Failure: the input could not be turned into a request; nothing was sent. */
  InvalidInput: 'invalid_input',
  /** Failure: no connection (refused, DNS, connect timeout, TLS); nothing was sent. */
  ProviderUnreachable: 'provider_unreachable',
  /** Failure: the caller's signal fired before the request was written. */
  AbortedBeforeSend: 'aborted_before_send',
  /** Failure: 429. */
  ProviderRateLimited: 'provider_rate_limited',
  /** Failure: 503, or Anthropic's 529 `overloaded_error`. */
  ProviderOverloaded: 'provider_overloaded',
  /** Failure: a 3xx or 4xx the provider answers without executing (400, 401, 403, 404, 408, 413, 422, …). */
  ProviderRejected: 'provider_rejected',
  /** Failure: a stream's provider reported an error in the stream (an `error` event) after a 2xx (CONTRACT §7: the attempt is `failed`). */
  ProviderStreamError: 'provider_stream_error',
  /** Failure: the provider ran the request and reports that it failed or was cancelled (a task's `failed`/`canceled`, a response's `failed`/`cancelled`/`incomplete`). */
  ProviderTaskFailed: 'provider_task_failed',
  /** Ambiguous: the caller's signal fired after the request was written. */
  AbortedAfterSend: 'aborted_after_send',
  /** Ambiguous: the connection broke after the request was written (reset, closed, truncated body). */
  ConnectionLost: 'connection_lost',
  /** Ambiguous: 500, 502, 504, other 5xx, or 409 (the same idempotency key may be in flight). */
  ProviderServerError: 'provider_server_error',
  /** Ambiguous: a 2xx whose body is not a completion (bad JSON, wrong shape, too large). */
  MalformedResponse: 'malformed_response',
} as const;
export type ProviderErrorCode = (typeof ProviderErrorCode)[keyof typeof ProviderErrorCode];

/** Machine-readable facts about a provider error; JSON-safe, so it can be stored on the attempt. */
export interface ProviderErrorDetails {
  /** The configured provider name. */
  readonly provider: string;
  /** How far the exchange got: nothing sent, sent with no answer, headers received, whole body received. */
  readonly phase: 'before_send' | 'after_send' | 'after_headers' | 'after_body';
  /** The HTTP status, when one arrived. */
  readonly status?: number;
  /** The provider's error type (`rate_limit_error`, `server_error`, …), when its body said. */
  readonly provider_error_type?: string;
  /** The provider's error `code` (`content_filter`, `context_length_exceeded`, …), when its body said. */
  readonly provider_error_code?: string;
  /** The provider's error message, when its body said. */
  readonly provider_message?: string;
  /** The provider's request id header (`x-request-id`, `request-id`), when sent. */
  readonly provider_request_id?: string;
  /** `Retry-After`, in milliseconds, when sent. */
  readonly retry_after_ms?: number;
  /** The low-level error code (`ECONNREFUSED`, `UND_ERR_SOCKET`, `AbortError`, …). */
  readonly cause_code?: string;
  /** The low-level error message. */
  readonly cause_message?: string;
}

/**
 * A provider error: a stable code, a message, JSON-safe details, and the raw
 * cause for logs only. `message` and `details` are safe for tenants
 * (credentials and organisation ids redacted, `src/core/redact-credentials.ts`).
 */
export interface ProviderError {
  readonly code: ProviderErrorCode;
  readonly message: string;
  readonly details: ProviderErrorDetails;
  /** The raw error (undici's, the signal's reason). For logs; never store or return it. */
  readonly cause?: unknown;
  /** The message and details as the provider wrote them, when redaction changed them. For logs; never store or return it. */
  readonly unredacted?: { readonly message: string; readonly details: ProviderErrorDetails };
}

/**
 * The fields of the log line of a provider error: the whole text, as the
 * provider wrote it (the operator's logs are where it belongs).
 *
 * @example log.warn(providerErrorLogFields(outcome.error), 'provider error')
 */
export function providerErrorLogFields(error: ProviderError): Record<string, unknown> {
  const whole = error.unredacted ?? error;
  return { code: error.code, status: whole.details.status, provider_error: { message: whole.message, ...whole.details }, ...(error.cause === undefined ? {} : { err: error.cause }) };
}

/**
 * The one classification of a provider call (STYLE example 9).
 *
 * - `success`: a completion; the attempt may complete (through the job's compare-and-swap).
 * - `failure`: definitely not executed; the attempt is `failed` and the job may fail over.
 * - `ambiguous`: maybe executed; the attempt becomes `unknown`, never retried silently.
 */
export type ProviderOutcome =
  | {
      readonly kind: 'success';
      readonly completion: NormalizedCompletion;
      /** The provider's parsed response body, untouched (the OpenAI-compatible endpoint may reshape it). */
      readonly raw: unknown;
      /** The provider's request id header, when sent. */
      readonly providerRequestId?: string | undefined;
      /**
       * The job's result as the provider gives it, for a provider whose answer
       * is not a chat completion (an MCP tool's `CallToolResult`, CONTRACT
       * §14): stored exactly as given, without the completion's shape, the
       * route contract's check or usage. Absent for chat providers.
       */
      readonly result?: unknown;
    }
  | {
      readonly kind: 'failure';
      readonly error: ProviderError;
      /** A stream that broke after output: what had arrived, accumulated (its `usage` is what the provider had reported). */
      readonly partial?: NormalizedCompletion | undefined;
    }
  | { readonly kind: 'ambiguous'; readonly error: ProviderError; readonly partial?: NormalizedCompletion | undefined };

/** The kind of a {@link ProviderOutcome}. */
export type ProviderOutcomeKind = ProviderOutcome['kind'];

/** Codes that mean "definitely not executed". */
export const FAILURE_CODES: ReadonlySet<ProviderErrorCode> = new Set<ProviderErrorCode>([
  'invalid_input',
  'provider_unreachable',
  'aborted_before_send',
  'provider_rate_limited',
  'provider_overloaded',
  'provider_rejected',
  'provider_stream_error',
  'provider_task_failed',
]);

/** Codes that mean "maybe executed". */
export const AMBIGUOUS_CODES: ReadonlySet<ProviderErrorCode> = new Set<ProviderErrorCode>([
  'aborted_after_send',
  'connection_lost',
  'provider_server_error',
  'malformed_response',
]);

/**
 * One configured provider, ready to call.
 *
 * @example
 * const provider = createProvider('primary', { type: 'openai', baseUrl: 'https://api.openai.com/v1', apiKey, model: 'gpt-4o-mini' });
 * const outcome = await provider.call({ input: { messages: [{ role: 'user', content: 'hi' }] }, jobId, attemptId, attemptNumber: 1, signal });
 * if (outcome.kind === 'success') console.log(outcome.completion.content);
 */
export interface Provider {
  /** The configured name (the key in `providers`). */
  readonly name: string;
  readonly type: ProviderType;
  /** The configured model. */
  readonly model: string;
  /** To the answer, or a stream's first output (default 20000); the caller enforces it (CONTRACT §11). */
  readonly timeoutMs: number;
  /** The longest silence between a stream's events after its first output; the caller enforces it. Absent: 30000. */
  readonly idleTimeoutMs?: number | undefined;
  /** The provider's promise that no request runs longer on its side, or null (none). Absent: null. */
  readonly maxDurationMs?: number | null | undefined;
  /** The model's context window, when configured. */
  readonly contextWindow: number | null;
  /**
   * Sends one attempt and classifies the result. Never rejects, never retries.
   * The promise settles as soon as the outcome is known (an abort settles it at once).
   */
  call(request: ProviderRequest): Promise<ProviderOutcome>;
  /**
   * Sends one attempt with `stream: true` upstream and reports each
   * normalized {@link ChatDelta} to `onDelta` as it arrives. Resolves with the
   * same {@link ProviderOutcome} as {@link Provider.call} (the success's
   * `completion` is the deltas accumulated, equal to what `call` gives for the
   * same answer), classified the same way, plus: an `error` event in the
   * stream is a definite `provider_stream_error` failure; a connection cut or
   * the signal firing mid-stream is ambiguous (`connection_lost`,
   * `aborted_after_send`); a stream that ends without its terminator is
   * ambiguous `connection_lost`. Failures and ambiguity after output carry
   * `partial`. Never rejects, never retries.
   *
   * @example
   * const outcome = await provider.stream(request, (d) => { if (d.type === 'text') process.stdout.write(d.text); });
   */
  stream(request: ProviderRequest, onDelta: ChatDeltaListener): Promise<ProviderOutcome>;
  /**
   * The members of `input` this provider's protocol cannot express (pure,
   * no I/O): the router skips the provider with reason
   * `unsupported:<member>` for each (CONTRACT §7). `call` and `stream` refuse
   * such an input with `invalid_input` rather than drop the member.
   *
   * @example anthropicProvider.unsupportedMembers({ messages, logprobs: true, n: 2 }) // ['logprobs', 'n']
   */
  unsupportedMembers(input: ChatRequest): string[];
  /**
   * Asks the provider what became of an attempt's request (CONTRACT §11).
   * Present only on providers whose protocol can say (`openai-responses`,
   * `openai` with `lookup: "stored-completions"`, `task`); the reconciler
   * asks every `unknown` attempt of such a provider, and never sends the
   * work again. Never rejects.
   */
  lookup?(request: LookupRequest): Promise<LookupAnswer>;
  /**
   * Asks the provider to stop work it may still be doing for an attempt (a
   * loser, an attempt of a cancelled job), where its protocol can. Best
   * effort; never rejects.
   */
  stopUpstream?(request: StopRequest): Promise<void>;
  /**
   * `settleUnknownAfterMs` (CONTRACT §11, opt-in): an attempt still
   * `unknown` this long after its start is resolved `failed` with code
   * `settled_by_policy`. Null: never (the default).
   */
  readonly settleUnknownAfterMs?: number | null;
  /** Releases connections (and stops an embedded fake server). Calls in flight end as aborted. */
  close(): Promise<void>;
}
