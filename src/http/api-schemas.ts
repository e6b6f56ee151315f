/**
 * The JSON Schemas of the HTTP API, declared once.
 *
 * Fastify validates requests and serializes responses with them, and
 * @fastify/swagger turns the same objects into the OpenAPI 3.1 document at
 * `GET /openapi.json`. Shared shapes (`Job`, `Attempt`, `Problem`) are
 * registered with `app.addSchema` and referenced as `Job#`. The TypeScript
 * type of each request part is derived from its schema (json-schema-to-ts
 * `FromSchema`), so the three can never disagree.
 */
import type { FromSchema } from 'json-schema-to-ts';
import { ATTEMPT_STATES, JOB_STATES } from '../core/states.ts';
import { RESOLVED_BY } from '../core/types.ts';

/** A recorded error, or null. */
const nullableError = {
  type: ['object', 'null'],
  description: 'A machine-readable `code`, a human `message`, and optional `details`; null when there is none.',
  properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} },
  additionalProperties: true,
} as const;

const timestamp = { type: 'string', format: 'date-time' } as const;
const nullableTimestamp = { type: ['string', 'null'], format: 'date-time' } as const;

/** An attempt: one try of a job on one provider. */
export const attemptSchema = {
  $id: 'Attempt',
  type: 'object',
  description: 'One try of a job on one provider.',
  required: ['id', 'job_id', 'number', 'provider', 'kind', 'state', 'started_at', 'deadline_at', 'finished_at', 'error', 'provider_request_id', 'resolved_by'],
  properties: {
    id: { type: 'string', examples: ['att_0193…'] },
    job_id: { type: 'string' },
    number: { type: 'integer', minimum: 1, description: '1, 2, … within the job.' },
    provider: { type: 'string' },
    kind: { type: 'string', enum: ['first', 'failover', 'hedge', 'manual'], description: 'Why the attempt was started.' },
    state: { type: 'string', enum: [...ATTEMPT_STATES] },
    started_at: timestamp,
    deadline_at: { ...nullableTimestamp, description: 'The deadline in force: past it without an answer (a stream: without its first output) the attempt is `unknown` (`deadline_exceeded`). Null before the attempt is running, and once a stream\'s output flows (then only `idleTimeoutMs` of silence between its events ends it: `stream_stalled`).' },
    finished_at: nullableTimestamp,
    error: nullableError,
    usage: {
      type: ['object', 'null'],
      description: 'The tokens the provider reported for this attempt, normalized across protocols; null when none came back.',
      required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
      properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
    },
    cost_usd: { type: ['number', 'null'], description: "What the attempt cost in USD at its provider's `pricing` (stored as integer micro-dollars); null when unpriced or without usage." },
    provider_request_id: {
      type: ['string', 'null'],
      description: "The provider's own id of the request (a Responses `resp_…` id, a task id, else its `x-request-id` / `request-id` header), recorded as soon as the provider sent it; null until then.",
    },
    resolved_by: {
      type: ['string', 'null'],
      enum: [...RESOLVED_BY, null],
      description: 'Who ended the doubt: `lookup` (the provider was asked), `callback` (a signed task callback), `policy` (`settleUnknownAfterMs`), `late_answer` (its own answer, after it was unknown), `operator` (resolve endpoint, CLI, dashboard). Null while undecided or when decided by its own answer.',
    },
    unknown_at: { ...nullableTimestamp, description: 'When the attempt became `unknown`; null if it never was.' },
    last_checked_at: { ...nullableTimestamp, description: 'When the provider was last asked about the attempt (lookups found nothing definite yet); null if never.' },
    next_check_at: { ...nullableTimestamp, description: 'While `unknown` on a provider that can be asked: when it is asked next (null: at the first pass, or it cannot be asked).' },
  },
} as const;

/** A job with its attempts. */
export const jobSchema = {
  $id: 'Job',
  type: 'object',
  description: 'The durable record of one intent.',
  required: [
    'id', 'idempotency_key', 'route', 'input', 'metadata', 'providers', 'state', 'version', 'completed_by',
    'result', 'error', 'attempts', 'skipped', 'created_at', 'updated_at',
  ],
  properties: {
    id: { type: 'string', examples: ['job_0193…'] },
    idempotency_key: { type: 'string' },
    route: { type: 'string' },
    input: { description: 'The input exactly as given (any JSON).' },
    metadata: { type: ['object', 'null'], additionalProperties: true },
    providers: { type: 'array', items: { type: 'string' }, description: 'The provider chain resolved from the route at creation.' },
    state: { type: 'string', enum: [...JOB_STATES] },
    version: { type: 'integer', description: 'Bumped when the outcome is decided.' },
    completed_by: { type: ['string', 'null'], description: 'The winning attempt id, or null.' },
    result: { description: "The winning attempt's output exactly as produced, or null." },
    error: nullableError,
    attempts: { type: 'array', items: { $ref: 'Attempt#' }, description: 'Oldest first.' },
    skipped: {
      type: 'array',
      description: 'Providers passed over by failover, and why.',
      items: {
        type: 'object',
        required: ['provider', 'reason'],
        properties: { provider: { type: 'string' }, reason: { type: 'string' } },
      },
    },
    created_at: timestamp,
    updated_at: timestamp,
    cost_usd: { type: ['number', 'null'], description: 'The sum of every attempt\'s cost, losers included (what the intent really cost); null when no attempt is priced.' },
  },
} as const;

/** An RFC 9457 problem document with onejob's stable `code`. */
export const problemSchema = {
  $id: 'Problem',
  type: 'object',
  description: 'RFC 9457 problem details; `code` is stable and machine-readable. Extra members (e.g. `attempt_id`) may follow.',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string', examples: ['urn:onejob:error:idempotency_key_reused'] },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string' },
  },
  additionalProperties: true,
} as const;

/** The answer of `POST /v1/chat/completions`, in OpenAI's shape. */
export const chatCompletionSchema = {
  $id: 'ChatCompletion',
  type: 'object',
  description: "The winning attempt's completion in OpenAI's `chat.completion` shape.",
  required: ['id', 'object', 'created', 'model', 'choices', 'usage'],
  properties: {
    id: { type: 'string', description: '`chatcmpl-<job id>`: the same for every answer of one job.', examples: ['chatcmpl-job_0193…'] },
    object: { type: 'string', const: 'chat.completion' },
    created: { type: 'integer', description: 'When the winning attempt finished, in Unix seconds.' },
    model: { type: 'string', description: 'The model the provider says answered.' },
    provider: { type: 'string', description: 'The configured provider whose attempt won.' },
    choices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['index', 'message', 'finish_reason', 'logprobs'],
        properties: {
          index: { type: 'integer' },
          message: {
            type: 'object',
            required: ['role', 'content', 'refusal'],
            properties: {
              role: { type: 'string', const: 'assistant' },
              content: {
                type: ['string', 'null'],
                description: "The job result's content; a JSON value (route contract with an output schema) as its JSON text; null when the answer is only tool calls or a refusal.",
              },
              refusal: { type: ['string', 'null'], description: "The provider's refusal text, if it sent one." },
              tool_calls: {
                type: 'array',
                description: "The tool calls of the answer (the job result's `tool_calls`), in OpenAI's shape; absent when there are none.",
                items: {
                  type: 'object',
                  required: ['id', 'type', 'function'],
                  properties: {
                    id: { type: 'string' },
                    type: { type: 'string', const: 'function' },
                    function: {
                      type: 'object',
                      required: ['name', 'arguments'],
                      properties: { name: { type: 'string' }, arguments: { type: 'string', description: 'JSON text, as the model wrote it.' } },
                    },
                  },
                },
              },
            },
          },
          finish_reason: { type: 'string', description: '`stop`, `length`, `tool_calls`, `content_filter`.' },
          logprobs: {
            type: ['object', 'null'],
            additionalProperties: true,
            description: 'Token log probabilities when the request asked for them (`logprobs: true`) and the provider sent them, else null.',
          },
        },
      },
    },
    usage: {
      type: 'object',
      required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
      properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
    },
  },
} as const;

/** Every shared schema, to register with `app.addSchema`. */
export const SHARED_SCHEMAS = [attemptSchema, jobSchema, problemSchema, chatCompletionSchema] as const;

const problemContent = { 'application/problem+json': { schema: { $ref: 'Problem#' } } } as const;
/** Error responses as documented on every route. */
export const errorResponses = {
  '4xx': { description: 'A problem with the request (see `code`).', content: problemContent },
  '5xx': { description: 'A problem on the server side (see `code`).', content: problemContent },
} as const;

/** `{id}` path parameter. */
export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;
/** Path parameters with an id. */
export type IdParams = FromSchema<typeof idParams>;

/** `Authorization` header, for the document; the check itself is the auth hook. */
export const bearerSecurity = [{ bearerAuth: [] }];

/** Body of `POST /v1/jobs`. */
export const createJobBody = {
  type: 'object',
  required: ['route', 'input'],
  additionalProperties: false,
  properties: {
    route: { type: 'string', minLength: 1, description: 'A configured route name.' },
    input: { description: 'Any JSON; stored and handed to the providers as given.' },
    metadata: { type: 'object', description: 'Free-form object stored with the job.' },
  },
} as const;
/** Body of `POST /v1/jobs`. */
export type CreateJobBody = FromSchema<typeof createJobBody>;

/** Headers of `POST /v1/jobs` (documented; checked by hand for precise codes). */
export const createJobHeaders = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      description: 'Required (unless `keyless.mode` is `fingerprint`: then, when absent, the fingerprint of the body stands for it; CONTRACT §12). 1–255 visible ASCII characters (`!`..`~`). Same key + same body → the same job.',
    },
  },
} as const;

/** Headers of the streaming endpoints (`/v1/chat/completions`, `/v1/messages`): the create headers and `Last-Event-ID` (CONTRACT §13). */
export const streamingJobHeaders = {
  type: 'object',
  properties: {
    ...createJobHeaders.properties,
    'last-event-id': {
      type: 'string',
      description: 'With `stream: true` on a duplicate (same key and body): only the events after this SSE id are sent, live or from the stored stream (CONTRACT §13).',
    },
  },
} as const;

/** Query of `GET /v1/jobs/{id}`. */
export const getJobQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    wait: { type: 'number', minimum: 0, maximum: 60, description: 'Hold the request up to this many seconds until the job is terminal or unknown.' },
  },
} as const;
/** Query of `GET /v1/jobs/{id}`. */
export type GetJobQuery = FromSchema<typeof getJobQuery>;

/** The search filters of `GET /v1/jobs` (additive; see `http/routes/job-search.ts`). */
export const jobSearchQueryProperties = {
  route: { type: 'string', minLength: 1, maxLength: 200, description: 'Only jobs of this route.' },
  provider: { type: 'string', minLength: 1, maxLength: 200, description: 'Only jobs with an attempt on this provider.' },
  since: { type: 'string', format: 'date-time', description: 'Only jobs created at or after this RFC 3339 time.' },
  until: { type: 'string', format: 'date-time', description: 'Only jobs created before this RFC 3339 time.' },
  q: { type: 'string', minLength: 1, maxLength: 255, description: 'A job id (exact) or the start of an idempotency key.' },
  order: { type: 'string', enum: ['newest', 'oldest'], description: 'Newest first (default) or oldest first (e.g. the jobs in doubt, `state=unknown&order=oldest`).' },
} as const;

/** Query of `GET /v1/jobs`. */
export const listJobsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    state: { type: 'string', enum: [...JOB_STATES] },
    limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
    cursor: { type: 'string', minLength: 1, description: "The previous page's `next_cursor`." },
    ...jobSearchQueryProperties,
  },
} as const;
/** Query of `GET /v1/jobs`. */
export type ListJobsQuery = FromSchema<typeof listJobsQuery>;

/** Body of `POST /v1/jobs/{id}/attempts`. */
export const startAttemptBody = {
  type: 'object',
  additionalProperties: false,
  properties: { provider: { type: 'string', minLength: 1, description: 'Default: the next provider of the chain.' } },
} as const;
/** Body of `POST /v1/jobs/{id}/attempts`. */
export type StartAttemptBody = FromSchema<typeof startAttemptBody>;

/** Why an operator resolved or cancelled: kept in the event log. */
const operatorReason = { type: 'string', minLength: 1, maxLength: 2000, description: 'Why (kept in the event log).' } as const;

/** Body of `POST /v1/jobs/{id}/cancel` (optional). */
export const cancelJobBody = {
  type: 'object',
  additionalProperties: false,
  properties: { reason: operatorReason },
} as const;
/** Body of `POST /v1/jobs/{id}/cancel`. */
export type CancelJobBody = FromSchema<typeof cancelJobBody>;

/** Body of `POST /v1/attempts/{id}/resolve`. */
export const resolveAttemptBody = {
  type: 'object',
  required: ['state'],
  discriminator: { propertyName: 'state' },
  oneOf: [
    {
      type: 'object',
      title: 'Succeeded',
      required: ['state', 'result'],
      additionalProperties: false,
      properties: { state: { const: 'succeeded' }, result: { description: "Becomes the job's result exactly as given." }, reason: operatorReason },
    },
    {
      type: 'object',
      title: 'Failed',
      required: ['state'],
      additionalProperties: false,
      properties: { state: { const: 'failed' }, error: { description: 'Any JSON; `{code, message, details?}` is kept as is.' }, reason: operatorReason },
    },
    {
      type: 'object',
      title: 'Cancelled',
      required: ['state'],
      additionalProperties: false,
      properties: { state: { const: 'cancelled' }, error: {}, reason: operatorReason },
    },
  ],
} as const;
/** Body of `POST /v1/attempts/{id}/resolve`. */
export type ResolveAttemptBody = FromSchema<typeof resolveAttemptBody>;

/** Body of `POST /v1/chat/completions`: an OpenAI Chat Completions request (other members pass through to the providers). */
export const chatCompletionBody = {
  type: 'object',
  required: ['model', 'messages'],
  additionalProperties: true,
  properties: {
    model: { type: 'string', minLength: 1, description: 'A configured route name, or `route:<name>`.' },
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role'],
        additionalProperties: true,
        properties: {
          role: { type: 'string', minLength: 1 },
          // A content array holds parts (`{"type": "text", "text": …}`, images…): anything else is a 422 here, not a provider's refusal later.
          content: { type: ['string', 'array', 'null'], items: { type: 'object', required: ['type'], properties: { type: { type: 'string', minLength: 1 } } } },
        },
      },
    },
    stream: { type: 'boolean', description: 'true: the answer is streamed as Server-Sent Events (CONTRACT §7).' },
    n: { type: 'integer', description: 'Must be 1 or absent: one choice per job.' },
  },
} as const;
/** Body of `POST /v1/chat/completions`. */
export type ChatCompletionBody = FromSchema<typeof chatCompletionBody>;
