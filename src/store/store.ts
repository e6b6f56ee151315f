/**
 * The store: the public, engine-independent surface over a {@link Driver}.
 *
 * Every mutating method is one transaction that locks the job row, loads the
 * job's attempts, asks the pure rules of `core/job-rules.ts`, and writes the
 * answer with guarded SQL. The HTTP API, the executor and the CLI all go
 * through this interface; none of them sees SQL.
 */
import type { OwnerUse } from './driver.ts';
import type { BatchStore } from './batch-store.ts';
import type { EligibilityCheck, RetryRequest } from '../core/job-rules.ts';
import type { AttemptState, JobState } from '../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobWithAttempts, RecordedError, ResolvedBy } from '../core/types.ts';
import type { CertificationRow, CertificationVerdict, DriverCapabilities, MigrationResult, RetentionBatchResult, StreamBatchRow } from './driver.ts';
import type { TokenUsage } from '../core/usage.ts';
import type { Insights, RecordLateUsageParams } from './insights.ts';
import type { keylessIdempotencyKey } from '../core/fingerprint.ts';

/**
 * Parameters of {@link Store.createJob}: an idempotency key, or `keyless`
 * (the request sent none, CONTRACT §12).
 */
export type CreateJobParams = CreateJobCommonParams & (
  | { readonly idempotencyKey: string; readonly keyless?: undefined }
  | {
      readonly idempotencyKey?: undefined;
      /**
       * Keyless creation (CONTRACT §12, `keyless.mode: "fingerprint"`; every
       * keyless `/mcp` tool call, §14): the request's fingerprint stands for
       * the key. While a job of the owner with this fingerprint is
       * undecided, the request joins it (the database allows one such job
       * per (owner, fingerprint): a partial UNIQUE index); for `windowMs`
       * after it finished, the request replays it; after that it creates a
       * new job, whose key the store makes ({@link keylessIdempotencyKey}:
       * unique, so UNIQUE(owner, key) holds). The answer's
       * `job.idempotencyKey` is the key used. A keyless create takes the
       * general path: `firstAttempt` is ignored (the job is queued and
       * claimed by an executor).
       */
      readonly keyless: { readonly windowMs: number };
    }
);

/** What every {@link CreateJobParams} has. */
export interface CreateJobCommonParams {
  readonly ownerId: string;
  readonly route: string;
  readonly input: unknown;
  readonly metadata?: Record<string, unknown> | null | undefined;
  /** The route's provider chain, resolved now and stored on the job. */
  readonly providers: readonly string[];
  /**
   * The fingerprint of the request; defaults to the fingerprint of
   * `{ route, input, metadata }`. Give it when the request has another shape
   * (the OpenAI-compatible endpoint fingerprints its whole body).
   */
  readonly fingerprint?: string | undefined;
  /** The W3C trace context to keep on a new row (docs/tracing.md); ignored on a replay. */
  readonly traceContext?: string | null | undefined;
  /**
   * The route's eligibility check, for a create that writes its first
   * attempt without a lease (an owner under a spend limit reserves it with
   * the job, CONTRACT §16); `firstAttempt.eligible` wins when leased.
   */
  readonly eligible?: EligibilityCheck | undefined;
  /**
   * An owner at its `concurrency` limit (CONTRACT §16): `refuse` answers
   * `concurrency_limited` (a gateway request), `queue` (default) creates the
   * job queued, its first attempt started when there is room (`POST /v1/jobs`).
   */
  readonly whenBusy?: 'refuse' | 'queue' | undefined;
  /**
   * The fast path: write the job's first attempt with it, leased to this
   * executor, in the same commit, so the creating process calls the provider
   * at once (no claim). Skipped (the job is queued as usual) when the first
   * provider of the chain is not eligible; ignored on a replay.
   */
  readonly firstAttempt?: (LeaseRequest & {
    readonly eligible?: EligibilityCheck | undefined;
    /**
     * The attempt's id and lease token, chosen by the caller (default: new
     * ones): when the insert's answer is lost, the caller can still release
     * the lease of an attempt that may have been written and was surely never sent.
     */
    readonly attemptId?: string | undefined;
    readonly leaseToken?: string | undefined;
  }) | undefined;
}

/** Result of {@link Store.createJob}. */
/** How {@link Store.handBackUnsent} ended. */
export type HandBackResult = 'handed_back' | 'absent' | 'refused';

export interface CreateJobResult {
  readonly job: JobWithAttempts;
  /** True for the caller whose INSERT created the row; false for a replay. */
  readonly created: boolean;
  /** With `firstAttempt`: the attempt leased to the caller, to run now. */
  readonly claimed?: ClaimedAttempt | undefined;
}

/** Parameters of {@link Store.listJobs}. */
export interface ListJobsParams {
  readonly ownerId: string;
  readonly state?: JobState | undefined;
  /** 1 to 200; default 50. */
  readonly limit?: number | undefined;
  /** An opaque cursor from a previous page's `nextCursor`. */
  readonly cursor?: string | undefined;
}

/** One page of jobs. */
export interface ListJobsResult {
  readonly jobs: readonly JobWithAttempts[];
  /** Cursor of the next page, or null on the last one. */
  readonly nextCursor: string | null;
}

/** A lease to take on a new attempt at birth (executor-started attempts). */
export interface LeaseRequest {
  readonly leaseOwner: string;
  readonly leaseMs: number;
}

/** Parameters of {@link Store.startAttempt}. */
export interface StartAttemptParams {
  readonly ownerId: string;
  readonly jobId: string;
  readonly kind: AttemptKind;
  /** An explicit provider; default: the next eligible provider of the chain. */
  readonly provider?: string | undefined;
  /** The route's hedge delay (null: no hedging). */
  readonly hedgeAfterMs: number | null;
  /** The certification gate; default: every provider eligible. */
  readonly eligible?: EligibilityCheck | undefined;
  /** Claim the attempt at birth (the executor's own hedges and first attempts). */
  readonly lease?: LeaseRequest | undefined;
}

/** The definite outcome of an attempt, reported by an executor or an explicit resolve. */
export type AttemptOutcome =
  | ({ readonly state: 'succeeded'; readonly result: unknown } & OutcomeUsage)
  | ({ readonly state: 'failed'; readonly error: RecordedError } & OutcomeUsage)
  | { readonly state: 'cancelled'; readonly error?: RecordedError | undefined }
  /** A loser stopped by its executor after another attempt won: only once the job is decided. */
  | ({ readonly state: 'superseded'; readonly error?: RecordedError | undefined } & OutcomeUsage);

/**
 * The usage an outcome reports (CONTRACT §8), recorded on the attempt whatever
 * its end (succeeded, superseded, failed). Absent: leave the columns as they are.
 */
export interface OutcomeUsage {
  readonly usage?: TokenUsage | null | undefined;
  /** Integer micro-dollars (see `core/usage.ts`). */
  readonly costMicros?: number | null | undefined;
}

/** Options of {@link Store.cancelJob}. */
export interface CancelJobOptions {
  /** Why, kept in the event log (`job.cancelled`'s `reason`). */
  readonly reason?: string | undefined;
  /** Who, for the event log (`api`, `cli`). */
  readonly actor?: string | undefined;
}

/** Parameters of {@link Store.settleAttempt}. */
export interface SettleAttemptParams {
  readonly ownerId: string;
  readonly attemptId: string;
  readonly outcome: AttemptOutcome;
  /**
   * The executor's lease; when given, the write applies only to the attempt
   * this lease's token still names: held (unexpired), or expired without
   * anybody else taking it (the token proves this executor ran it, so an
   * answer held through a database outage longer than the lease is still
   * recorded, from `unknown` too). Explicit resolves give none.
   */
  readonly fence?: { readonly leaseOwner: string; readonly leaseToken: string } | undefined;
  /** The gate for the failover this settlement may cause; default: every provider eligible. */
  readonly eligible?: EligibilityCheck | undefined;
  /** Who settled it, for the event log (`executor:<id>`, `api`, `cli`). */
  readonly actor?: string | undefined;
  /** The attempt's job, when the caller knows it: a fenced success may then settle in one statement. */
  readonly jobId?: string | undefined;
  /** Why (an operator's resolve), kept in the event log beside the actor. */
  readonly reason?: string | undefined;
  /**
   * Who ended the attempt's doubt (CONTRACT §11), recorded as `resolved_by`.
   * Default: `late_answer` when the attempt was `unknown` (its own answer came
   * late), else none (decided by its own answer).
   */
  readonly resolvedBy?: ResolvedBy | undefined;
  /** The provider's id of the request, when the answer carried one (kept when absent). */
  readonly providerRequestId?: string | undefined;
  /**
   * A `failed` outcome that may be retried where it happened (a 429 or 503
   * with `Retry-After`, a refused connection) under its provider's policy:
   * the next attempt is then on the same provider, unclaimed until it is due
   * (its `startedAt` is now + the wait). See `core/job-rules.ts` `decideAfterSettle`.
   */
  readonly retry?: RetryRequest | undefined;
  /**
   * The states the attempt may be settled from, enforced by the UPDATE's own
   * guard (CONTRACT §15): an outside resolver (a lookup, a callback, `/check`,
   * a settle policy) gives `['unknown']`. An attempt in another state is left
   * as it is: `attempt_in_flight` while `starting`/`running`, else
   * `attempt_finished`. Default: any active state.
   */
  readonly fromStates?: readonly AttemptState[] | undefined;
}

/** Parameters of {@link Store.claimLookups}. */
export interface ClaimLookupsParams {
  /** The asker (an executor's id). */
  readonly holder: string;
  /** The providers that can be asked (a lookup, or a `settleUnknownAfterMs` policy). */
  readonly providers: readonly string[];
  readonly limit: number;
  /** How long the asker holds an attempt (database clock). */
  readonly leaseMs: number;
  /** The first ask, this long after the attempt became unknown. */
  readonly firstCheckMs: number;
}

/** Parameters of {@link Store.deferLookup}. */
export interface DeferLookupParams {
  readonly ownerId: string;
  readonly attemptId: string;
  readonly holder: string;
  /** The next ask after `min(backoffMaxMs, backoffBaseMs × 2^asks so far)`. */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
}

/** Result of {@link Store.settleAttempt}. */
export interface SettleAttemptResult {
  /** The attempt after settling: `succeeded`, `superseded`, `failed` or `cancelled`. */
  readonly attempt: Attempt;
  readonly job: JobWithAttempts;
  /** For a success: whether it won the compare-and-swap. */
  readonly won: boolean;
  /**
   * The next attempt this settlement started, if any (unclaimed, `starting`):
   * a failover, or a retry on the same provider whose `startedAt` (when it
   * becomes claimable) may lie ahead.
   */
  readonly failover: Attempt | null;
}

/**
 * Where an executor's lease on an attempt stands (STYLE §23: a fenced write
 * that did not apply says why, it is not read as "lease lost"):
 * - `held`: this lease holds, unexpired;
 * - `expired`: still this lease's token on an attempt not yet decided
 *   (`starting`, `running`, or `unknown` after a rescue): the executor ran it,
 *   and its answer may still be recorded ({@link Store.settleAttempt} accepts
 *   the token);
 * - `finished`: the attempt is decided (`state` says how): nothing more to write;
 * - `lost`: another lease holds it, or it was handed back;
 * - `gone`: no such attempt (its job was deleted).
 */
export type LeaseStatus =
  | { readonly status: 'held' | 'expired' | 'finished'; readonly state: AttemptState }
  | { readonly status: 'lost' | 'gone' };

/** A claimed attempt with its job, handed to an executor. */
export interface ClaimedAttempt {
  readonly attempt: Attempt;
  readonly job: Job;
}

/** Parameters of {@link Store.claimWork}. */
export interface ClaimWorkParams {
  readonly leaseOwner: string;
  readonly leaseMs: number;
  readonly limit: number;
  /** The gate of a route, for first attempts (default: every provider eligible). */
  readonly eligible?: ((route: string) => EligibilityCheck) | undefined;
  /**
   * At most this many first attempts of batch lines (CONTRACT §17), taken
   * after interactive work. Default 0: this claim starts no batch line.
   */
  readonly batchLimit?: number | undefined;
}

/**
 * An eligibility check decided on the database's certifications at each
 * routing decision (CONTRACT §5: a verification, passed or failed, takes
 * effect on the next routing decision of every process).
 *
 * Called directly it answers from the verdicts it saw last. The store instead
 * reads the verdicts of `certificationProviders` inside the transaction that
 * decides (the same snapshot as the job it routes) and decides with
 * `withVerdicts(verdicts)`. Build one with {@link certificationBound}.
 */
export interface CertificationBoundCheck extends EligibilityCheck {
  /** The providers whose verdicts the decision needs (the route's chain). */
  readonly certificationProviders: readonly string[];
  /** The check for these verdicts, read just now. */
  readonly withVerdicts: (verdicts: readonly CertificationVerdict[]) => EligibilityCheck;
}

/**
 * Makes a {@link CertificationBoundCheck}: `current` answers direct calls,
 * `withVerdicts` the store's routing decisions.
 *
 * @example certificationBound(route.providers, (v) => certificationGate({ certifications: v, … }), lastKnownGate)
 */
export function certificationBound(
  providers: readonly string[],
  withVerdicts: (verdicts: readonly CertificationVerdict[]) => EligibilityCheck,
  current: EligibilityCheck,
): CertificationBoundCheck {
  const check: EligibilityCheck = (provider, kind) => current(provider, kind);
  return Object.assign(check, { certificationProviders: [...providers], withVerdicts });
}

/** Whether `check` wants the database's verdicts at decision time. */
export function isCertificationBound(check: EligibilityCheck): check is CertificationBoundCheck {
  return typeof (check as Partial<CertificationBoundCheck>).withVerdicts === 'function';
}

/** Parameters of {@link Store.listAllJobs}: {@link ListJobsParams} across owners, `ownerId` narrowing. */
export interface ListAllJobsParams extends Omit<ListJobsParams, 'ownerId'> {
  /** Only this owner's jobs (optional: the admin command line spans owners). */
  readonly ownerId?: string | undefined;
}

/** Parameters of {@link Store.deleteFinishedJobs}. */
export interface DeleteFinishedJobsParams {
  /** Jobs terminal for longer than this (database clock) are deleted. */
  readonly olderThanMs: number;
  /** Jobs per batch (one short transaction each). Default 500. */
  readonly batchSize?: number | undefined;
  /** Stop after this many batches (the rest waits for the next sweep). Default: until none is left. */
  readonly maxBatches?: number | undefined;
  /** Called before each batch after the first; return false to stop (e.g. the maintenance lease was lost). */
  readonly beforeBatch?: (() => Promise<boolean>) | undefined;
}

/** What {@link Store.deleteFinishedJobs} deleted. */
export interface DeleteFinishedJobsResult extends RetentionBatchResult {
  readonly batches: number;
}

/**
 * A committed change of a job (see {@link Store.onJobChanged}): `state` when
 * the store knows it without a read, `job` when it holds the whole job as
 * committed (a settle, a cancel): waiters take it instead of reading it again.
 */
export type JobChangeListener = (ownerId: string, jobId: string, state?: JobState, job?: JobWithAttempts) => void;

/** The store's public surface. */
export interface Store {
  readonly capabilities: DriverCapabilities;
  /** Files and batches (CONTRACT §17). */
  readonly batches: BatchStore;
  /** Applies pending migrations (safe from several processes at once). */
  migrate(): Promise<MigrationResult[]>;
  /** Null while this process can reach its database machinery; else why not (a dead SQLite worker that does not come back): `/healthz` answers 503. */
  liveness(): string | null;
  /** Whether the database answers and its schema is current. */
  readiness(): Promise<{ readonly ok: boolean; readonly pendingMigrations: readonly number[]; readonly error?: string }>;

  /**
   * Creates the job for (owner, idempotency key), or returns the existing one.
   * A single `INSERT … ON CONFLICT DO NOTHING`; the loser of a race reads the
   * row back and compares fingerprints.
   *
   * @throws OnejobError `idempotency_key_reused` when the key exists with another fingerprint.
   */
  createJob(params: CreateJobParams): Promise<CreateJobResult>;
  /** The owner's job with its attempts, or null (also for another owner's job). */
  getJob(ownerId: string, jobId: string): Promise<JobWithAttempts | null>;
  /** The owner's jobs, newest first. @throws OnejobError `invalid_request` for a bad cursor. */
  listJobs(params: ListJobsParams): Promise<ListJobsResult>;
  /** The owner's attempt, or null. */
  getAttempt(ownerId: string, attemptId: string): Promise<Attempt | null>;
  /** The current state of each job named (absent: no such job). For executors watching their jobs. */
  getJobStates(refs: readonly { readonly ownerId: string; readonly jobId: string }[]): Promise<Map<string, JobState>>;
  /** A job's event log, oldest first. */
  listEvents(ownerId: string, jobId: string): Promise<readonly JobEvent[]>;

  /**
   * Starts a new attempt under the job lock (CONTRACT §2, invariant 3).
   *
   * @throws OnejobError `job_not_found`, `attempt_in_doubt`, `attempt_in_flight`,
   *   `job_finished`, `provider_not_certified`, `chain_exhausted`.
   */
  startAttempt(params: StartAttemptParams): Promise<Attempt>;
  /**
   * Records an attempt's definite outcome. A success goes through the
   * completion compare-and-swap (superseded when it loses); a failure or
   * cancellation moves the job down its chain or fails it.
   *
   * A winning success also ends the job's other attempts that nobody is
   * listening for (`unknown` without a live lease) as `superseded`; the ones
   * still in flight are stopped by their executors, which report them
   * `superseded` (outcome `superseded`, allowed only once the job is decided).
   *
   * @throws OnejobError `attempt_not_found`, `attempt_finished` (already
   *   terminal, or not in a state the fence allows), `lease_lost`,
   *   `illegal_transition` (`superseded` while the job is undecided).
   */
  settleAttempt(params: SettleAttemptParams): Promise<SettleAttemptResult>;
  /**
   * Cancels the job: terminal `cancelled` through the same compare-and-swap;
   * unclaimed `starting` attempts are cancelled; claimed ones are left for
   * their executor to stop (a later result is superseded).
   *
   * @throws OnejobError `job_not_found`, `job_finished`.
   */
  cancelJob(ownerId: string, jobId: string, options?: CancelJobOptions): Promise<JobWithAttempts>;

  /**
   * Claims work for an executor: unclaimed `starting` attempts, and first
   * attempts for `queued` jobs (created here, leased at birth).
   */
  claimWork(params: ClaimWorkParams): Promise<ClaimedAttempt[]>;
  /**
   * `starting` → `running`, fenced; sets the attempt's deadline to now +
   * `timeoutMs`. Returns false when the lease is lost or the attempt moved on.
   */
  /**
   * Claims the job's stream for an attempt at its first output (CONTRACT §7):
   * a compare-and-swap on the job row that applies only while the job is
   * undecided and its stream unclaimed (or already this attempt's, or held by
   * an attempt that ended definitely, after a failover). True: this attempt
   * owns the stream, and no other attempt of the job can win it (and its
   * `deadlineAt` is cleared: the deadline to the first output is met). False: the
   * attempt lost and must stop (it ends `superseded`). Fenced by the lease.
   */
  claimStream(params: { ownerId: string; jobId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<boolean>;
  markRunning(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; timeoutMs: number | null }): Promise<boolean>;
  /**
   * `starting`/`running` → `unknown`, fenced; the lease is kept so the
   * executor can still report a late answer. Returns false when the lease is
   * lost or the attempt moved on; `providerRequestId` is then still recorded
   * as {@link recordProviderRequestId} would (the attempt's own token).
   */
  markUnknown(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; reason: RecordedError; providerRequestId?: string | undefined }): Promise<boolean>;
  /** Where the lease `leaseToken` of `leaseOwner` on the attempt stands now: the reason a fenced write did not apply. */
  leaseStatus(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<LeaseStatus>;
  /**
   * Records the provider's id of the request (CONTRACT §11) on an attempt
   * still `starting`, `running` or `unknown`, fenced by its lease's token
   * alone: after the lease ran out, or the rescuer moved the attempt to
   * `unknown`, too (the lookup needs the id), but not once another claim
   * took it. Returns whether it applied.
   */
  recordProviderRequestId(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; providerRequestId: string }): Promise<boolean>;
  /**
   * The reconciler's claim (CONTRACT §11): `unknown` attempts of `providers`
   * due to be asked, each leased to `holder` for `leaseMs` (one asker per
   * attempt across processes, by the database's clock). A definite answer is
   * applied with {@link settleAttempt}; anything else with {@link deferLookup}.
   */
  claimLookups(params: ClaimLookupsParams): Promise<Attempt[]>;
  /** An ask that found nothing definite: releases the lookup lease and schedules the next ask with backoff. */
  deferLookup(params: DeferLookupParams): Promise<boolean>;
  /** When the oldest attempt in doubt became `unknown`, or null (the oldest-doubt gauge). */
  oldestUnknownAt(): Promise<Date | null>;
  /** The database's clock now (or the store's stand-in for it): what leases, deadlines and `maxDurationMs` are measured against. */
  databaseNow(): Promise<Date>;

  /**
   * Records a v4 callback signature (its hex HMAC) as used by `attemptId`
   * until `expiresAt` (CONTRACT §15: each signature once); true on its first
   * use, false for a reuse. Expired ones are deleted as new ones arrive.
   */
  useCallbackSignature(p: { readonly signature: string; readonly attemptId: string; readonly expiresAt: Date }): Promise<boolean>;
  /** Extends leases; returns the tokens still held (a missing token: ask {@link leaseStatus} why). */
  extendLeases(params: { leaseOwner: string; leaseTokens: readonly string[]; leaseMs: number }): Promise<string[]>;
  /**
   * Releases a lease without changing state: an attempt handed back unsent
   * (`starting`, claimable again) or one in doubt whose late answer is no
   * longer awaited (`unknown`). Never a `running` one (returns false).
   */
  releaseLease(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<boolean>;
  /**
   * Hands back a first attempt leased at birth whose create went unanswered
   * (surely never sent), fenced by its lease token alone: after the lease
   * ran out too, and from `unknown` when the rescuer moved it there from
   * this lease and nothing happened since (no other claim, resolve, lookup
   * or cancel). It becomes `starting`, unclaimed (claimed and run by any
   * executor). `handed_back` (also when it already was), `absent` (no such
   * attempt: the create did not commit, or not yet), `refused` (something
   * else happened: it is not this lease's any more).
   */
  handBackUnsent(params: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<HandBackResult>;
  /**
   * Moves attempts nobody owns (lease expired, or running without a lease)
   * to `unknown` (never failed), or to `superseded`/`cancelled` when their job
   * is already decided. Returns how many.
   */
  rescueExpiredLeases(limit?: number): Promise<number>;
  /** Tells other processes there is new work. */
  notifyWork(): Promise<void>;
  /** Calls `listener` on new work from any process; returns an unsubscribe function. */
  onWork(listener: () => void): Promise<() => Promise<void>>;
  /**
   * Calls `listener` after a committed change of a job's state, outcome or
   * attempts, made through this store object (same process). Long-polls use it
   * together with a slow re-read as the fallback for changes made by other
   * processes. `state` is the job's state after the change when the store
   * knows it without a read (creation, cancel, settle). Returns an
   * unsubscribe function.
   */
  onJobChanged(listener: JobChangeListener): () => void;
  /**
   * Appends one batch of a job's stream (CONTRACT §13, migration 0011) and
   * announces it: to this store's {@link onStreamAppended} listeners at once,
   * to other processes' through the database where it can (PostgreSQL).
   */
  appendStreamBatch(row: StreamBatchRow): Promise<void>;
  /** A job's stored stream batches (see `DriverQueries.streamBatchList`). */
  readStreamBatches(ownerId: string, jobId: string, attemptNumber: number | null, afterSeq: number): Promise<StreamBatchRow[]>;
  /**
   * Calls `listener` with the job id of every stream batch appended through
   * this store or, on PostgreSQL, by another process. Returns an unsubscribe
   * function. Notifications can be missed (a reconnect): readers re-read too.
   */
  onStreamAppended(listener: (jobId: string) => void): () => void;
  close(): Promise<void>;

  /** Records a verify verdict for (provider, model, contract fingerprint); the latest one replaces earlier ones. */
  recordCertification(row: CertificationRow): Promise<void>;
  /** Every recorded certification (the certification gate reads them). */
  listCertifications(): Promise<readonly CertificationRow[]>;

  // ---- operations, administration, retention -----------------------------

  /** How many attempts are `unknown` now, read from the database (the `attempts_in_doubt` gauge). */
  countAttemptsInDoubt(): Promise<number>;
  /** An owner's use of its limits now (CONTRACT §16, `GET /v1/limits`), with the database's time it was read at. */
  ownerUse(ownerId: string): Promise<{ readonly now: Date; readonly use: OwnerUse }>;
  /** Jobs of every owner (or of `ownerId`), newest first: the admin command line. @throws OnejobError `invalid_request` for a bad cursor or limit. */
  listAllJobs(params: ListAllJobsParams): Promise<ListJobsResult>;
  /** The job with this id, whoever owns it, with its attempts; or null. */
  findJob(jobId: string): Promise<JobWithAttempts | null>;
  /** The attempt with this id, whoever owns it; or null. */
  findAttempt(attemptId: string): Promise<Attempt | null>;
  /** Takes or renews a named maintenance lease (one holder per database); true when held. */
  tryMaintenanceLease(params: { name: string; holder: string; ttlMs: number }): Promise<boolean>;
  /** Gives a maintenance lease up (no-op unless `holder` holds it). */
  releaseMaintenanceLease(params: { name: string; holder: string }): Promise<void>;
  /**
   * Retention (CONTRACT §9): deletes jobs terminal for longer than
   * `olderThanMs` with their attempts and events, in bounded batches (one
   * transaction each). Never a queued, running or unknown job, nor one with
   * an attempt still in flight. Their idempotency keys are free again.
   */
  deleteFinishedJobs(params: DeleteFinishedJobsParams): Promise<DeleteFinishedJobsResult>;

  /**
   * Records the usage of a late answer on an attempt that was already
   * settled another way (resolved, cancelled), once: only while the attempt
   * has no usage. Returns whether it applied. CONTRACT §8.
   */
  recordLateUsage(params: RecordLateUsageParams): Promise<boolean>;
  /** The read model (dashboard, `GET /v1/usage`). */
  readonly insights: Insights;
}
