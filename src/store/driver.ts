/**
 * The driver interface: the only place SQL lives behind.
 *
 * Internal (like River's `riverdriver`): {@link JobStore} is the public
 * surface; a driver is a set of named queries per table plus transactions,
 * migrations and wake-ups for one database engine. Drivers do not decide
 * anything: every guarded write reports whether it applied and the caller
 * decides what a lost race means.
 *
 * Conventions for every method:
 * - rows come back as the domain records of `core/types.ts` (camelCase, `Date`
 *   timestamps, parsed JSON);
 * - JSON columns store the value's `JSON.stringify` text and return
 *   `JSON.parse` of it (PostgreSQL type `json`, not `jsonb`, so a result is
 *   stored exactly as given);
 * - every statement filters by `owner_id` where the table has it, except the
 *   executor's cross-owner work queries (`jobListQueuedForUpdate`,
 *   `attemptClaim`, `attemptExtendLeases`, `attemptListLeaseExpired`),
 *   `eventListAll`, and the operations, admin and retention queries
 *   (`attemptCountInDoubt`, `jobListAll`, `jobGetAnyOwner`,
 *   `attemptGetAnyOwner`, `retentionDeleteBatch`), which span owners by design.
 */
import type { SpendReservation } from '../core/limits.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobEventType, RecordedError, ResolvedBy, SkippedProvider } from '../core/types.ts';
import type { AttemptState, JobState } from '../core/states.ts';
import type { TokenUsage } from '../core/usage.ts';
import type { InsightQueries } from './insight-queries.ts';
import type { BatchQueries } from './batch-queries.ts';

/**
 * What a driver's engine can do; core code asks these, never the engine's name. Only what some
 * code asks is declared (SKIP LOCKED claims and one writer at a time are the drivers' own business:
 * no caller decides anything by them).
 */
export interface DriverCapabilities {
  /** LISTEN/NOTIFY: wake-ups across processes without polling. */
  readonly supportsListenNotify: boolean;
}

/** The outcome of one migration. */
export interface MigrationResult {
  readonly version: number;
  readonly name: string;
  readonly status: 'applied' | 'already_applied';
}

/** A new job row. */
export interface JobInsertRow {
  readonly id: string;
  readonly ownerId: string;
  readonly idempotencyKey: string;
  readonly fingerprint: string;
  readonly route: string;
  readonly input: unknown;
  readonly metadata: Record<string, unknown> | null;
  readonly providers: readonly string[];
  readonly createdAt: Date;
  /** The W3C trace context of the creating request, or null/absent. */
  readonly traceContext?: string | null | undefined;
}

/**
 * A job's first attempt, written with the job in one statement (the fast path:
 * the creating process runs it itself, CONTRACT §2 unchanged: the job and its
 * attempt are durable before the provider is called).
 */
export interface FirstAttemptRow {
  readonly id: string;
  readonly provider: string;
  /** Null: written unclaimed (`starting`, no lease), for any executor to claim (a create reserving its first attempt, docs/limits.md). */
  readonly leaseOwner: string | null;
  readonly leaseToken: string | null;
  /** The lease runs until the database's now + this (null without a lease). */
  readonly leaseMs: number | null;
  /** The spend reserved with it (CONTRACT §16); refused: the statement fails with `budget_exceeded` and creates nothing. */
  readonly reserve?: SpendReservation | null | undefined;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/** Parameters of {@link DriverQueries.attemptSettleWon}. */
export interface SettleWonParams {
  readonly ownerId: string;
  readonly jobId: string;
  readonly attemptId: string;
  readonly leaseOwner: string;
  readonly leaseToken: string;
  readonly result: unknown;
  /** Absent: the usage columns stay as they are. */
  readonly usage?: TokenUsage | null | undefined;
  readonly costMicros?: number | null | undefined;
  /** The event log's `actor`. */
  readonly actor: string;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
  /** The provider's id of the request, when it sent one (kept when absent). */
  readonly providerRequestId?: string | null | undefined;
}

/** Parameters of {@link DriverQueries.jobGetByKeylessFingerprint}. */
export interface KeylessLookupParams {
  readonly ownerId: string;
  readonly fingerprint: string;
  /** A finished job is replayed for this long after it finished. */
  readonly windowMs: number;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/** Parameters of {@link DriverQueries.jobList}. */
export interface JobListParams {
  readonly ownerId: string;
  readonly state?: JobState | undefined;
  /** At most this many rows. */
  readonly limit: number;
  /** Rows strictly after this position in (created_at DESC, id DESC) order. */
  readonly after?: { readonly createdAt: Date; readonly id: string } | undefined;
}

/** Parameters of {@link DriverQueries.jobUpdateProgress}: bookkeeping of a non-terminal job. */
export interface JobProgressParams {
  readonly ownerId: string;
  readonly id: string;
  readonly state: 'queued' | 'running' | 'unknown';
  readonly attemptCount: number;
  readonly skipped: readonly SkippedProvider[];
  readonly updatedAt: Date;
}

/**
 * Parameters of {@link DriverQueries.jobFinish}: the compare-and-swap that
 * decides a job's outcome.
 *
 * SQL: `UPDATE jobs SET state = $state, completed_by = $completedBy,
 * result = $result, error = $error, skipped = $skipped, version = version + 1,
 * updated_at = $now, finished_at = $now
 * WHERE owner_id = $ownerId AND id = $id AND version = $expectedVersion AND completed_by IS NULL`
 * (and, for safety, `AND state NOT IN ('succeeded','failed','cancelled')`).
 */
export interface JobFinishParams {
  readonly ownerId: string;
  readonly id: string;
  readonly expectedVersion: number;
  readonly state: 'succeeded' | 'failed' | 'cancelled';
  /** The winning attempt (succeeded only). */
  readonly completedBy: string | null;
  readonly result: unknown;
  readonly error: RecordedError | null;
  readonly skipped: readonly SkippedProvider[];
  readonly now: Date;
}

/** Parameters of {@link DriverQueries.jobStreamClaim}. */
export interface JobStreamClaimParams {
  readonly ownerId: string;
  readonly id: string;
  readonly attemptId: string;
  /** The claiming attempt's lease: it must hold it, unexpired. */
  readonly leaseOwner: string;
  readonly leaseToken: string;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/** Parameters of {@link DriverQueries.attemptMarkRunning}. */
export interface MarkRunningParams {
  readonly ownerId: string;
  readonly attemptId: string;
  readonly leaseOwner: string;
  readonly leaseToken: string;
  /** The deadline is now + this; null: none (a stream whose first output already came is bounded by its idle timeout). */
  readonly timeoutMs: number | null;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/** A new attempt row. `leaseOwner`/`leaseToken`/`leaseExpiresAt` are all set (claimed at birth) or all null. */
export interface AttemptInsertRow {
  readonly id: string;
  readonly ownerId: string;
  readonly jobId: string;
  readonly number: number;
  readonly provider: string;
  readonly kind: AttemptKind;
  readonly state: 'starting';
  readonly baseVersion: number;
  readonly startedAt: Date;
  readonly deadlineAt: Date | null;
  readonly leaseOwner: string | null;
  readonly leaseToken: string | null;
  readonly leaseExpiresAt: Date | null;
  /** The spend reserved with it (CONTRACT §16): the database refuses the row (none inserted) past a limit. */
  readonly reserve?: SpendReservation | null | undefined;
}

/** Parameters of {@link DriverQueries.ownerUse}: the window keys (`YYYY-MM-DD`, `YYYY-MM-01`) and the start of the requests-per-minute window. */
export interface OwnerUseParams {
  readonly ownerId: string;
  readonly day: string;
  readonly month: string;
  readonly createdSince: Date;
}

/** An owner's use now, as the database counts it. */
export interface OwnerUse {
  readonly day: { readonly spentMicros: number; readonly reservedMicros: number };
  readonly month: { readonly spentMicros: number; readonly reservedMicros: number };
  readonly inFlight: number;
  readonly createdSince: number;
  /** When the oldest of those jobs was created (null: none): the requests-per-minute window frees a place 60 s after it. */
  readonly oldestCreatedAt: Date | null;
}

/** The lease an executor must still hold for a fenced write. */
export interface Fence {
  readonly leaseOwner: string;
  readonly leaseToken: string;
  /**
   * The write applies only if the lease has not expired at this time. Null:
   * the token alone fences (`lease_token` = it and `lease_owner` it or NULL,
   * whatever the expiry): an answer whose lease ran out while nobody else
   * took the attempt (see `SettleAttemptParams.fence`).
   */
  readonly now: Date | null;
}

/**
 * Parameters of {@link DriverQueries.attemptUpdate}: a guarded transition.
 *
 * SQL: `UPDATE attempts SET <set> WHERE owner_id = $ownerId AND id = $id
 * AND state = ANY($fromStates)` plus, with a fence,
 * `AND lease_owner = $fence.leaseOwner AND lease_token = $fence.leaseToken
 * AND lease_expires_at > $fence.now`. Returns whether one row changed.
 * Fields of `set` that are `undefined` are left as they are; `null` clears.
 * `releaseLease: true` sets lease_owner and lease_expires_at to NULL (the
 * token stays, for the record).
 */
export interface AttemptUpdateParams {
  readonly ownerId: string;
  readonly id: string;
  readonly fromStates: readonly AttemptState[];
  readonly fence?: Fence | undefined;
  /** Also: no reconciler holds a lookup of it at this time (`lookup_holder` unset, or its lookup lease expired). */
  readonly noLookupHeldAt?: Date;
  readonly set: {
    readonly state?: AttemptState;
    readonly startedAt?: Date;
    readonly deadlineAt?: Date | null;
    readonly finishedAt?: Date | null;
    readonly error?: RecordedError | null;
    readonly leaseExpiresAt?: Date;
    readonly releaseLease?: boolean;
    /** The provider's reported usage (CONTRACT §8): the three token columns. */
    readonly usage?: TokenUsage | null;
    /** The cost in integer micro-dollars. */
    readonly costMicros?: number | null;
    /** The provider's id of the request (CONTRACT §11). */
    readonly providerRequestId?: string | null;
    /** Who ended the attempt's doubt (CONTRACT §11). */
    readonly resolvedBy?: ResolvedBy | null;
    /** When the attempt became `unknown` (set with `state: 'unknown'`). */
    readonly unknownAt?: Date | null;
    /** When the reconciler asks about it next. */
    readonly lookupNextAt?: Date | null;
  };
}

/**
 * Parameters of {@link DriverQueries.attemptClaim}: lease unclaimed `starting`
 * attempts, oldest first.
 *
 * SQL (PostgreSQL): `UPDATE attempts SET lease_owner = $leaseOwner,
 * lease_token = <a fresh token per row>, lease_expires_at = $leaseExpiresAt
 * WHERE (owner_id, id) IN (SELECT owner_id, id FROM attempts WHERE state =
 * 'starting' AND lease_owner IS NULL ORDER BY started_at LIMIT $limit FOR
 * UPDATE SKIP LOCKED) RETURNING *`. Each claimed row gets its own new token.
 */
export interface AttemptClaimParams {
  readonly leaseOwner: string;
  readonly leaseExpiresAt: Date;
  readonly limit: number;
  /** Only attempts whose `started_at` has come are claimed (a retry waits for its `Retry-After`). */
  readonly now: Date;
}

/** Parameters of {@link DriverQueries.attemptExtendLeases}. */
export interface LeaseExtendParams {
  readonly leaseOwner: string;
  readonly leaseTokens: readonly string[];
  readonly leaseExpiresAt: Date;
  /** Only leases still valid at this time are extended. */
  readonly now: Date;
}

/**
 * Parameters of {@link DriverQueries.attemptClaimLookups}: lease `unknown`
 * attempts of the given providers that are due to be asked (their
 * `lookup_next_at`, else `firstCheckMs` after `unknown_at`), most overdue
 * first, to one asker (`FOR UPDATE SKIP LOCKED` where supported).
 */
export interface LookupClaimParams {
  readonly holder: string;
  readonly providers: readonly string[];
  readonly limit: number;
  /** The lookup lease runs until now + this. */
  readonly leaseMs: number;
  /** The first ask, this long after the attempt became unknown. */
  readonly firstCheckMs: number;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/**
 * Parameters of {@link DriverQueries.attemptDeferLookup}: the ask found
 * nothing definite; release the lookup lease, record the ask, and schedule
 * the next one after `min(backoffMaxMs, backoffBaseMs × 2^asks so far)`.
 * Applies only while `holder` holds the lookup lease and the attempt is
 * still `unknown`.
 */
export interface LookupDeferParams {
  readonly ownerId: string;
  readonly id: string;
  readonly holder: string;
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  /** Stands in for the database's clock (tests); null: the database's own. */
  readonly now: Date | null;
}

/** A new event row (the id is assigned by the database). */
export type EventInsertRow = Omit<JobEvent, 'id'>;

/** Named queries. The same object shape serves autocommit use and a transaction. */
export interface DriverQueries extends BatchQueries {
  /**
   * The database's clock, now (PostgreSQL `clock_timestamp()`, SQLite
   * `unixepoch('subsec')`): the one time every lease, deadline and rescue
   * compares against, whatever the clocks of the hosts running onejob say.
   */
  dbNow(): Promise<Date>;
  /**
   * `INSERT INTO jobs … ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING *`
   * with state `queued`, version 0, attempt_count 0, skipped `[]`,
   * updated_at = created_at. Returns the new job, or null when the key exists.
   */
  jobInsert(row: JobInsertRow): Promise<Job | null>;
  /**
   * {@link jobInsert} with its first attempt, in one statement (one commit):
   * the job `running` with attempt_count 1, the attempt (number 1, kind
   * `first`, `starting`, base version 0) leased to `attempt.leaseOwner`, and
   * its `attempt.started` event. Null when the key exists (nothing written).
   */
  jobInsertLeased(row: JobInsertRow, attempt: FirstAttemptRow): Promise<{ job: Job; attempt: Attempt } | null>;
  /**
   * The common success in one statement (one commit): the job's only attempt
   * (attempt_count 1), holding its lease, wins the completion
   * compare-and-swap; the attempt `succeeded` (lease released, usage
   * recorded) with its `attempt.succeeded` and `job.succeeded` events.
   * Null when any of that does not hold: nothing was written, and the caller
   * settles through the general transaction (it decides the lost race, the
   * lost lease, the siblings).
   */
  attemptSettleWon(params: SettleWonParams): Promise<{ job: Job; attempt: Attempt } | null>;
  /** The states of the jobs named, in one statement (absent: no such job). Executors and waiters watching many jobs. */
  jobStates(refs: readonly { readonly ownerId: string; readonly jobId: string }[]): Promise<{ id: string; state: JobState }[]>;
  /** The job for (owner, idempotency key), or null. */
  jobGetByKey(ownerId: string, idempotencyKey: string): Promise<Job | null>;
  /**
   * A keyless job (CONTRACT §12): `INSERT INTO jobs … keyless_fingerprint …
   * ON CONFLICT DO NOTHING RETURNING *` (any uniqueness: the key, or the
   * partial UNIQUE index of migration 0010 on (owner, keyless_fingerprint)
   * over undecided jobs), state `queued` as {@link jobInsert}. Null when an
   * undecided job of the owner already has this fingerprint. Never batched
   * with keyed inserts (whose conflict target is the key alone).
   */
  jobInsertKeyless(row: JobInsertRow & { readonly keylessFingerprint: string }): Promise<Job | null>;
  /**
   * The owner's keyless job with this fingerprint that a keyless request
   * joins or replays: the undecided one, else the newest finished less than
   * `windowMs` ago by the database's clock (or `now`, its stand-in); null
   * when there is none.
   */
  jobGetByKeylessFingerprint(params: KeylessLookupParams): Promise<Job | null>;
  /**
   * The job, or null. With `forUpdate`, inside a transaction, the row is locked
   * until commit (PostgreSQL `FOR UPDATE`; SQLite's write transaction already
   * excludes other writers).
   */
  jobGet(ownerId: string, id: string, forUpdate?: boolean): Promise<Job | null>;
  /** The owner's jobs, newest first (created_at DESC, id DESC). */
  jobList(params: JobListParams): Promise<Job[]>;
  /** Sets state, attempt_count, skipped and updated_at of a job that is not terminal. Returns whether it applied. */
  jobUpdateProgress(params: JobProgressParams): Promise<boolean>;
  /** The outcome compare-and-swap; returns whether it applied (false: the caller lost). */
  jobFinish(params: JobFinishParams): Promise<boolean>;
  /**
   * The stream compare-and-swap (CONTRACT §7), in one statement: sets the
   * job's `stream_attempt_id` to the attempt, `WHERE` the job is undecided
   * (`completed_by IS NULL`, not terminal), the stream is unclaimed, already
   * this attempt's, or held by an attempt that ended definitely (`failed`,
   * `cancelled`, `superseded`: the job failed over), and the attempt is
   * active and holds its lease (the job's row locked first, then the
   * attempt's, as every store transaction does); writes the
   * `attempt.stream_claimed` event and clears the attempt's `deadline_at`
   * (the deadline to the first output is met; from now on the stream is
   * bounded by the silence between its events). Returns whether it applied.
   */
  jobStreamClaim(params: JobStreamClaimParams): Promise<boolean>;
  /**
   * `starting` → `running` with `deadline_at` = now + `timeoutMs`, fenced by
   * the lease, and the `attempt.running` event, in one statement. Returns
   * whether it applied.
   */
  attemptMarkRunning(params: MarkRunningParams): Promise<boolean>;
  /** The attempt holding the job's stream (`stream_attempt_id`), or null. */
  jobStreamOwner(ownerId: string, id: string): Promise<string | null>;
  /**
   * Appends one batch of a job's stream (migration 0011, CONTRACT §13), in
   * one statement; PostgreSQL also sends `NOTIFY onejob_stream '<job id>'`
   * (delivered at commit). Fails (unique violation) if the batch exists.
   */
  streamBatchInsert(row: StreamBatchRow): Promise<void>;
  /**
   * A job's stored stream batches, by attempt number then `seq`: those of
   * attempt `attemptNumber` (every attempt's when null) whose last event is
   * after `afterSeq`.
   */
  streamBatchList(ownerId: string, jobId: string, attemptNumber: number | null, afterSeq: number): Promise<StreamBatchRow[]>;
  /**
   * Jobs in state `queued`, oldest first, locked for this transaction
   * (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so concurrent executors take
   * different jobs). Only inside a transaction.
   */
  jobListQueuedForUpdate(limit: number): Promise<Job[]>;

  /** Inserts an attempt. Fails (unique violation) if (owner, job, number) exists. */
  attemptInsert(row: AttemptInsertRow): Promise<void>;
  /** An owner's use now (CONTRACT §16): its spend windows (zero when none), attempts starting or running, jobs created since. */
  ownerUse(params: OwnerUseParams): Promise<OwnerUse>;
  /** A job's attempts, oldest first (by number). */
  attemptListByJob(ownerId: string, jobId: string): Promise<Attempt[]>;
  /** Attempts of several jobs of one owner, ordered by job then number. */
  attemptListByJobs(ownerId: string, jobIds: readonly string[]): Promise<Attempt[]>;
  /** The attempt, or null. */
  attemptGet(ownerId: string, id: string): Promise<Attempt | null>;
  /** A guarded transition; returns whether it applied. */
  attemptUpdate(params: AttemptUpdateParams): Promise<boolean>;
  /** Leases unclaimed `starting` attempts; returns them as now leased. */
  attemptClaim(params: AttemptClaimParams): Promise<Attempt[]>;
  /** Extends the given leases of one executor; returns the tokens still held. */
  attemptExtendLeases(params: LeaseExtendParams): Promise<string[]>;
  /**
   * Attempts no executor owns: leased `starting`/`running` ones whose lease
   * expired before `now` (oldest expiry first), then `running` ones with no
   * lease at all (the schema refuses them; listed should one slip through).
   * At most `limit` of each.
   */
  attemptListLeaseExpired(now: Date, limit: number): Promise<Attempt[]>;

  /** Appends events. */
  eventInsert(rows: readonly EventInsertRow[]): Promise<void>;
  /** A job's events, oldest first. */
  eventList(ownerId: string, jobId: string): Promise<JobEvent[]>;
  /** Events of every job, with id greater than `afterId`, oldest first (for checkers and tailing). */
  eventListAll(afterId: number, limit: number): Promise<JobEvent[]>;

  /** `INSERT INTO certifications … ON CONFLICT (provider, model, contract_fingerprint) DO UPDATE`: the latest verdict wins. */
  certificationUpsert(row: CertificationRow): Promise<void>;
  /** Every certification, ordered by provider, model, verified_at. */
  certificationList(): Promise<CertificationRow[]>;
  /**
   * The verdicts (no reports) of the given providers: the read a routing
   * decision makes inside its own transaction (an index range of the
   * primary key, which starts with `provider`).
   */
  certificationVerdicts(providers: readonly string[]): Promise<CertificationVerdict[]>;

  // ---- the reconciler (CONTRACT §11, cross-owner by design) ------------------

  /** Leases attempts in doubt that are due to be asked; returns them. See {@link LookupClaimParams}. */
  attemptClaimLookups(params: LookupClaimParams): Promise<Attempt[]>;
  /** Records an ask that found nothing definite and schedules the next. See {@link LookupDeferParams}. */
  attemptDeferLookup(params: LookupDeferParams): Promise<boolean>;
  /** When the oldest attempt now in doubt became `unknown` (its start, if older rows lack it), or null when none is. */
  attemptOldestUnknownAt(): Promise<Date | null>;

  // ---- operations and administration (cross-owner by design) ----------------

  /** How many attempts are `unknown` right now (the `attempts_in_doubt` gauge). */
  attemptCountInDoubt(): Promise<number>;
  /** Jobs of every owner, newest first (created_at DESC, id DESC): the admin CLI. */
  jobListAll(params: Omit<JobListParams, 'ownerId'>): Promise<Job[]>;
  /** The job with this id, whoever owns it (ids are unique across owners), or null. */
  jobGetAnyOwner(id: string): Promise<Job | null>;
  /** The attempt with this id, whoever owns it, or null. */
  attemptGetAnyOwner(id: string): Promise<Attempt | null>;

  // ---- retention (CONTRACT §9, docs/retention.md) ----------------------------

  /**
   * Takes or renews the named maintenance lease for `holder` until the
   * database's now + `ttlMs`; true when `holder` holds it afterwards (it was
   * free, expired, or already `holder`'s).
   */
  maintenanceLeaseAcquire(params: MaintenanceLeaseParams): Promise<boolean>;
  /** Gives the lease up if `holder` holds it. */
  maintenanceLeaseRelease(params: Omit<MaintenanceLeaseParams, 'ttlMs'>): Promise<void>;
  /**
   * Deletes at most `limit` jobs that have been terminal for longer than
   * `olderThanMs` by the database's clock (oldest first, none with an
   * attempt still `starting` or `running`), with their attempts and events.
   * Only inside a transaction.
   */
  retentionDeleteBatch(params: RetentionBatchParams): Promise<RetentionBatchResult>;

  // ---- signed callbacks (CONTRACT §15) ----------------------------------------

  /**
   * Records a v4 callback signature as used; true when it was not recorded
   * before (its first use), false for a reuse. Deletes up to 100 signatures
   * that expired (by the database's clock, or `now`) on the way.
   */
  callbackSignatureUse(params: CallbackSignatureUseParams): Promise<boolean>;
}

/** Parameters of {@link DriverQueries.callbackSignatureUse}. */
export interface CallbackSignatureUseParams {
  /** The signature's hex HMAC. */
  readonly signature: string;
  readonly attemptId: string;
  /** When its window has passed (a reuse after that is refused by the window itself). */
  readonly expiresAt: Date;
  /** The stand-in for the database's clock (tests), else null. */
  readonly now: Date | null;
}

/** The part of a certification a routing decision reads. */
export type CertificationVerdict = Pick<CertificationRow, 'provider' | 'model' | 'contractFingerprint' | 'passed'>;

/** Parameters of {@link DriverQueries.maintenanceLeaseAcquire}. */
export interface MaintenanceLeaseParams {
  /** The lease's name, e.g. `retention`. */
  readonly name: string;
  /** Who takes it (a process-unique id). */
  readonly holder: string;
  readonly ttlMs: number;
}

/** Parameters of {@link DriverQueries.retentionDeleteBatch}. */
export interface RetentionBatchParams {
  /** Jobs terminal for longer than this many milliseconds (database clock) go. */
  readonly olderThanMs: number;
  /** At most this many jobs. */
  readonly limit: number;
}

/** What one {@link DriverQueries.retentionDeleteBatch} deleted. */
export interface RetentionBatchResult {
  /** Deleted jobs by their (terminal) state. */
  readonly jobsByState: Readonly<Partial<Record<'succeeded' | 'failed' | 'cancelled', number>>>;
  readonly jobs: number;
  readonly attempts: number;
  readonly events: number;
}

/** One database engine behind the store. */
export interface Driver {
  /** The engine's name, for logs and test names only (never for branching). */
  readonly name: string;
  readonly capabilities: DriverCapabilities;
  /** Autocommit queries. */
  readonly queries: DriverQueries;
  /** The read model's queries (search, usage totals, the owner's event tail), autocommit. */
  readonly insights: InsightQueries;
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when
   * it throws. PostgreSQL: READ COMMITTED, serialization by row locks
   * (`jobGet(…, true)`); SQLite: `BEGIN IMMEDIATE`, one writer at a time.
   * Retries on serialization/busy errors are the driver's business: `fn` may
   * run more than once, so it must touch nothing but the database.
   */
  transaction<T>(fn: (q: DriverQueries) => Promise<T>): Promise<T>;
  /**
   * Runs `fn`'s reads in one snapshot: a job and its attempts (a page of
   * them) as of one moment, never half of a change another transaction
   * committed meanwhile. PostgreSQL: a `REPEATABLE READ READ ONLY`
   * transaction; SQLite: one transaction (the gate and the file lock).
   */
  readSnapshot<T>(fn: (q: DriverQueries, insights: InsightQueries) => Promise<T>): Promise<T>;
  /** Applies pending migrations under a lock; safe to call from several processes at once. */
  migrate(): Promise<MigrationResult[]>;
  /** Versions of migrations not yet applied (empty when current). */
  pendingMigrations(): Promise<number[]>;
  /** Cheap round trip (readiness). */
  ping(): Promise<void>;
  /**
   * Null while this process's connection machinery can serve; else why it
   * cannot, so that `/healthz` fails and the process is replaced (the SQLite
   * worker died and could not be started again). Not a database outage: an
   * unreachable server is `/readyz`'s business. Absent: always null.
   */
  liveness?(): string | null;
  /** Tells other processes there is new work (PostgreSQL NOTIFY; a no-op without the capability). */
  notifyWork(): Promise<void>;
  /** Calls `listener` when another process notified work; returns an unsubscribe function. */
  onWork(listener: () => void): Promise<() => Promise<void>>;
  /**
   * Calls `listener` on every committed change of a job's state made by
   * another process (PostgreSQL: the `onejob_job` notifications of migration
   * 0008; those sent by this driver's own connections are left out, the
   * store announces its own changes itself, with the job).
   * Null where the engine has no cross-process signal (SQLite): waiters then
   * rely on their periodic re-check.
   */
  onJobNotification(listener: (ownerId: string, jobId: string, state: JobState) => void): Promise<(() => Promise<void>) | null>;
  /**
   * Calls `listener` with the job id of every stream batch appended by
   * another process (PostgreSQL: `onejob_stream`; those of this driver's own
   * connections are left out, the store announces its own). Null where the
   * engine has no cross-process signal (SQLite): readers then poll.
   */
  onStreamNotification(listener: (jobId: string) => void): Promise<(() => Promise<void>) | null>;
  /** Closes every connection. */
  close(): Promise<void>;
}

/**
 * One batch of a job's stream as stored (migration 0011): the events of
 * attempt `attemptNumber`'s stream numbered `seq - n + 1` … `seq`, n the
 * length of `events` (a JSON array, opaque to the drivers).
 */
export interface StreamBatchRow {
  readonly ownerId: string;
  readonly jobId: string;
  readonly attemptNumber: number;
  /** The number of the batch's last event within the attempt's stream (from 1). */
  readonly seq: number;
  /** The batch's events, a JSON array. */
  readonly events: string;
}

/** Re-exported for drivers. */
export type { Attempt, Job, JobEvent, JobEventType, RecordedError, SkippedProvider };

/**
 * A provider certification (CONTRACT §5): the latest `onejob verify` verdict
 * for (provider, model, contract fingerprint), the table's key.
 */
export interface CertificationRow {
  readonly provider: string;
  readonly model: string;
  /** `sha256:<hex>` of the compiled contract. */
  readonly contractFingerprint: string;
  /** The route it was verified for, or null. */
  readonly route: string | null;
  readonly passed: boolean;
  /** The verify report (JSON). */
  readonly report: unknown;
  readonly verifiedAt: Date;
}
