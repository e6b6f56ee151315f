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
}

