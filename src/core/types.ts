/**
 * The domain records: jobs, attempts, events. Plain data, shared by every layer.
 */
import type { AttemptState, JobState } from './states.ts';
import type { TokenUsage } from './usage.ts';

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** An error recorded on an attempt or a job. `code` is stable and machine-readable. */
export interface RecordedError {
  readonly code: string;
  readonly message: string;
  /** Anything the provider or a check reported (status, findings, the resolver's payload). */
  readonly details?: unknown;
}

/** A provider passed over by failover, and why (e.g. `not_certified`). */
export interface SkippedProvider {
  readonly provider: string;
  readonly reason: string;
}

/** Why an attempt was started. */
export const AttemptKind = {
  /** The first attempt of a job, started by the executor. */
  First: 'first',
  /** Started after a definite failure, on the next eligible provider of the chain. */
  Failover: 'failover',
  /** Started beside a running attempt after `hedgeAfterMs` of silence. */
  Hedge: 'hedge',
  /** Started by `POST /v1/jobs/{id}/attempts` (the fallback button). */
  Manual: 'manual',
} as const;
export type AttemptKind = (typeof AttemptKind)[keyof typeof AttemptKind];

/** A job: the durable record of one intent. */
export interface Job {
  readonly id: string;
  readonly ownerId: string;
  readonly idempotencyKey: string;
  /** `sha256:<hex>` of the canonical request body. */
  readonly fingerprint: string;
  readonly route: string;
  readonly input: unknown;
  readonly metadata: Record<string, unknown> | null;
  /** The provider chain resolved from the route at creation. */
  readonly providers: readonly string[];
  readonly state: JobState;
  /** Bumped only when the job's outcome is decided (succeeded, failed, cancelled). */
  readonly version: number;
  /** The winning attempt's id, or null. */
  readonly completedBy: string | null;
  readonly result: unknown;
  readonly error: RecordedError | null;
  readonly skipped: readonly SkippedProvider[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /**
   * The W3C trace context (`traceparent`, optionally `;`-joined with
   * `tracestate`) the job was created under, or null: how the executor and a
   * duplicate request join the intent's one trace (docs/tracing.md).
   */
  readonly traceContext?: string | null;
  /** The batch this job is a line of (CONTRACT §17), or null/absent: interactive work. */
  readonly batchId?: string | null;
}

/** An attempt: one try of a job on one provider. */
export interface Attempt {
  readonly id: string;
  readonly ownerId: string;
  readonly jobId: string;
  /** 1, 2, … within the job. */
  readonly number: number;
  readonly provider: string;
  readonly kind: AttemptKind;
  readonly state: AttemptState;
  /** The job `version` this attempt will compare-and-swap against. */
  readonly baseVersion: number;
  readonly startedAt: Date;
  /** When the attempt becomes `unknown` if no definite outcome arrived (set when an executor claims it). */
  readonly deadlineAt: Date | null;
  readonly finishedAt: Date | null;
  readonly error: RecordedError | null;
  /** The executor that holds the lease, or null (unclaimed, or released). */
  readonly leaseOwner: string | null;
  /** The fencing token of the current claim; every executor write must present it. */
  readonly leaseToken: string | null;
  readonly leaseExpiresAt: Date | null;
  /** The tokens the provider reported for this attempt (CONTRACT §8), or null when none came back. */
  readonly usage: TokenUsage | null;
  /** What the attempt cost, in integer micro-dollars (see `core/usage.ts`), or null when unpriced or without usage. */
  readonly costMicros: number | null;
  /**
   * The provider's own id of the request (a Responses `resp_…` id, a task id,
   * else its `x-request-id` / `request-id` header), recorded as soon as the
   * provider sent it (CONTRACT §11); null until then.
   */
  readonly providerRequestId: string | null;
  /** Who ended the attempt's doubt (CONTRACT §11); null while undecided or when decided by its own answer. */
  readonly resolvedBy: ResolvedBy | null;
  /** When the attempt last became `unknown`, or null. */
  readonly unknownAt: Date | null;
  /** When the reconciler asks the provider about it next (an `unknown` attempt on a provider with a lookup), or null. */
  readonly lookupNextAt: Date | null;
  /** When the reconciler last asked the provider about it, or null. */
  readonly lookupLastAt: Date | null;
}

/** Who ended an attempt's doubt (CONTRACT §11). */
export const ResolvedBy = {
  /** The reconciler (or `POST /v1/attempts/{id}/check`) asked the provider and got a definite answer. */
  Lookup: 'lookup',
  /** A task service's signed callback (`POST /v1/attempts/{id}/callback`). */
  Callback: 'callback',
  /** `settleUnknownAfterMs` passed: failed with code `settled_by_policy`. */
  Policy: 'policy',
  /** The provider's own answer, arrived after the attempt was already `unknown`. */
  LateAnswer: 'late_answer',
  /** A person: the resolve endpoint, the CLI, the dashboard. */
  Operator: 'operator',
} as const;
export type ResolvedBy = (typeof ResolvedBy)[keyof typeof ResolvedBy];
/** Every {@link ResolvedBy}, in declaration order. */
export const RESOLVED_BY: readonly ResolvedBy[] = Object.values(ResolvedBy);

/** A job with its attempts, oldest first. */
export interface JobWithAttempts extends Job {
  readonly attempts: readonly Attempt[];
}

/** Event types of the append-only log. */
export type JobEventType =
  | 'job.created'
  | 'job.state_changed'
  | 'job.succeeded'
  | 'job.failed'
  | 'job.cancelled'
  | 'attempt.started'
  | 'attempt.claimed'
  | 'attempt.running'
  | 'attempt.succeeded'
  | 'attempt.failed'
  | 'attempt.cancelled'
  | 'attempt.unknown'
  | 'attempt.superseded'
  | 'attempt.lease_expired'
  /** A never-sent first attempt handed back by its lease's token (its create went unanswered): `starting` again, unclaimed. */
  | 'attempt.handed_back'
  /** A late answer's usage, recorded on an attempt already settled another way (e.g. resolved). */
  | 'attempt.usage_recorded'
  | 'provider.skipped'
  | 'race.lost'
  /** An attempt claimed the job's stream at its first output (CONTRACT §7). */
  | 'attempt.stream_claimed';

/** One row of the append-only event log. */
export interface JobEvent {
  readonly id: number;
  readonly ownerId: string;
  readonly jobId: string;
  readonly attemptId: string | null;
  readonly type: JobEventType;
  readonly data: Record<string, unknown>;
  readonly at: Date;
}
