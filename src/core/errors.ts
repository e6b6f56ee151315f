/**
 * One error type for all of onejob, with a stable `code` from a closed union.
 *
 * {@link ERROR_TABLE} maps each code to its HTTP status, title and retryable
 * flag; the HTTP layer renders it as problem+json and the CLI maps it to an
 * exit code. Raw library errors travel as `cause`, never to the API.
 */

/** Every error code onejob emits. Codes in CONTRACT §3 are part of the public contract. */
export const ErrorCode = {
  Unauthorized: 'unauthorized',
  ReadOnlyToken: 'read_only_token',
  TooManyRequests: 'too_many_requests',
  BudgetExceeded: 'budget_exceeded',
  ConcurrencyLimited: 'concurrency_limited',
  RateLimited: 'rate_limited',
  LookupUnsupported: 'lookup_unsupported',
  NotFound: 'not_found',
  JobNotFound: 'job_not_found',
  AttemptNotFound: 'attempt_not_found',
  IdempotencyKeyMissing: 'idempotency_key_missing',
  IdempotencyKeyInvalid: 'idempotency_key_invalid',
  IdempotencyKeyReused: 'idempotency_key_reused',
  InvalidRequest: 'invalid_request',
  RouteUnknown: 'route_unknown',
  PayloadTooLarge: 'payload_too_large',
  ConversationTooLarge: 'conversation_too_large',
  ProviderUnknown: 'provider_unknown',
  AttemptInDoubt: 'attempt_in_doubt',
  AttemptInFlight: 'attempt_in_flight',
  AttemptFinished: 'attempt_finished',
  JobFinished: 'job_finished',
  JobFailed: 'job_failed',
  ContentFilter: 'content_filter',
  ProviderNotCertified: 'provider_not_certified',
  ChainExhausted: 'chain_exhausted',
  ContractViolation: 'contract_violation',
  IllegalTransition: 'illegal_transition',
  LeaseLost: 'lease_lost',
  DatabaseUnavailable: 'database_unavailable',
  Unavailable: 'unavailable',
  ConfigInvalid: 'config_invalid',
  Internal: 'internal',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** How each code is presented. */
export interface ErrorSpec {
  /** HTTP status for the API. */
  readonly status: number;
  /** A short, fixed, human title (problem+json `title`). */
  readonly title: string;
  /** Whether repeating the same request later may succeed. */
  readonly retryable: boolean;
  /** Process exit code for the CLI. */
  readonly exitCode: number;
  /**
   * The `code` the HTTP API shows, when it is not the code itself: every
   * "cannot serve now" cause (`database_unavailable`, a full queue) is the
   * one contract code `unavailable` (CONTRACT §3), the precise cause kept in
   * the problem's `reason` member.
   */
  readonly apiCode?: ErrorCode;
}

/** The one table from code to status, title, retryability and exit code. */
export const ERROR_TABLE: Readonly<Record<ErrorCode, ErrorSpec>> = {
  unauthorized: { status: 401, title: 'Missing or unknown API token', retryable: false, exitCode: 2 },
  read_only_token: { status: 403, title: 'The API token is read-only', retryable: false, exitCode: 2 },
  too_many_requests: { status: 429, title: 'Too many requests', retryable: true, exitCode: 3 },
  budget_exceeded: { status: 429, title: "The owner's spend limit is reached", retryable: true, exitCode: 3 },
  concurrency_limited: { status: 429, title: "The owner's concurrency limit is reached", retryable: true, exitCode: 3 },
  rate_limited: { status: 429, title: "The owner's requests-per-minute limit is reached", retryable: true, exitCode: 3 },
  lookup_unsupported: { status: 422, title: "The provider cannot be asked what became of an attempt", retryable: false, exitCode: 2 },
  not_found: { status: 404, title: 'Not found', retryable: false, exitCode: 4 },
  job_not_found: { status: 404, title: 'Job not found', retryable: false, exitCode: 4 },
  attempt_not_found: { status: 404, title: 'Attempt not found', retryable: false, exitCode: 4 },
  idempotency_key_missing: { status: 400, title: 'Idempotency-Key header is required', retryable: false, exitCode: 2 },
  idempotency_key_invalid: { status: 400, title: 'Idempotency-Key header is malformed', retryable: false, exitCode: 2 },
  idempotency_key_reused: { status: 409, title: 'Idempotency-Key was already used with a different request', retryable: false, exitCode: 5 },
  invalid_request: { status: 400, title: 'Invalid request', retryable: false, exitCode: 2 },
  route_unknown: { status: 422, title: 'Unknown route', retryable: false, exitCode: 2 },
  payload_too_large: { status: 413, title: 'Request body too large', retryable: false, exitCode: 2 },
  provider_unknown: { status: 422, title: 'Unknown provider', retryable: false, exitCode: 2 },
  attempt_in_doubt: { status: 409, title: 'An attempt of this job is starting or in doubt', retryable: true, exitCode: 5 },
  attempt_in_flight: { status: 409, title: 'An attempt of this job is running', retryable: true, exitCode: 5 },
  attempt_finished: { status: 409, title: 'The attempt is already finished', retryable: false, exitCode: 5 },
  job_finished: { status: 409, title: 'The job is already finished', retryable: false, exitCode: 5 },
  job_failed: { status: 502, title: 'The job failed', retryable: false, exitCode: 6 },
  provider_not_certified: { status: 409, title: 'The provider has not passed the route contract', retryable: false, exitCode: 5 },
  chain_exhausted: { status: 409, title: 'Every provider of the route has been tried', retryable: false, exitCode: 5 },
  contract_violation: { status: 502, title: "The provider's output broke the route contract", retryable: false, exitCode: 6 },
  illegal_transition: { status: 409, title: 'Illegal state transition', retryable: false, exitCode: 5 },
  lease_lost: { status: 409, title: 'The executor no longer owns this attempt', retryable: false, exitCode: 5 },
  database_unavailable: { status: 503, title: 'Database unavailable', retryable: true, exitCode: 3, apiCode: 'unavailable' },
  conversation_too_large: { status: 413, title: 'The conversation this request continues is too large', retryable: false, exitCode: 2 },
  content_filter: { status: 400, title: "The provider refused the request under its content policy (the route passes it through)", retryable: false, exitCode: 1 },
  unavailable: { status: 503, title: 'Service unavailable, retry later', retryable: true, exitCode: 3 },
  config_invalid: { status: 500, title: 'Invalid configuration', retryable: false, exitCode: 2 },
  internal: { status: 500, title: 'Internal error', retryable: true, exitCode: 1 },
};

/** Options for {@link OnejobError}. */
export interface OnejobErrorOptions {
  /** The underlying error (a driver's, a socket's), kept for logs only. */
  readonly cause?: unknown;
  /** Extra machine-readable members for the problem document (e.g. `job_id`). */
  readonly details?: Readonly<Record<string, unknown>>;
}

/**
 * The one error base of onejob.
 *
 * @example throw new OnejobError('attempt_in_doubt', 'attempt 2 is unknown', { details: { job_id } })
 */
export class OnejobError extends Error {
  override readonly name = 'OnejobError';
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /** Extra machine-readable members. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: OnejobErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
  }

  /** The presentation of this error's code. */
  get spec(): ErrorSpec {
    return ERROR_TABLE[this.code];
  }

  /** Whether repeating the request may succeed. */
  get retryable(): boolean {
    return this.spec.retryable;
  }
}

/** Whether `e` is an {@link OnejobError}, optionally with the given code. */
export function isOnejobError(e: unknown, code?: ErrorCode): e is OnejobError {
  return e instanceof OnejobError && (code === undefined || e.code === code);
}
