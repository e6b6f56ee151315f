/**
 * Names for the API's shapes, taken from the generated {@link paths} and
 * {@link components} (src/client/api-types.ts), plus the few the server does
 * not serve yet, written from CONTRACT §7–8 (each says so).
 */
import type { components, paths } from './api-types.ts';

export type { components, paths } from './api-types.ts';

/** A job with its attempts (CONTRACT §3). */
export type Job = components['schemas']['Job'];
/** One attempt of a job. */
export type Attempt = components['schemas']['Attempt'];
/** An RFC 9457 problem document with onejob's `code`. */
export type Problem = components['schemas']['Problem'];
/** The answer of `POST /v1/chat/completions`. */
export type ChatCompletion = components['schemas']['ChatCompletion'];
/** A job's state. */
export type JobState = Job['state'];
/** An attempt's state. */
export type AttemptState = Attempt['state'];

/** The body of `POST /v1/jobs`. */
export type CreateJobRequest = paths['/v1/jobs']['post']['requestBody']['content']['application/json'];
/** The query of `GET /v1/jobs`. */
export type ListJobsQuery = NonNullable<paths['/v1/jobs']['get']['parameters']['query']>;
/** One page of `GET /v1/jobs`. */
export type JobPage = paths['/v1/jobs']['get']['responses'][200]['content']['application/json'];
/** The body of `POST /v1/jobs/{id}/attempts`. */
export type StartAttemptRequest = NonNullable<paths['/v1/jobs/{id}/attempts']['post']['requestBody']>['content']['application/json'];
/** The body of `POST /v1/attempts/{id}/resolve`. */
export type ResolveAttemptRequest = paths['/v1/attempts/{id}/resolve']['post']['requestBody']['content']['application/json'];
/** The answer of `POST /v1/attempts/{id}/resolve`: the attempt with its job. */
export type ResolvedAttempt = paths['/v1/attempts/{id}/resolve']['post']['responses'][200]['content']['application/json'];
/** The body of `POST /v1/chat/completions` (an OpenAI Chat Completions request). */
export type ChatCompletionRequest = paths['/v1/chat/completions']['post']['requestBody']['content']['application/json'];

/** One `chat.completion.chunk` of a streamed chat completion (CONTRACT §7; OpenAI's shape, the members onejob sends). */
export interface ChatCompletionChunk {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly choices: readonly {
    readonly index: number;
    readonly delta: { readonly role?: 'assistant'; readonly content?: string | null; readonly refusal?: string | null; readonly tool_calls?: readonly unknown[] };
    readonly finish_reason: string | null;
  }[];
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number; readonly total_tokens: number } | null;
}

/**
 * One row of `GET /v1/usage` (CONTRACT §8). Written from the contract: the
 * server does not serve this endpoint in its OpenAPI document yet; when it
 * does, this becomes an alias of the generated type.
 */
export interface UsageRow {
  readonly route: string;
  readonly provider: string;
  /** The attempts' state. */
  readonly outcome: AttemptState;
  readonly attempts: number;
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  /** Null when the provider declares no pricing. */
  readonly cost_usd: number | null;
}

/** The answer of `GET /v1/usage` (CONTRACT §8; see {@link UsageRow}). */
export interface UsageReport {
  readonly data: readonly UsageRow[];
}

/**
 * The body of `POST /v1/messages`, an Anthropic Messages request (CONTRACT §7).
 * Written from the contract until the server serves the endpoint in its
 * document; other members pass through.
 */
export interface MessagesRequest {
  /** A route name, or `route:<name>`. */
  readonly model: string;
  readonly max_tokens: number;
  readonly messages: readonly { readonly role: 'user' | 'assistant'; readonly content: unknown }[];
  readonly system?: unknown;
  readonly [member: string]: unknown;
}

/** The answer of `POST /v1/messages` (Anthropic's Messages response shape). */
export interface MessagesResponse {
  readonly id: string;
  readonly type: 'message';
  readonly role: 'assistant';
  readonly content: readonly { readonly type: string; readonly text?: string; readonly [member: string]: unknown }[];
  readonly model: string;
  readonly stop_reason: string | null;
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number; readonly [member: string]: unknown };
  readonly [member: string]: unknown;
}
