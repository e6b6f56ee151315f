/**
 * Row mappers of the PostgreSQL driver: snake_case rows as `pg` returns them
 * (timestamptz already a `Date`, `json` already parsed, `bigint` already a
 * number through the driver's type parser) into the records of `core/types.ts`,
 * and JSON values into the text written to `json` columns.
 */
import type { AttemptState, JobState } from '../../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobEventType, RecordedError, ResolvedBy, SkippedProvider } from '../../core/types.ts';

/** The columns of `jobs` every job query selects or returns, in one place. */
export const JOB_COLUMNS =
  'owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, completed_by, result, error, skipped, created_at, updated_at, trace_context, batch_id';

/** The columns of `attempts` every attempt query selects or returns. */
export const ATTEMPT_COLUMNS =
  'owner_id, id, job_id, number, provider, kind, state, base_version, started_at, deadline_at, finished_at, error, lease_owner, lease_token, lease_expires_at, ' +
  'prompt_tokens, completion_tokens, total_tokens, cost_micros, provider_request_id, resolved_by, unknown_at, lookup_next_at, lookup_last_at';

/** The columns of `job_events` every event query selects. */
export const EVENT_COLUMNS = 'owner_id, id, job_id, attempt_id, type, data, at';

/** A `jobs` row as selected with {@link JOB_COLUMNS}. */
export interface JobRow {
  owner_id: string;
  id: string;
  idempotency_key: string;
  fingerprint: string;
  route: string;
  input: unknown;
  metadata: Record<string, unknown> | null;
  providers: string[];
  state: JobState;
  version: number;
  completed_by: string | null;
  result: unknown;
  error: RecordedError | null;
  skipped: SkippedProvider[];
  created_at: Date;
  updated_at: Date;
  trace_context: string | null;
  batch_id: string | null;
}

/** An `attempts` row as selected with {@link ATTEMPT_COLUMNS}. */
export interface AttemptRow {
  owner_id: string;
  id: string;
  job_id: string;
  number: number;
  provider: string;
  kind: AttemptKind;
  state: AttemptState;
  base_version: number;
  started_at: Date;
  deadline_at: Date | null;
  finished_at: Date | null;
  error: RecordedError | null;
  lease_owner: string | null;
  lease_token: string | null;
  lease_expires_at: Date | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
  cost_micros: number | null;
  provider_request_id: string | null;
  resolved_by: ResolvedBy | null;
  unknown_at: Date | null;
  lookup_next_at: Date | null;
  lookup_last_at: Date | null;
}

/** A `job_events` row as selected with {@link EVENT_COLUMNS}. */
export interface EventRow {
  owner_id: string;
  id: number;
  job_id: string;
  attempt_id: string | null;
  type: JobEventType;
  data: Record<string, unknown>;
  at: Date;
}

/**
 * The text to write to a nullable `json` column: `JSON.stringify(value)`, or
 * SQL NULL for `null`/`undefined`.
 *
 * @example jsonParam({ b: 1, a: 2 }) // '{"b":1,"a":2}' (key order kept: the column is json, not jsonb)
 */
export function jsonParam(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = JSON.stringify(value);
  return text === undefined ? null : text;
}

/**
 * The text to write to a NOT NULL `json` column holding any JSON value: a JSON
 * `null` is the text `null`, never SQL NULL (a job's `input` may be `null`).
 */
export function jsonValueParam(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value);
}

/** A job record from a `jobs` row. */
export function jobFromRow(r: JobRow): Job {
  return {
    id: r.id,
    ownerId: r.owner_id,
    idempotencyKey: r.idempotency_key,
    fingerprint: r.fingerprint,
    route: r.route,
    input: r.input,
    metadata: r.metadata ?? null,
    providers: r.providers,
    state: r.state,
    version: r.version,
    completedBy: r.completed_by,
    result: r.result ?? null,
    error: r.error ?? null,
    skipped: r.skipped ?? [],
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    traceContext: r.trace_context ?? null,
    batchId: r.batch_id ?? null,
  };
}

/** An attempt record from an `attempts` row. */
export function attemptFromRow(r: AttemptRow): Attempt {
  return {
    id: r.id,
    ownerId: r.owner_id,
    jobId: r.job_id,
    number: r.number,
    provider: r.provider,
    kind: r.kind,
    state: r.state,
    baseVersion: r.base_version,
    startedAt: r.started_at,
    deadlineAt: r.deadline_at,
    finishedAt: r.finished_at,
    error: r.error ?? null,
    leaseOwner: r.lease_owner,
    leaseToken: r.lease_token,
    leaseExpiresAt: r.lease_expires_at,
    usage: r.prompt_tokens === null || r.prompt_tokens === undefined
      ? null
      : { promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens ?? 0, totalTokens: r.total_tokens ?? 0 },
    costMicros: r.cost_micros ?? null,
    providerRequestId: r.provider_request_id ?? null,
    resolvedBy: r.resolved_by ?? null,
    unknownAt: r.unknown_at ?? null,
    lookupNextAt: r.lookup_next_at ?? null,
    lookupLastAt: r.lookup_last_at ?? null,
  };
}

/** An event record from a `job_events` row. */
export function eventFromRow(r: EventRow): JobEvent {
  return {
    id: r.id,
    ownerId: r.owner_id,
    jobId: r.job_id,
    attemptId: r.attempt_id,
    type: r.type,
    data: r.data ?? {},
    at: r.at,
  };
}
