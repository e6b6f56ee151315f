/**
 * The SQLite driver's values and rows: arguments as the worker binds them
 * (JSON as text, dates as epoch ms) and rows back as the store's types.
 */
import type { AttemptState, JobState } from '../../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobEventType } from '../../core/types.ts';

/** A row as the worker returns it. */
export type Row = Record<string, unknown>;

/** A value as JSON text (undefined as null). */
export function json(v: unknown): string {
  return JSON.stringify(v === undefined ? null : v);
}
/** JSON text parsed (NULL as null). */
export function parse(v: unknown): unknown {
  return v === null || v === undefined ? null : JSON.parse(String(v));
}
/** A date as epoch ms (null as NULL). */
export function ms(d: Date | null | undefined): number | null {
  return d ? d.getTime() : null;
}
/** Epoch ms as a date (NULL as null). */
export function date(v: unknown): Date | null {
  return v === null || v === undefined ? null : new Date(Number(v));
}
/** `f(row)`, or null without a row. */
export function mapOne<T>(row: Row | undefined, f: (r: Row) => T): T | null {
  return row ? f(row) : null;
}

/** A `jobs` row as a {@link Job}. */
export function toJob(r: Row): Job {
  return {
    id: String(r.id),
    ownerId: String(r.owner_id),
    idempotencyKey: String(r.idempotency_key),
    fingerprint: String(r.fingerprint),
    route: String(r.route),
    input: parse(r.input),
    metadata: parse(r.metadata) as Job['metadata'],
    providers: parse(r.providers) as string[],
    state: r.state as JobState,
    version: Number(r.version),
    completedBy: (r.completed_by as string | null) ?? null,
    result: parse(r.result),
    error: parse(r.error) as Job['error'],
    skipped: parse(r.skipped) as Job['skipped'],
    createdAt: date(r.created_at)!,
    updatedAt: date(r.updated_at)!,
    traceContext: (r.trace_context as string | null | undefined) ?? null,
    batchId: (r.batch_id as string | null | undefined) ?? null,
  };
}

/** An `attempts` row as an {@link Attempt}. */
export function toAttempt(r: Row): Attempt {
  return {
    id: String(r.id),
    ownerId: String(r.owner_id),
    jobId: String(r.job_id),
    number: Number(r.number),
    provider: String(r.provider),
    kind: r.kind as AttemptKind,
    state: r.state as AttemptState,
    baseVersion: Number(r.base_version),
    startedAt: date(r.started_at)!,
    deadlineAt: date(r.deadline_at),
    finishedAt: date(r.finished_at),
    error: parse(r.error) as Attempt['error'],
    leaseOwner: (r.lease_owner as string | null) ?? null,
    leaseToken: (r.lease_token as string | null) ?? null,
    leaseExpiresAt: date(r.lease_expires_at),
    usage: r.prompt_tokens === null || r.prompt_tokens === undefined
      ? null
      : { promptTokens: Number(r.prompt_tokens), completionTokens: Number(r.completion_tokens ?? 0), totalTokens: Number(r.total_tokens ?? 0) },
    costMicros: r.cost_micros === null || r.cost_micros === undefined ? null : Number(r.cost_micros),
    providerRequestId: (r.provider_request_id as string | null | undefined) ?? null,
    resolvedBy: (r.resolved_by as Attempt['resolvedBy'] | undefined) ?? null,
    unknownAt: date(r.unknown_at),
    lookupNextAt: date(r.lookup_next_at),
    lookupLastAt: date(r.lookup_last_at),
  };
}

/** A `job_events` row as a {@link JobEvent}. */
export function toEvent(r: Row): JobEvent {
  return {
    id: Number(r.id),
    ownerId: String(r.owner_id),
    jobId: String(r.job_id),
    attemptId: (r.attempt_id as string | null) ?? null,
    type: r.type as JobEventType,
    data: parse(r.data) as Record<string, unknown>,
    at: date(r.at)!,
  };
}
