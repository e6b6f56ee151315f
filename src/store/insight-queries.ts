/**
 * The read model's named queries, one implementation per driver
 * (`postgres/insight-queries.ts`, `sqlite/insight-queries.ts`): what the
 * dashboard and `GET /v1/usage` read. Internal like {@link DriverQueries}; {@link JobStore} and
 * `store/insights.ts` are the public surface.
 *
 * Every statement filters by `owner_id`.
 */
import type { AttemptState, JobState } from '../core/states.ts';
import type { Attempt, Job, JobEvent } from '../core/types.ts';

/** Parameters of {@link InsightQueries.jobSearch}. */
export interface JobSearchParams {
  readonly ownerId: string;
  readonly state?: JobState | undefined;
  readonly route?: string | undefined;
  /** Jobs with at least one attempt on this provider. */
  readonly provider?: string | undefined;
  /** Created at or after. */
  readonly createdSince?: Date | undefined;
  /** Created strictly before. */
  readonly createdUntil?: Date | undefined;
  /** The job id exactly, or an idempotency key starting with this text. */
  readonly text?: string | undefined;
  /** `newest` (created_at DESC, id DESC) or `oldest` (ASC). */
  readonly order: 'newest' | 'oldest';
  readonly limit: number;
  /** Rows strictly after this position in the chosen order. */
  readonly after?: { readonly createdAt: Date; readonly id: string } | undefined;
}

/** Parameters of {@link InsightQueries.usageTotals}: attempts started in [since, until). */
export interface UsageTotalsParams {
  readonly ownerId: string;
  readonly since: Date;
  readonly until: Date;
  /** Also group by start time in buckets this long (epoch-aligned); null: one row per group. */
  readonly bucketMs: number | null;
}

/** One group of {@link InsightQueries.usageTotals}. */
export interface UsageTotalRow {
  readonly route: string;
  readonly provider: string;
  /** The attempts' state. */
  readonly outcome: AttemptState;
  /** The bucket's start (epoch ms), or null without buckets. */
  readonly bucketStartMs: number | null;
  readonly attempts: number;
  /** Attempts that reported usage. */
  readonly attemptsWithUsage: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
  /** Sum of the priced attempts' costs, or null when none was priced. */
  readonly costMicros: number | null;
}


/** Parameters of {@link InsightQueries.doubtQueue}. */
export interface DoubtQueueParams {
  readonly ownerId: string;
  readonly limit: number;
  /** Rows strictly after this position: (in doubt since, attempt id). */
  readonly after?: { readonly since: Date; readonly id: string } | undefined;
}

/** One row of {@link InsightQueries.doubtQueue}: an attempt in doubt and the job it blocks. */
export interface DoubtRow {
  readonly attempt: Attempt;
  readonly job: Pick<Job, 'id' | 'idempotencyKey' | 'route' | 'state' | 'input' | 'createdAt'>;
}

/** The read model's queries (autocommit). */
export interface InsightQueries {
  /** The owner's jobs matching every given filter, in `order`, at most `limit`. */
  jobSearch(params: JobSearchParams): Promise<Job[]>;
  /** The owner's attempts grouped by (route, provider, state[, bucket]), ordered by those. */
  usageTotals(params: UsageTotalsParams): Promise<UsageTotalRow[]>;
  /**
   * The owner's `unknown` attempts of jobs not yet terminal, each with its
   * job, in one statement: oldest doubt first (`unknown_at`, else
   * `started_at`; then id), at most `limit`.
   */
  doubtQueue(params: DoubtQueueParams): Promise<DoubtRow[]>;
  /** The owner's events with id greater than `afterId`, by id, at most `limit`. */
  eventListByOwner(ownerId: string, afterId: number, limit: number): Promise<JobEvent[]>;
  /** The owner's greatest event id, 0 when none. */
  eventLastId(ownerId: string): Promise<number>;
}
