/**
 * {@link JobStore}: the one implementation of {@link Store}, over any {@link Driver}.
 *
 * Each mutation is a transaction that locks the job row (the serialization
 * point of a job), re-reads the job's attempts, asks `core/job-rules.ts`, and
 * writes with guarded statements whose "applied?" answer is checked. The
 * completion itself is the compare-and-swap of CONTRACT §2 (see
 * `DriverQueries.jobFinish`).
 */
import { BatchStore } from './batch-store.ts';
import { EventEmitter } from 'node:events';
import { systemClock, type Clock } from '../core/clock.ts';
import { OnejobError } from '../core/errors.ts';
import { fingerprint as fingerprintOf, keylessIdempotencyKey } from '../core/fingerprint.ts';
import { newId } from '../core/ids.ts';
import {
  decideAfterSettle,
  decideStartAttempt,
  deriveActiveJobState,
  everyProviderEligible,
  planNextProvider,
} from '../core/job-rules.ts';
import { ACTIVE_ATTEMPT_STATES, isAttemptActive, isJobTerminal, type AttemptState, type JobState } from '../core/states.ts';
import type { Attempt, AttemptKind, Job, JobEvent, JobWithAttempts, RecordedError, ResolvedBy, SkippedProvider } from '../core/types.ts';
import type { TokenUsage } from '../core/usage.ts';
import { Insights, type RecordLateUsageParams } from './insights.ts';
import { hasSpendLimit, REQUESTS_WINDOW_MS, reservationFor, windowsAt, type SpendPolicy } from '../core/limits.ts';
import { exhaustedError, refusedGate, spendGate } from './spend-gate.ts';
import { isBudgetRefusal } from './spend-refusal.ts';
import { admitCreate, budgetExceeded, hasAdmissionLimit } from './admission.ts';
import { withAttempts } from './with-attempts.ts';
import { settleRefusal } from './settle-guard.ts';
import type { CertificationRow, Driver, DriverQueries, OwnerUse, EventInsertRow, JobInsertRow, MigrationResult, StreamBatchRow } from './driver.ts';
import { isCertificationBound } from './store.ts';
import type { EligibilityCheck } from '../core/job-rules.ts';
import type {
  AttemptOutcome,
  CancelJobOptions,
  ClaimLookupsParams,
  ClaimedAttempt,
  DeferLookupParams,
  ClaimWorkParams,
  CreateJobParams,
  CreateJobResult,
  DeleteFinishedJobsParams,
  DeleteFinishedJobsResult,
  HandBackResult,
  JobChangeListener,
  LeaseStatus,
  ListAllJobsParams,
  LeaseRequest,
  ListJobsParams,
  ListJobsResult,
  SettleAttemptParams,
  SettleAttemptResult,
  StartAttemptParams,
  Store,
} from './store.ts';

/** Options of {@link JobStore}. */
export interface JobStoreOptions {
  /**
   * The host's clock: it stamps a new job's `created_at` (the order of
   * `GET /v1/jobs`) and nothing else. Default: the wall clock.
   */
  readonly clock?: Clock;
  /**
   * Stands in for the database's clock. Default: the database itself (every
   * lease, deadline, hedge delay and rescue compares against its `now()`, read
   * in the same transaction), so hosts whose clocks disagree still agree on
   * who holds a lease. Tests give a `ManualClock` here to move time by hand;
   * production never sets it.
   */
  readonly databaseClock?: Clock;
  /** Spend limits (CONTRACT §16, docs/limits.md): each attempt of a limited owner reserves its worst case as it is written. Default: none. */
  readonly spend?: SpendPolicy | undefined;
}

/** Default and maximum page sizes of {@link JobStore.listJobs}. */
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 200;

/**
 * The store over one driver.
 *
 * @example
 * const store = new JobStore(await openSqliteDriver({ path: './onejob.db' }));
 * await store.migrate();
 * const { job, created } = await store.createJob({ ownerId: 'alice', idempotencyKey: 'k1', route: 'summarize', input: {}, providers: ['primary'] });
 */
export class JobStore implements Store {
  readonly #driver: Driver;
  readonly #clock: Clock;
  readonly #databaseClock: Clock | undefined;
  readonly #spend: SpendPolicy | undefined;
  readonly #changes = new EventEmitter().setMaxListeners(0);
  #notifyInFlight = false;
  #notifyPending = false;
  /** The subscription to other processes' job changes (see {@link #listenToOtherProcesses}). */
  #jobNotifications: Promise<(() => Promise<void>) | null> | null = null;
  /** The subscription to other processes' stream batches (see {@link onStreamAppended}). */
  #streamNotifications: Promise<(() => Promise<void>) | null> | null = null;
  #closing = false;

  /** The read model: search, usage totals, the owner's event tail (see `store/insights.ts`). */
  readonly insights: Insights;

  constructor(driver: Driver, options: JobStoreOptions = {}) {
    this.#driver = driver;
    this.#clock = options.clock ?? systemClock;
    this.#databaseClock = options.databaseClock;
    this.#spend = options.spend;
    this.insights = new Insights(driver);
    this.batches = new BatchStore(driver, this.#clock, newId, () => this.#signalWork());
  }

  /** Files and batches (CONTRACT §17, `store/batch-store.ts`). */
  readonly batches: BatchStore;

  /** The stand-in for the database's clock that one-statement writes pass along (null: the database's own). */
  #clockStandIn(): Date | null {
    return this.#databaseClock?.now() ?? null;
  }

  /** The database's time (or its stand-in): what leases and deadlines are measured against. */
  #now(q: DriverQueries): Promise<Date> {
    return this.#databaseClock ? Promise.resolve(this.#databaseClock.now()) : q.dbNow();
  }

  get capabilities() {
    return this.#driver.capabilities;
  }

  /** The driver underneath (for tests and tools that need raw access). */
  get driver(): Driver {
    return this.#driver;
  }

  migrate(): Promise<MigrationResult[]> {
    return this.#driver.migrate();
  }

  liveness(): string | null {
    return this.#driver.liveness?.() ?? null;
  }

  async readiness() {
    try {
      await this.#driver.ping();
      const pendingMigrations = await this.#driver.pendingMigrations();
      return { ok: pendingMigrations.length === 0, pendingMigrations };
    } catch (e) {
      return { ok: false, pendingMigrations: [], error: e instanceof Error ? e.message : String(e) };
    }
  }

  // ---- jobs ---------------------------------------------------------------

  async createJob(p: CreateJobParams, round = 1): Promise<CreateJobResult> {
    const metadata = p.metadata ?? null;
    const body = p.metadata === undefined ? { route: p.route, input: p.input } : { route: p.route, input: p.input, metadata: p.metadata };
    const fp = p.fingerprint ?? fingerprintOf(body);
    const q = this.#driver.queries;
    const row = {
      id: newId('job'),
      ownerId: p.ownerId,
      idempotencyKey: p.keyless ? keylessIdempotencyKey(fp) : p.idempotencyKey,
      fingerprint: fp,
      route: p.route,
      input: p.input,
      metadata,
      providers: p.providers,
      createdAt: this.#clock.now(),
      traceContext: p.traceContext ?? null,
    };
    // Requests per minute and concurrency (CONTRACT §16): a replay or a join is never refused nor counted.
    const limits = this.#spend?.limitsOf(p.ownerId);
    const admission = limits && hasAdmissionLimit(limits) && round === 1 && !(await this.#existing(p, row.idempotencyKey, fp))
      ? admitCreate(limits, (await this.ownerUse(p.ownerId)).use, this.#clock.now(), p.whenBusy ?? 'queue')
      : 'admit';
    if (p.keyless) return this.#createKeyless(p, { ...row, keylessFingerprint: fp }, p.keyless.windowMs);
    // Under a spend limit the first attempt is written (and reserved) with its job, leased here or not: a refusal creates nothing.
    // An owner at its concurrency: the job waits queued (its first attempt is reserved when claimed).
    const lease = admission === 'queue' ? undefined : p.firstAttempt;
    const reserving = admission === 'admit' && limits !== undefined && hasSpendLimit(limits);
    const first = lease || reserving ? await this.#firstProvider(p, lease?.eligible ?? p.eligible ?? everyProviderEligible) : null;
    if (first !== null) {
      let leased: Awaited<ReturnType<DriverQueries['jobInsertLeased']>>;
      try {
        leased = await q.jobInsertLeased(row, {
          id: lease?.attemptId ?? newId('att'), provider: first, leaseOwner: lease?.leaseOwner ?? null,
          leaseToken: lease ? lease.leaseToken ?? newId('lease') : null, leaseMs: lease?.leaseMs ?? null,
          now: this.#clockStandIn(), reserve: reservationFor(this.#spend, p.ownerId, first, p.input),
        });
      } catch (e) {
        if (!isBudgetRefusal(e)) throw e;
        const { now, use } = await this.ownerUse(p.ownerId);
        throw budgetExceeded(limits!, use, now, reservationFor(this.#spend, p.ownerId, first, p.input)?.micros ?? 0);
      }
      if (leased) {
        const job = { ...leased.job, attempts: [leased.attempt] };
        this.#changed(job.ownerId, job.id, job.state, job);
        if (!lease) {
          this.#signalWork();
          return { job, created: true };
        }
        return { job, created: true, claimed: { attempt: leased.attempt, job: leased.job } };
      }
    } else {
      const inserted = await q.jobInsert(row);
      if (inserted) {
        this.#changed(inserted.ownerId, inserted.id, inserted.state);
        this.#signalWork();
        return { job: { ...inserted, attempts: [] }, created: true };
      }
    }
    const existing = await q.jobGetByKey(p.ownerId, row.idempotencyKey);
    if (!existing) {
      // Retention deleted the (finished) job between our INSERT and this read: the key is free again.
      if (round < 3) return this.createJob(p, round + 1);
      throw new OnejobError('internal', 'idempotency key conflicted but no job holds it');
    }
    if (existing.fingerprint !== fp) {
      throw new OnejobError('idempotency_key_reused', `Idempotency-Key "${row.idempotencyKey}" was already used with a different request (job ${existing.id})`, {
        details: { job_id: existing.id },
      });
    }
    const attempts = await q.attemptListByJob(existing.ownerId, existing.id);
    return { job: { ...existing, attempts }, created: false };
  }

  /** Whether the create would replay or join an existing job (so it is neither refused nor counted by the limits). */
  async #existing(p: CreateJobParams, key: string, fp: string): Promise<boolean> {
    const q = this.#driver.queries;
    if (p.keyless) return (await q.jobGetByKeylessFingerprint({ ownerId: p.ownerId, fingerprint: fp, windowMs: p.keyless.windowMs, now: this.#clockStandIn() })) !== null;
    return (await q.jobGetByKey(p.ownerId, key)) !== null;
  }

  /**
   * A keyless create (CONTRACT §12): join the undecided job of the
   * fingerprint, or replay the one that finished within the window, else
   * insert. Two creates that both find nothing race the partial UNIQUE
   * index: the loser's insert writes nothing, and it looks again (finding
   * the winner's job). A few rounds cover a job that finishes and leaves
   * the window between the look and the insert.
   */
  async #createKeyless(p: CreateJobParams, row: JobInsertRow & { readonly keylessFingerprint: string }, windowMs: number): Promise<CreateJobResult> {
    const q = this.#driver.queries;
    for (let round = 1; round <= 4; round++) {
      const existing = await q.jobGetByKeylessFingerprint({ ownerId: p.ownerId, fingerprint: row.keylessFingerprint, windowMs, now: this.#clockStandIn() });
      if (existing) return { job: { ...existing, attempts: await q.attemptListByJob(existing.ownerId, existing.id) }, created: false };
      const inserted = await q.jobInsertKeyless(row);
      if (inserted) {
        this.#changed(inserted.ownerId, inserted.id, inserted.state);
        this.#signalWork();
        return { job: { ...inserted, attempts: [] }, created: true };
      }
    }
    throw new OnejobError('internal', `keyless create of fingerprint ${row.keylessFingerprint} conflicted four times without finding the job that holds it`);
  }

  /**
   * The provider a new job's first attempt goes to, when the creating process
   * may run it at once: the chain's first eligible provider, provided none
   * before it is skipped (a skip is recorded on the job: the executor's
   * claim does that). The certifications are read now (CONTRACT §5).
   */
  async #firstProvider(p: CreateJobParams, eligible: EligibilityCheck): Promise<string | null> {
    const gate = await routingGate(this.#driver.queries, spendGate(this.#spend, p.ownerId, eligible), p.input);
    const plan = planNextProvider(p.providers, [], gate, 'first');
    return plan.skipped.length === 0 ? plan.provider : null;
  }

  async getJob(ownerId: string, jobId: string): Promise<JobWithAttempts | null> {
    if (!isPlausibleId(jobId)) return null;
    // One snapshot: never a job from before a change and its attempts from after it (a rescue committing between two reads).
    return this.#driver.readSnapshot(async (q) => {
      const job = await q.jobGet(ownerId, jobId);
      if (!job) return null;
      return { ...job, attempts: await q.attemptListByJob(ownerId, jobId) };
    });
  }

  async listJobs(p: ListJobsParams): Promise<ListJobsResult> {
    const limit = p.limit ?? LIST_DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_MAX_LIMIT) {
      throw new OnejobError('invalid_request', `limit must be an integer from 1 to ${LIST_MAX_LIMIT}`);
    }
    const after = p.cursor === undefined ? undefined : decodeCursor(p.cursor);
    // The page and its attempts in one snapshot.
    return this.#driver.readSnapshot(async (q) => {
      const rows = await q.jobList({ ownerId: p.ownerId, state: p.state, limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        jobs: await withAttempts(q, p.ownerId, page),
        nextCursor: rows.length > limit && last ? encodeCursor(last) : null,
      };
    });
  }

  async getJobStates(refs: readonly { readonly ownerId: string; readonly jobId: string }[]): Promise<Map<string, JobState>> {
    const plausible = refs.filter((r) => isPlausibleId(r.jobId));
    const rows = plausible.length === 0 ? [] : await this.#driver.queries.jobStates(plausible);
    return new Map(rows.map((r) => [r.id, r.state]));
  }

  async getAttempt(ownerId: string, attemptId: string): Promise<Attempt | null> {
    if (!isPlausibleId(attemptId)) return null;
    return this.#driver.queries.attemptGet(ownerId, attemptId);
  }

  async listEvents(ownerId: string, jobId: string): Promise<readonly JobEvent[]> {
    if (!isPlausibleId(jobId)) return [];
    return this.#driver.queries.eventList(ownerId, jobId);
  }

  async cancelJob(ownerId: string, jobId: string, options: CancelJobOptions = {}): Promise<JobWithAttempts> {
    const out = await this.#driver.transaction(async (q) => {
      const job = await this.#lockJob(q, ownerId, jobId);
      if (isJobTerminal(job.state)) throw new OnejobError('job_finished', `job ${jobId} is already ${job.state}`);
      const now = await this.#now(q);
      const error: RecordedError = { code: 'cancelled', message: 'cancelled on request' };
      const applied = await q.jobFinish({
        ownerId, id: jobId, expectedVersion: job.version, state: 'cancelled',
        completedBy: null, result: null, error, skipped: job.skipped, now,
      });
      if (!applied) throw new OnejobError('job_finished', `job ${jobId} finished concurrently`);
      const events: EventInsertRow[] = [event(job, null, 'job.cancelled', now, withReason(options))];
      for (const a of await q.attemptListByJob(ownerId, jobId)) {
        // Never dispatched: safe to cancel here. Claimed ones are stopped by their executor.
        if (a.state === 'starting' && a.leaseOwner === null) {
          await this.#mustUpdate(q, a, { state: 'cancelled', finishedAt: now, error }, undefined);
          events.push(event(job, a.id, 'attempt.cancelled', now, { reason: 'job cancelled before dispatch' }));
        }
      }
      await q.eventInsert(events);
      return { ...(await q.jobGet(ownerId, jobId))!, attempts: await q.attemptListByJob(ownerId, jobId) };
    });
    this.#changed(ownerId, jobId, out.state, out);
    return out;
  }

  // ---- attempts -----------------------------------------------------------

  async startAttempt(p: StartAttemptParams): Promise<Attempt> {
    const attempt = await this.#driver.transaction(async (q) => {
      const job = await this.#lockJob(q, p.ownerId, p.jobId);
      const attempts = await q.attemptListByJob(p.ownerId, p.jobId);
      const now = await this.#now(q);
      const decision = decideStartAttempt({
        jobState: job.state, chain: job.providers, attempts, kind: p.kind, provider: p.provider ?? defaultManualProvider(p.kind, job.providers, attempts),
        hedgeAfterMs: p.hedgeAfterMs, now, eligible: await routingGate(q, spendGate(this.#spend, job.ownerId, p.eligible ?? everyProviderEligible), job.input),
      });
      const started = await this.#insertAttempt(q, job, attempts, decision.provider, p.kind, decision.skipped, now, p.lease);
      // A later attempt the spend limit cannot hold is not started (CONTRACT §16).
      if (started === null) throw new OnejobError('budget_exceeded', `the owner's spend limit cannot hold an attempt on ${decision.provider}; nothing was started`, { details: { provider: decision.provider } });
      return started;
    });
    this.#changed(p.ownerId, p.jobId);
    if (attempt.leaseOwner === null) this.#signalWork();
    return attempt;
  }

  async settleAttempt(p: SettleAttemptParams): Promise<SettleAttemptResult> {
    if (p.outcome.state === 'succeeded' && p.fence && p.jobId !== undefined && p.fromStates === undefined) {
      // The common case in one statement: the job's only attempt wins. Anything else writes nothing and goes the general way.
      const won = await this.#driver.queries.attemptSettleWon({
        ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, leaseOwner: p.fence.leaseOwner, leaseToken: p.fence.leaseToken,
        result: p.outcome.result, ...meteredSet(p.outcome), actor: p.actor ?? `executor:${p.fence.leaseOwner}`,
        now: this.#clockStandIn(), providerRequestId: p.providerRequestId ?? null,
      });
      if (won) {
        const job = { ...won.job, attempts: [won.attempt] };
        this.#changed(p.ownerId, job.id, job.state, job);
        return { attempt: won.attempt, job, won: true, failover: null };
      }
    }
    const eligible = p.eligible ?? everyProviderEligible;
    const out = await this.#driver.transaction(async (q) => {
      const found = isPlausibleId(p.attemptId) ? await q.attemptGet(p.ownerId, p.attemptId) : null;
      if (!found) throw new OnejobError('attempt_not_found', `attempt ${p.attemptId} not found`);
      const job = await this.#lockJob(q, p.ownerId, found.jobId);
      const attempts = await q.attemptListByJob(p.ownerId, job.id);
      const attempt = attempts.find((a) => a.id === p.attemptId)!;
      const now = await this.#now(q);
      const refused = settleRefusal(attempt.id, attempt.state, p.fromStates);
      if (refused) throw refused;
      // A lease that ran out while nobody else took the attempt (a database outage longer than the lease, a rescue to
      // `unknown`) still names it by its token: the executor ran it, its answer is recorded (fenced by the token alone).
      const held = p.fence ? holdsLease(attempt, p.fence, now) : true;
      if (p.fence && !held && !tokenStillNames(attempt, p.fence)) {
        throw new OnejobError('lease_lost', `the executor no longer holds the lease of attempt ${attempt.id}`);
      }
      const fence = p.fence ? { ...p.fence, now: held ? now : null } : undefined;
      const actor = p.actor ?? (p.fence ? `executor:${p.fence.leaseOwner}` : 'api');
      // Who ended the doubt (CONTRACT §11): as given, else a late answer when the attempt was already unknown.
      const resolvedBy = p.resolvedBy ?? (attempt.state === 'unknown' ? 'late_answer' : null);
      const who: Record<string, unknown> = { actor };
      if (p.reason !== undefined) who.reason = p.reason;
      if (resolvedBy !== null) who.resolved_by = resolvedBy;
      const metered = {
        ...meteredSet(p.outcome),
        ...(resolvedBy === null ? {} : { resolvedBy }),
        ...(p.providerRequestId ? { providerRequestId: p.providerRequestId } : {}),
      };
      const events: EventInsertRow[] = [];
      let won = false;
      let failover: Attempt | null = null;

      if (p.outcome.state === 'superseded') {
        // An attempt that lost the job's stream (CONTRACT §7) can never win: it may end superseded before the job is decided.
        const streamOwner = isJobTerminal(job.state) ? null : await q.jobStreamOwner(p.ownerId, job.id);
        const lostStream = streamOwner !== null && streamOwner !== attempt.id;
        if (!isJobTerminal(job.state) && !lostStream) throw new OnejobError('illegal_transition', `attempt ${attempt.id} cannot be superseded: job ${job.id} is still ${job.state}`);
        const error: RecordedError = p.outcome.error ?? { code: 'superseded', message: `the job was already ${job.state}`, details: { winner: job.completedBy, job_state: job.state } };
        await this.#mustUpdate(q, attempt, { state: 'superseded', finishedAt: now, error, releaseLease: true, ...metered }, fence, p.fromStates);
        events.push(event(job, attempt.id, 'attempt.superseded', now, { ...who, error }));
        // The stream's holder may have gone unknown meanwhile: with this one stopped, nothing may run any more.
        if (lostStream) await this.#afterInDoubt(q, job, now);
      } else if (p.outcome.state === 'succeeded') {
        // CONTRACT §2, invariant 2: the first completion wins; zero rows means this attempt lost.
        won = await q.jobFinish({
          ownerId: p.ownerId, id: job.id, expectedVersion: attempt.baseVersion, state: 'succeeded',
          completedBy: attempt.id, result: p.outcome.result, error: null, skipped: job.skipped, now,
        });
        if (won) {
          // An ended attempt's error says how it ended: none for a success, whatever the doubt before it was (kept on the event).
          await this.#mustUpdate(q, attempt, { state: 'succeeded', finishedAt: now, error: null, releaseLease: true, ...metered }, fence, p.fromStates);
          events.push(event(job, attempt.id, 'attempt.succeeded', now, attempt.error ? { ...who, was: attempt.error } : who), event(job, attempt.id, 'job.succeeded', now, who));
          for (const other of attempts) {
            if (other.id === attempt.id) continue;
            if (other.state === 'starting' && other.leaseOwner === null) {
              const error: RecordedError = { code: 'job_finished', message: `attempt ${attempt.number} won before this one was dispatched` };
              await this.#mustUpdate(q, other, { state: 'cancelled', finishedAt: now, error }, undefined);
              events.push(event(job, other.id, 'attempt.cancelled', now, { reason: 'job succeeded before dispatch' }));
            } else if (other.state === 'unknown' && !(other.leaseOwner !== null && other.leaseExpiresAt !== null && other.leaseExpiresAt > now)) {
              // In doubt and nobody listening for its answer: whatever it did, it can no longer win.
              const error: RecordedError = { code: 'superseded', message: `attempt ${attempt.number} won while this one was in doubt`, details: { winner: attempt.id, was: other.error } };
              await this.#mustUpdate(q, other, { state: 'superseded', finishedAt: now, error, releaseLease: other.leaseOwner !== null }, undefined);
              events.push(event(job, other.id, 'attempt.superseded', now, { actor, error }));
            }
            // Attempts still in flight are stopped by their executors (the job-change notice, or their next heartbeat).
          }
        } else {
          const winner = job.completedBy;
          const error: RecordedError = {
            code: 'superseded',
            message: winner ? `attempt ${winner} had already won` : `the job was already ${job.state}`,
            details: { winner, job_state: job.state },
          };
          await this.#mustUpdate(q, attempt, { state: 'superseded', finishedAt: now, error, releaseLease: true, ...metered }, fence, p.fromStates);
          events.push(
            event(job, attempt.id, 'attempt.superseded', now, who),
            event(job, attempt.id, 'race.lost', now, { loser: attempt.id, winner, job_state: job.state, expected_version: attempt.baseVersion, job_version: job.version }),
          );
        }
      } else {
        const state = p.outcome.state;
        const error: RecordedError = p.outcome.error ?? { code: state, message: `attempt ${state} by ${actor}` };
        await this.#mustUpdate(q, attempt, { state, finishedAt: now, error, releaseLease: true, ...metered }, fence, p.fromStates);
        events.push(event(job, attempt.id, state === 'failed' ? 'attempt.failed' : 'attempt.cancelled', now, { ...who, error }));
        if (!isJobTerminal(job.state)) {
          const after = attempts.map((a) => (a.id === attempt.id ? { ...a, state: state as AttemptState } : a));
          const gate = await routingGate(q, spendGate(this.#spend, job.ownerId, eligible), job.input);
          // A provider whose attempt the spend limit refused (nothing written) is skipped `budget_exceeded`, and the decision taken again.
          const refused = new Set<string>();
          let next = decideAfterSettle(job.providers, after, gate, error, state === 'failed' ? p.retry : undefined);
          while (next.action === 'retry' || next.action === 'failover') {
            // The log reads in causal order: this attempt's end, then the failover (or the retry where it happened) it caused.
            await q.eventInsert(events.splice(0));
            failover = next.action === 'retry'
              ? await this.#insertAttempt(q, job, after, next.provider, 'failover', [], now, undefined, { of: attempt.id, delayMs: next.delayMs })
              : await this.#insertAttempt(q, job, after, next.provider, 'failover', next.skipped, now, undefined);
            if (failover !== null) break;
            refused.add(next.provider);
            next = decideAfterSettle(job.providers, after, refusedGate(gate, refused), error, state === 'failed' ? p.retry : undefined);
          }
          if (next.action === 'stay') {
            await q.jobUpdateProgress({ ownerId: p.ownerId, id: job.id, state: next.state, attemptCount: after.length, skipped: job.skipped, updatedAt: now });
          } else if (next.action === 'fail') {
            next = { ...next, error: exhaustedError(next.error, refused, next.skipped) };
            const skipped = mergeSkipped(job.skipped, next.skipped);
            const applied = await q.jobFinish({
              ownerId: p.ownerId, id: job.id, expectedVersion: job.version, state: 'failed',
              completedBy: null, result: null, error: next.error, skipped, now,
            });
            if (!applied) throw new OnejobError('internal', `job ${job.id} changed under its lock`);
            events.push(...next.skipped.map((s) => event(job, null, 'provider.skipped', now, { ...s })));
            events.push(event(job, null, 'job.failed', now, { error: next.error }));
          }
        }
      }
      await q.eventInsert(events);
      const jobAfter = (await q.jobGet(p.ownerId, job.id))!;
      const attemptsAfter = await q.attemptListByJob(p.ownerId, job.id);
      return { attempt: attemptsAfter.find((a) => a.id === attempt.id)!, job: { ...jobAfter, attempts: attemptsAfter }, won, failover };
    });
    this.#changed(p.ownerId, out.job.id, out.job.state, out.job);
    if (out.failover) this.#signalWork();
    return out;
  }

  // ---- executor -----------------------------------------------------------

  async claimWork(p: ClaimWorkParams): Promise<ClaimedAttempt[]> {
    const gateOf = p.eligible ?? (() => everyProviderEligible);
    let changed: Job[] = [];
    // One transaction: unclaimed attempts first (manual attempts, failovers), then first attempts of queued jobs.
    const claimed = await this.#driver.transaction(async (q) => {
      changed = [];
      const now = await this.#now(q);
      const leaseExpiresAt = new Date(now.getTime() + p.leaseMs);
      const out: ClaimedAttempt[] = [];
      const attempts = await q.attemptClaim({ leaseOwner: p.leaseOwner, leaseExpiresAt, limit: p.limit, now });
      for (const attempt of attempts) {
        const job = await q.jobGet(attempt.ownerId, attempt.jobId);
        if (job) out.push({ attempt, job });
      }
      if (attempts.length > 0) await q.eventInsert(attempts.map((a) => event(a, a.id, 'attempt.claimed', now, { executor: p.leaseOwner })));
      if (out.length >= p.limit) return out;
      const gates = new Map<string, EligibilityCheck>();
      const queued = await q.jobListQueuedForUpdate(p.limit - out.length);
      // Batch lines only after interactive work, and only as many as the executor's batch share has room for.
      const batchRoom = Math.min(p.limit - out.length - queued.length, p.batchLimit ?? 0);
      if (batchRoom > 0) queued.push(...await q.jobListQueuedBatchLines(batchRoom, now));
      for (const job of queued) {
        const existing = await q.attemptListByJob(job.ownerId, job.id);
        let gate = gates.get(job.route);
        if (!gate) gates.set(job.route, (gate = await routingGate(q, gateOf(job.route))));
        // An owner at its concurrency limit: its queued job waits (CONTRACT §16), counted in this transaction.
        const cap = this.#spend?.limitsOf(job.ownerId).concurrency ?? null;
        if (cap !== null && (await q.ownerUse({ ownerId: job.ownerId, day: '', month: '', createdSince: now })).inFlight >= cap) continue;
        const ownerGate = withInput(spendGate(this.#spend, job.ownerId, gate), job.input);
        changed.push(job);
        // A provider whose attempt the spend limit refused is skipped `budget_exceeded` (CONTRACT §16), and the next one tried.
        const refused = new Set<string>();
        let attempt: Attempt | null = null;
        let plan = planNextProvider(job.providers, existing, ownerGate, 'first');
        while (plan.provider !== null) {
          attempt = await this.#insertAttempt(q, job, existing, plan.provider, 'first', plan.skipped, now, { leaseOwner: p.leaseOwner, leaseMs: p.leaseMs });
          if (attempt !== null) break;
          refused.add(plan.provider);
          plan = planNextProvider(job.providers, existing, refusedGate(ownerGate, refused), 'first');
        }
        if (attempt === null) {
          const exhausted: RecordedError = { code: 'providers_exhausted', message: 'no provider of the chain is eligible', details: { skipped: plan.skipped } };
          const error = exhaustedError(exhausted, refused, plan.skipped);
          await q.jobFinish({ ownerId: job.ownerId, id: job.id, expectedVersion: job.version, state: 'failed', completedBy: null, result: null, error, skipped: mergeSkipped(job.skipped, plan.skipped), now });
          await q.eventInsert([event(job, null, 'job.failed', now, { error })]);
          continue;
        }
        out.push({ attempt, job });
      }
      return out;
    });
    for (const job of changed) this.#changed(job.ownerId, job.id);
    return claimed;
  }

  claimStream(p: { ownerId: string; jobId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<boolean> {
    if (!isPlausibleId(p.jobId) || !isPlausibleId(p.attemptId)) return Promise.resolve(false);
    return this.#driver.queries.jobStreamClaim({
      ownerId: p.ownerId, id: p.jobId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now: this.#clockStandIn(),
    });
  }

  markRunning(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; timeoutMs: number | null }): Promise<boolean> {
    if (!isPlausibleId(p.attemptId)) return Promise.resolve(false);
    return this.#driver.queries.attemptMarkRunning({ ...p, now: this.#clockStandIn() });
  }

  async markUnknown(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; reason: RecordedError; providerRequestId?: string | undefined }): Promise<boolean> {
    const result = await this.#driver.transaction(async (q) => {
      const found = await q.attemptGet(p.ownerId, p.attemptId);
      if (!found) return null;
      const job = await this.#lockJob(q, p.ownerId, found.jobId);
      const now = await this.#now(q);
      const ok = await q.attemptUpdate({
        ownerId: p.ownerId, id: p.attemptId, fromStates: ['starting', 'running'],
        fence: { leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now },
        set: { state: 'unknown', error: p.reason, unknownAt: now, lookupNextAt: null, ...(p.providerRequestId ? { providerRequestId: p.providerRequestId } : {}) },
      });
      if (!ok) return null;
      await this.#afterInDoubt(q, job, now);
      await q.eventInsert([event(job, p.attemptId, 'attempt.unknown', now, { reason: p.reason })]);
      return job;
    });
    if (result) this.#changed(result.ownerId, result.id);
    // Not marked (the lease ran out, the rescuer was first): the provider's id is still the attempt's, for the lookup.
    else if (p.providerRequestId) await this.recordProviderRequestId({ ...p, providerRequestId: p.providerRequestId });
    return result !== null;
  }

  async leaseStatus(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<LeaseStatus> {
    const a = isPlausibleId(p.attemptId) ? await this.#driver.queries.attemptGet(p.ownerId, p.attemptId) : null;
    if (!a) return { status: 'gone' };
    if (!isAttemptActive(a.state)) return { status: 'finished', state: a.state };
    if (holdsLease(a, p, await this.#now(this.#driver.queries))) return { status: 'held', state: a.state };
    return tokenStillNames(a, p) ? { status: 'expired', state: a.state } : { status: 'lost' };
  }

  async extendLeases(p: { leaseOwner: string; leaseTokens: readonly string[]; leaseMs: number }): Promise<string[]> {
    if (p.leaseTokens.length === 0) return [];
    const now = await this.#now(this.#driver.queries);
    return this.#driver.queries.attemptExtendLeases({
      leaseOwner: p.leaseOwner, leaseTokens: p.leaseTokens, leaseExpiresAt: new Date(now.getTime() + p.leaseMs), now,
    });
  }

  /**
   * Only from `starting` (handed back unsent: claimable again) or `unknown`
   * (nothing more to wait for): a `running` attempt keeps its lease until it
   * is settled or marked unknown, so no attempt is ever running without an
   * owner (the schema refuses it too, `attempts_running_has_lease`).
   */
  async releaseLease(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<boolean> {
    const now = await this.#now(this.#driver.queries);
    return this.#driver.queries.attemptUpdate({
      ownerId: p.ownerId, id: p.attemptId, fromStates: ['starting', 'unknown'],
      fence: { leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now },
      set: { releaseLease: true },
    });
  }

  /**
   * Hands back a first attempt leased at birth whose create went unanswered
   * (`Store.handBackUnsent`): fenced by its lease token alone, so it applies
   * after the lease ran out, and from `unknown` when the rescuer moved it
   * there from this very lease and nothing happened since (no other claim:
   * the token; no resolve, cancel or answer: the state, no resolution nor
   * provider id recorded, no lookup held now, the job not decided). The attempt becomes what a
   * released, never-sent attempt is: `starting`, unclaimed.
   */
  async handBackUnsent(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string }): Promise<HandBackResult> {
    if (!isPlausibleId(p.attemptId)) return 'absent';
    const out = await this.#driver.transaction(async (q) => {
      const found = await q.attemptGet(p.ownerId, p.attemptId);
      if (!found) return { result: 'absent' as const };
      const job = await this.#lockJob(q, p.ownerId, found.jobId);
      const a = (await q.attemptGet(p.ownerId, p.attemptId))!;
      const at = await this.#now(q);
      const decided = mayHandBack(a, job.state, p);
      if (decided !== 'hand_back') return { result: decided };
      const fence = { leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now: null };
      if (a.state === 'starting') {
        if (!(await q.attemptUpdate({ ownerId: a.ownerId, id: a.id, fromStates: ['starting'], fence, set: { releaseLease: true } }))) return { result: 'refused' as const };
        return { result: 'handed_back' as const, job: null };
      }
      const ok = await q.attemptUpdate({
        // A reconciler's lookup in flight settles it unfenced: while one is held, the lookup decides (a never-sent request is not found).
        ownerId: a.ownerId, id: a.id, fromStates: ['unknown'], fence, noLookupHeldAt: at,
        set: { state: 'starting', error: null, unknownAt: null, lookupNextAt: null, releaseLease: true },
      });
      if (!ok) return { result: 'refused' as const };
      const attempts = await q.attemptListByJob(job.ownerId, job.id);
      const state = deriveActiveJobState(attempts);
      if (state !== null && state !== job.state) {
        await q.jobUpdateProgress({ ownerId: job.ownerId, id: job.id, state, attemptCount: attempts.length, skipped: job.skipped, updatedAt: at });
      }
      await q.eventInsert([event(job, a.id, 'attempt.handed_back', at, { executor: p.leaseOwner, was: a.error, reason: 'the create went unanswered; the attempt was never sent' })]);
      return { result: 'handed_back' as const, job };
    });
    if (out.result === 'handed_back') {
      if ('job' in out && out.job) this.#changed(out.job.ownerId, out.job.id);
      this.#signalWork();
    }
    return out.result;
  }

  /**
   * Rescues attempts nobody owns any more: `starting`/`running` with an
   * expired lease, and any `running` attempt without a lease at all (the
   * schema forbids it; found anyway, should one slip through). Each becomes
   * `unknown` (never failed: the request may have been executed), or, when
   * its job is already decided, `superseded` (`cancelled` under a cancelled
   * job): a loser whose executor died is not left in doubt under a winner.
   */
  async rescueExpiredLeases(limit = 100): Promise<number> {
    const now = await this.#now(this.#driver.queries);
    const expired = await this.#driver.queries.attemptListLeaseExpired(now, limit);
    let rescued = 0;
    for (const stale of expired) {
      const job = await this.#driver.transaction(async (q) => {
        const locked = await this.#lockJob(q, stale.ownerId, stale.jobId);
        const a = await q.attemptGet(stale.ownerId, stale.id);
        const at = await this.#now(q);
        // Re-checked under the job lock: still the same claim, still ownerless.
        if (!a || (a.state !== 'starting' && a.state !== 'running') || a.leaseToken !== stale.leaseToken) return null;
        const orphan = a.state === 'running' && a.leaseOwner === null;
        if (!orphan && (a.leaseOwner === null || !a.leaseExpiresAt || a.leaseExpiresAt > at)) return null;
        const whose = orphan ? 'no executor owned it' : `executor ${a.leaseOwner} stopped renewing its lease`;
        const events: EventInsertRow[] = [
          event(locked, a.id, 'attempt.lease_expired', at, { executor: a.leaseOwner, lease_expires_at: a.leaseExpiresAt?.toISOString() ?? null, orphan }),
        ];
        if (isJobTerminal(locked.state)) {
          const state = locked.state === 'cancelled' ? 'cancelled' : 'superseded';
          const error: RecordedError = { code: state === 'cancelled' ? 'cancelled' : 'superseded', message: `${whose} while the attempt was ${a.state}; the job was already ${locked.state}`, details: { winner: locked.completedBy, job_state: locked.state } };
          const ok = await q.attemptUpdate({ ownerId: a.ownerId, id: a.id, fromStates: [a.state], set: { state, error, finishedAt: at, releaseLease: true } });
          if (!ok) return null;
          events.push(event(locked, a.id, state === 'cancelled' ? 'attempt.cancelled' : 'attempt.superseded', at, { actor: 'rescuer', error }));
        } else {
          const reason: RecordedError = { code: 'lease_expired', message: `${whose} while the attempt was ${a.state}` };
          const ok = await q.attemptUpdate({ ownerId: a.ownerId, id: a.id, fromStates: [a.state], set: { state: 'unknown', error: reason, releaseLease: true, unknownAt: at, lookupNextAt: null } });
          if (!ok) return null;
          await this.#afterInDoubt(q, locked, at);
          events.push(event(locked, a.id, 'attempt.unknown', at, { reason }));
        }
        await q.eventInsert(events);
        return locked;
      });
      if (job) {
        rescued++;
        this.#changed(job.ownerId, job.id);
      }
    }
    return rescued;
  }

  async recordProviderRequestId(p: { ownerId: string; attemptId: string; leaseOwner: string; leaseToken: string; providerRequestId: string }): Promise<boolean> {
    if (!isPlausibleId(p.attemptId)) return false;
    // Whenever the attempt is not finished, under its own token (issue 35): a lease that ran out, or a rescue to
    // `unknown`, must not drop the id the lookup needs. Another executor's claim has another token.
    return this.#driver.queries.attemptUpdate({
      ownerId: p.ownerId, id: p.attemptId, fromStates: ACTIVE_ATTEMPT_STATES,
      fence: { leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now: null },
      set: { providerRequestId: p.providerRequestId },
    });
  }

  claimLookups(p: ClaimLookupsParams): Promise<Attempt[]> {
    return this.#driver.queries.attemptClaimLookups({
      holder: p.holder, providers: p.providers, limit: p.limit, leaseMs: p.leaseMs, firstCheckMs: p.firstCheckMs, now: this.#clockStandIn(),
    });
  }

  deferLookup(p: DeferLookupParams): Promise<boolean> {
    if (!isPlausibleId(p.attemptId)) return Promise.resolve(false);
    return this.#driver.queries.attemptDeferLookup({
      ownerId: p.ownerId, id: p.attemptId, holder: p.holder, backoffBaseMs: p.backoffBaseMs, backoffMaxMs: p.backoffMaxMs, now: this.#clockStandIn(),
    });
  }

  oldestUnknownAt(): Promise<Date | null> {
    return this.#driver.queries.attemptOldestUnknownAt();
  }

  databaseNow(): Promise<Date> {
    return this.#now(this.#driver.queries);
  }

  useCallbackSignature(p: { signature: string; attemptId: string; expiresAt: Date }): Promise<boolean> {
    return this.#driver.queries.callbackSignatureUse({ ...p, now: this.#clockStandIn() });
  }

  notifyWork(): Promise<void> {
    return this.#driver.notifyWork();
  }

  async onWork(listener: () => void): Promise<() => Promise<void>> {
    this.#changes.on('work', listener);
    const off = await this.#driver.onWork(listener);
    return async () => {
      this.#changes.off('work', listener);
      await off();
    };
  }

  onJobChanged(listener: JobChangeListener): () => void {
    this.#changes.on('job', listener);
    this.#listenToOtherProcesses();
    return () => this.#changes.off('job', listener);
  }

  /**
   * Once per store: other processes' job changes (PostgreSQL notifications)
   * reach the same listeners, with the state and without the job (a waiter
   * reads it, once per job). A failed subscription is tried again by the next
   * `onJobChanged`; meanwhile waiters' periodic re-check covers the gap.
   */
  #listenToOtherProcesses(): void {
    if (this.#jobNotifications !== null || this.#closing) return;
    this.#jobNotifications = this.#driver
      .onJobNotification((ownerId, jobId, state) => this.#changed(ownerId, jobId, state))
      .catch(() => {
        this.#jobNotifications = null;
        return null;
      });
  }

  async appendStreamBatch(row: StreamBatchRow): Promise<void> {
    await this.#driver.queries.streamBatchInsert(row);
    this.#changes.emit('stream', row.jobId);
  }

  readStreamBatches(ownerId: string, jobId: string, attemptNumber: number | null, afterSeq: number): Promise<StreamBatchRow[]> {
    return this.#driver.queries.streamBatchList(ownerId, jobId, attemptNumber, afterSeq);
  }

  onStreamAppended(listener: (jobId: string) => void): () => void {
    this.#changes.on('stream', listener);
    if (this.#streamNotifications === null && !this.#closing) {
      // Once per store; a failed subscription is tried again by the next reader (readers re-read meanwhile).
      this.#streamNotifications = this.#driver
        .onStreamNotification((jobId) => this.#changes.emit('stream', jobId))
        .catch(() => {
          this.#streamNotifications = null;
          return null;
        });
    }
    return () => this.#changes.off('stream', listener);
  }

  async close(): Promise<void> {
    this.#closing = true;
    this.#changes.removeAllListeners();
    const off = await this.#jobNotifications;
    await off?.().catch(() => undefined);
    const offStreams = await this.#streamNotifications;
    await offStreams?.().catch(() => undefined);
    return this.#driver.close();
  }

  recordCertification(row: CertificationRow): Promise<void> {
    return this.#driver.queries.certificationUpsert(row);
  }

  listCertifications(): Promise<readonly CertificationRow[]> {
    return this.#driver.queries.certificationList();
  }

  // ---- operations, administration, retention -----------------------------

  countAttemptsInDoubt(): Promise<number> {
    return this.#driver.queries.attemptCountInDoubt();
  }

  async ownerUse(ownerId: string): Promise<{ now: Date; use: OwnerUse }> {
    const now = await this.#now(this.#driver.queries);
    const w = windowsAt(now);
    // Jobs are stamped by the host's clock: the requests-per-minute window is too.
    const createdSince = new Date(this.#clock.now().getTime() - REQUESTS_WINDOW_MS);
    return { now, use: await this.#driver.queries.ownerUse({ ownerId, day: w.day.startsOn, month: w.month.startsOn, createdSince }) };
  }

  async listAllJobs(p: ListAllJobsParams): Promise<ListJobsResult> {
    if (p.ownerId !== undefined) return this.listJobs({ ...p, ownerId: p.ownerId });
    const limit = p.limit ?? LIST_DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_MAX_LIMIT) {
      throw new OnejobError('invalid_request', `limit must be an integer from 1 to ${LIST_MAX_LIMIT}`);
    }
    const after = p.cursor === undefined ? undefined : decodeCursor(p.cursor);
    return this.#driver.readSnapshot(async (q) => {
      const rows = await q.jobListAll({ state: p.state, limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const jobs: JobWithAttempts[] = [];
      for (const j of page) jobs.push({ ...j, attempts: await q.attemptListByJob(j.ownerId, j.id) });
      const last = page[page.length - 1];
      return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
    });
  }

  async findJob(jobId: string): Promise<JobWithAttempts | null> {
    if (!isPlausibleId(jobId)) return null;
    return this.#driver.readSnapshot(async (q) => {
      const job = await q.jobGetAnyOwner(jobId);
      return job && { ...job, attempts: await q.attemptListByJob(job.ownerId, job.id) };
    });
  }

  async findAttempt(attemptId: string): Promise<Attempt | null> {
    if (!isPlausibleId(attemptId)) return null;
    return this.#driver.queries.attemptGetAnyOwner(attemptId);
  }

  tryMaintenanceLease(p: { name: string; holder: string; ttlMs: number }): Promise<boolean> {
    return this.#driver.queries.maintenanceLeaseAcquire(p);
  }

  releaseMaintenanceLease(p: { name: string; holder: string }): Promise<void> {
    return this.#driver.queries.maintenanceLeaseRelease(p);
  }

  async deleteFinishedJobs(p: DeleteFinishedJobsParams): Promise<DeleteFinishedJobsResult> {
    if (!Number.isFinite(p.olderThanMs) || p.olderThanMs < 0) throw new OnejobError('invalid_request', 'olderThanMs must be a number of milliseconds ≥ 0');
    const limit = p.batchSize ?? 500;
    const total = { jobs: 0, attempts: 0, events: 0, batches: 0, jobsByState: {} as Record<string, number> };
    while (p.maxBatches === undefined || total.batches < p.maxBatches) {
      if (total.batches > 0 && p.beforeBatch && !(await p.beforeBatch())) break;
      const batch = await this.#driver.transaction((q) => q.retentionDeleteBatch({ olderThanMs: p.olderThanMs, limit }));
      total.batches++;
      total.jobs += batch.jobs;
      total.attempts += batch.attempts;
      total.events += batch.events;
      for (const [state, n] of Object.entries(batch.jobsByState)) total.jobsByState[state] = (total.jobsByState[state] ?? 0) + (n ?? 0);
      if (batch.jobs < limit) break;
    }
    return total;
  }

  async recordLateUsage(p: RecordLateUsageParams): Promise<boolean> {
    const jobId = await this.#driver.transaction(async (q) => {
      const found = isPlausibleId(p.attemptId) ? await q.attemptGet(p.ownerId, p.attemptId) : null;
      if (!found) return null;
      // Under the job lock, like every attempt write: "no usage yet" cannot change between the read and the write.
      const job = await this.#lockJob(q, p.ownerId, found.jobId);
      const a = await q.attemptGet(p.ownerId, p.attemptId);
      if (!a || a.usage !== null) return null;
      const ok = await q.attemptUpdate({ ownerId: a.ownerId, id: a.id, fromStates: [a.state], set: { usage: p.usage, costMicros: p.costMicros } });
      if (!ok) return null;
      await q.eventInsert([event(job, a.id, 'attempt.usage_recorded', this.#clock.now(), {
        actor: p.actor ?? null, state: a.state,
        usage: { prompt_tokens: p.usage.promptTokens, completion_tokens: p.usage.completionTokens, total_tokens: p.usage.totalTokens },
        cost_micros: p.costMicros,
      })]);
      return job.id;
    });
    if (jobId !== null) this.#changed(p.ownerId, jobId);
    return jobId !== null;
  }

  // ---- internals ----------------------------------------------------------

  async #lockJob(q: DriverQueries, ownerId: string, jobId: string): Promise<Job> {
    const job = isPlausibleId(jobId) ? await q.jobGet(ownerId, jobId, true) : null;
    if (!job) throw new OnejobError('job_not_found', `job ${jobId} not found`);
    return job;
  }

  async #insertAttempt(
    q: DriverQueries, job: Job, existing: readonly Attempt[], provider: string, kind: AttemptKind,
    skipped: readonly SkippedProvider[], now: Date, lease: LeaseRequest | undefined,
    retry?: { readonly of: string; readonly delayMs: number },
  ): Promise<Attempt | null> {
    const number = existing.reduce((n, a) => Math.max(n, a.number), 0) + 1;
    const id = newId('att');
    // A retry starts when it is due: until then it is `starting` and unclaimed (the claim takes only attempts whose start has come).
    const startedAt = retry === undefined ? now : new Date(now.getTime() + retry.delayMs);
    const reserve = reservationFor(this.#spend, job.ownerId, provider, job.input);
    await q.attemptInsert({
      id, ownerId: job.ownerId, jobId: job.id, number, provider, kind, state: 'starting',
      baseVersion: job.version, startedAt, deadlineAt: null,
      leaseOwner: lease?.leaseOwner ?? null,
      leaseToken: lease ? newId('lease') : null,
      leaseExpiresAt: lease ? new Date(now.getTime() + lease.leaseMs) : null,
      reserve,
    });
    // The database refused the reservation (CONTRACT §16): no row was written; the caller skips the provider.
    if (reserve !== null && (await q.attemptGet(job.ownerId, id)) === null) return null;
    const ok = await q.jobUpdateProgress({
      ownerId: job.ownerId, id: job.id, state: 'running', attemptCount: number, skipped: mergeSkipped(job.skipped, skipped), updatedAt: now,
    });
    if (!ok) throw new OnejobError('job_finished', `job ${job.id} finished concurrently`);
    await q.eventInsert([
      ...skipped.map((s) => event(job, null, 'provider.skipped', now, { ...s })),
      event(job, id, 'attempt.started', now, {
        number, provider, kind, lease_owner: lease?.leaseOwner ?? null,
        ...(retry === undefined ? {} : { retry_of: retry.of, due_at: startedAt.toISOString() }),
      }),
    ]);
    return (await q.attemptGet(job.ownerId, id))!;
  }

  /** After an attempt became unknown: the job is `unknown` unless something else still runs. */
  async #afterInDoubt(q: DriverQueries, job: Job, now: Date): Promise<void> {
    if (isJobTerminal(job.state)) return;
    const attempts = await q.attemptListByJob(job.ownerId, job.id);
    const state = deriveActiveJobState(attempts) ?? 'unknown';
    if (state !== job.state) {
      await q.jobUpdateProgress({ ownerId: job.ownerId, id: job.id, state, attemptCount: attempts.length, skipped: job.skipped, updatedAt: now });
    }
  }

  async #mustUpdate(
    q: DriverQueries, attempt: Attempt,
    set: {
      state?: AttemptState; finishedAt?: Date; error?: RecordedError | null; releaseLease?: boolean; usage?: TokenUsage | null; costMicros?: number | null;
      resolvedBy?: ResolvedBy; providerRequestId?: string;
    },
    fence: { leaseOwner: string; leaseToken: string; now: Date | null } | undefined,
    fromStates?: readonly AttemptState[],
  ): Promise<void> {
    const ok = await q.attemptUpdate({ ownerId: attempt.ownerId, id: attempt.id, fromStates: fromStates ?? [attempt.state], fence, set });
    if (ok) return;
    const now = fromStates && (await q.attemptGet(attempt.ownerId, attempt.id));
    throw (now && settleRefusal(attempt.id, now.state, fromStates)) || new OnejobError(fence ? 'lease_lost' : 'attempt_finished', `attempt ${attempt.id} changed concurrently`);
  }

  #changed(ownerId: string, jobId: string, state?: JobState, job?: JobWithAttempts): void {
    this.#changes.emit('job', ownerId, jobId, state, job);
  }

  /** Wakes executors: in this process at once, other processes through the driver (coalesced). */
  #signalWork(): void {
    this.#changes.emit('work');
    if (!this.#driver.capabilities.supportsListenNotify) return;
    if (this.#notifyInFlight) {
      this.#notifyPending = true;
      return;
    }
    this.#notifyInFlight = true;
    void this.#driver
      .notifyWork()
      .catch(() => undefined)
      .finally(() => {
        this.#notifyInFlight = false;
        if (this.#notifyPending) {
          this.#notifyPending = false;
          this.#signalWork();
        }
      });
  }
}

/**
 * The gate of one routing decision: a {@link CertificationBoundCheck} is
 * decided on the verdicts read now, in the deciding transaction `q`; any
 * other check as it is.
 */
async function routingGate(q: DriverQueries, check: EligibilityCheck, input?: unknown): Promise<EligibilityCheck> {
  const decided = isCertificationBound(check) ? check.withVerdicts(await q.certificationVerdicts(check.certificationProviders)) : check;
  return input === undefined ? decided : withInput(decided, input);
}

/** `check` asked about one job's `input` (a gate may refuse `unsupported:<member>`, CONTRACT §7). */
function withInput(check: EligibilityCheck, input: unknown): EligibilityCheck {
  return (provider, kind) => check(provider, kind, input);
}

/**
 * The default provider of a manual attempt (CONTRACT §3): the first of the
 * chain that has no attempt yet, whatever its certification (an uncertified
 * one is refused, not skipped); undefined when every provider has one (then
 * `chain_exhausted`) and for automatic kinds, which skip what they may not use.
 */
function defaultManualProvider(kind: AttemptKind, chain: readonly string[], attempts: readonly Attempt[]): string | undefined {
  if (kind !== 'manual') return undefined;
  const tried = new Set(attempts.map((a) => a.provider));
  return chain.find((provider) => !tried.has(provider));
}

/**
 * Whether `id` could name a row: onejob's ids are visible ASCII. Anything else
 * (a NUL byte, which PostgreSQL text cannot even hold) is simply not found.
 */
function isPlausibleId(id: string): boolean {
  return id.length > 0 && id.length <= 200 && /^[!-~]+$/.test(id);
}

/** The usage columns an outcome sets (none when it reports no usage). */
function meteredSet(outcome: AttemptOutcome): { usage?: TokenUsage | null; costMicros?: number | null } {
  if (outcome.state === 'cancelled' || outcome.usage === undefined) return {};
  return { usage: outcome.usage, costMicros: outcome.costMicros ?? null };
}

/** Event data of a cancel: who and why, when given. */
function withReason(o: CancelJobOptions): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  if (o.actor !== undefined) data.actor = o.actor;
  if (o.reason !== undefined) data.reason = o.reason;
  return data;
}

/**
 * The attempt still carries this lease's token and nobody else's lease: the
 * lease's executor ran it (it expired, or the rescuer released it to
 * `unknown`). A `starting` attempt handed back (owner cleared) is not named:
 * it may be claimed again under a new token.
 */
function tokenStillNames(a: Attempt, fence: { leaseOwner: string; leaseToken: string }): boolean {
  if (!isAttemptActive(a.state) || a.leaseToken !== fence.leaseToken) return false;
  return a.leaseOwner === fence.leaseOwner || (a.leaseOwner === null && a.state === 'unknown');
}

/**
 * Whether a never-sent first attempt may be handed back by its lease's
 * token (see `JobStore.handBackUnsent`): `starting` with the token
 * (already handed back when unleased), or `unknown` as the rescuer left it
 * from this lease (`lease_expired`, unleased, no resolution, no provider id
 * recorded; a lookup that asked and found nothing definite does not count)
 * under a job not decided. Else `refused`.
 */
export function mayHandBack(a: Attempt, jobState: JobState, fence: { leaseOwner: string; leaseToken: string }): HandBackResult | 'hand_back' {
  if (a.leaseToken !== fence.leaseToken) return 'refused';
  if (a.state === 'starting') {
    if (a.leaseOwner === null) return 'handed_back';
    return a.leaseOwner === fence.leaseOwner ? 'hand_back' : 'refused';
  }
  // A lookup that looked and found nothing definite says nothing against "never sent" (issue 35): only a provider id
  // does (the provider answered this attempt). A lookup still held is refused in SQL (`noLookupHeldAt`).
  const rescued = a.state === 'unknown' && a.leaseOwner === null && a.error?.code === 'lease_expired' && a.resolvedBy === null && a.providerRequestId === null;
  return rescued && !isJobTerminal(jobState) ? 'hand_back' : 'refused';
}

function holdsLease(a: Attempt, fence: { leaseOwner: string; leaseToken: string }, now: Date): boolean {
  return a.leaseOwner === fence.leaseOwner && a.leaseToken === fence.leaseToken && a.leaseExpiresAt !== null && a.leaseExpiresAt > now;
}

/** An event row about `subject` (a job, or an attempt: then its job). */
function event(subject: Job | Attempt, attemptId: string | null, type: EventInsertRow['type'], at: Date, data: Record<string, unknown>): EventInsertRow {
  const jobId = 'jobId' in subject ? subject.jobId : subject.id;
  return { ownerId: subject.ownerId, jobId, attemptId, type, data, at };
}

function mergeSkipped(a: readonly SkippedProvider[], b: readonly SkippedProvider[]): SkippedProvider[] {
  const out = new Map(a.map((s) => [s.provider, s]));
  for (const s of b) out.set(s.provider, s);
  return [...out.values()];
}

function encodeCursor(job: Job): string {
  return Buffer.from(JSON.stringify([job.createdAt.getTime(), job.id])).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && isPlausibleId(v[1])) {
      return { createdAt: new Date(v[0] as number), id: v[1] };
    }
  } catch {
    // fall through
  }
  throw new OnejobError('invalid_request', 'cursor is not one this server issued');
}
