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
import type { HttpProviderConfig, ProviderType } from './provider-config.ts';

export * from './provider-config.ts';

/** A provider's configuration (CONTRACT §4), by type. */
export type ProviderConfig = HttpProviderConfig | FakeProviderConfig;

/** One content part of a chat message (only text parts are understood by every adapter). */
export interface ChatContentPart {
  readonly type: string;
  readonly text?: string;
  readonly [extra: string]: unknown;
}

/** One message of an OpenAI-style chat request. */
export interface ChatMessage {
  readonly role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | (string & {});
  readonly content: string | readonly ChatContentPart[] | null;
  readonly [extra: string]: unknown;
}

/**
 * A chat job's input: an OpenAI Chat Completions request body without `model`
 * (the provider's configured model is used). Unknown fields are passed to
 * OpenAI-compatible servers as they are.
 */
export interface ChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly temperature?: number;
  readonly top_p?: number;
  readonly max_tokens?: number;
  readonly max_completion_tokens?: number;
  readonly stop?: string | readonly string[];
  readonly [extra: string]: unknown;
}

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
}

/** Token counts, OpenAI-style. */
export interface CompletionUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

/**
 * A completion normalized across providers (CONTRACT §4). `content` is the
 * provider's raw text; parsing it as JSON is the caller's business.
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
}

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

/** A provider error: a stable code, a message, JSON-safe details, and the raw cause for logs only. */
export interface ProviderError {
  readonly code: ProviderErrorCode;
  readonly message: string;
  readonly details: ProviderErrorDetails;
  /** The raw error (undici's, the signal's reason). For logs; never store or return it. */
  readonly cause?: unknown;
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
    }
  | { readonly kind: 'failure'; readonly error: ProviderError }
  | { readonly kind: 'ambiguous'; readonly error: ProviderError };

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
  /** The attempt deadline from the config (default 20000); the caller turns it into the signal. */
  readonly timeoutMs: number;
  /** The model's context window, when configured. */
  readonly contextWindow: number | null;
  /**
   * Sends one attempt and classifies the result. Never rejects, never retries.
   * The promise settles as soon as the outcome is known (an abort settles it at once).
   */
  call(request: ProviderRequest): Promise<ProviderOutcome>;
  /** Releases connections (and stops an embedded fake server). Calls in flight end as aborted. */
  close(): Promise<void>;
}
