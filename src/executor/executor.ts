/**
 * The executor: claims attempts from the database and runs them against providers.
 *
 * One attempt is a pipeline of small named steps (Oban-style): lease →
 * send (→ `running`) → first output → answer → record → report. What
 * happens at each step is decided by one pure machine
 * (`attempt-machine.ts`: `stepAttempt`, `planRecord`, `planRefusal`,
 * `planWriteFailure`); this file carries out its actions (timers, writes,
 * aborts, the hub stream).
 *
 * - **Leases and fencing.** Work is claimed with a lease; every write presents
 *   the lease token and applies only while the lease is unexpired, so an
 *   executor paused past its lease cannot change a job it no longer owns. One
 *   heartbeat per executor extends the leases of everything in flight; for a
 *   token missing from the answer the store is asked why (`leaseStatus`): a
 *   lease another executor holds is lost (the attempt is abandoned without
 *   another write); one that merely ran out still records the answer by its
 *   token; a decided attempt is stopped.
 * - **Timeouts are unknown, named for what they bound** (CONTRACT §11). At
 *   the provider's `timeoutMs` without an answer, counted from the request's
 *   dispatch (a connect is not the provider's silence), the attempt becomes
 *   `unknown` (`deadline_exceeded`; the job blocks) but the request is not
 *   aborted: the executor keeps listening for `lateAnswerGraceMs`, and a late
 *   answer goes through the same compare-and-swap (it may still win, or be
 *   superseded). A stream's `timeoutMs` bounds its first output; after it,
 *   only a silence of `idleTimeoutMs` between events ends it (`unknown`,
 *   `stream_stalled`): a stream that keeps sending is never cut.
 * - **Failover, retries and hedges.** A definite failure settles the attempt
 *   `failed`; the store starts the next attempt in the same transaction: on
 *   the same provider once the wait it asked for is over, when the failure
 *   certainly did not execute (429/503 with `Retry-After`, a refused
 *   connection) and the provider's `retry` policy allows, else on the next
 *   eligible provider. With
 *   `hedgeAfterMs`, the executor owning a running attempt starts a hedge after
 *   that much silence, through the same guarded `startAttempt`.
 * - **Crashes.** A dead executor stops renewing; the rescuer (any executor)
 *   moves its `starting`/`running` attempts to `unknown`, never `failed`.
 * - **A write that fails is tried again.** Recording an answer (settle) or a
 *   doubt (unknown) that fails transiently (connection lost, server
 *   restarting, deadlock, `SQLITE_BUSY`, a timeout: `store/transient-errors.ts`)
 *   is retried with jittered backoff: a doubt for as long as the lease may
 *   still be held, an answer for up to `answerHoldMs` (it applies by its
 *   lease's token after the lease ran out); only a fenced-out write
 *   (`lease_lost`, `attempt_finished`: then re-read, it may be our own
 *   earlier try) or the end of that time gives up. A lease is released only after `unknown` was
 *   recorded: no attempt is left `running` without an owner.
 * - **Losers stop billing.** Once a job is decided (won, cancelled), its
 *   other attempts in flight here are aborted at the provider (the HTTP
 *   request is cancelled) and end `superseded` (`cancelled`): at once for a
 *   decision made in this process, at the next heartbeat for another's.
 * - **Streams.** A job whose input has `stream: true` is sent with
 *   `provider.stream()`. At its first output the attempt claims the job's
 *   stream (`store.claimStream`, a compare-and-swap on the job row) and
 *   publishes its deltas to the {@link StreamHub}: on a route without
 *   hedging at once, stored once the claim is in (no other attempt can run
 *   beside it); on a hedged route after the claim. An attempt that loses the
 *   claim is stopped and ends `superseded` (what it published ends with
 *   `stream_not_claimed`), and the owner stops its siblings here. A hedge
 *   counts to the first output. The stream ends after the outcome is
 *   recorded: with the stored result when the attempt won, else with an
 *   error (`failed`, `unknown`). A streaming attempt past its deadline
 *   (or stalled) is `unknown` and stopped (a stream cannot be resumed).
 * - **Wake-ups.** In-process signal and PostgreSQL LISTEN/NOTIFY, with a slow
 *   poll as the fallback.
 *
 * See docs/executor.md.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { isOnejobError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { everyProviderEligible, type EligibilityCheck, type RetryPolicy, type RetryRequest } from '../core/job-rules.ts';
import { isJobTerminal, type JobState } from '../core/states.ts';
import type { Attempt, Job, RecordedError } from '../core/types.ts';
import { DEFAULT_PROVIDER_IDLE_TIMEOUT_MS, isOutputDelta, providerErrorLogFields, type ChatDelta, type NormalizedCompletion, type Provider, type ProviderError, type ProviderOutcome, type ProviderRequest } from '../providers/provider.ts';
import { retryHereAfter } from '../providers/classify-outcome.ts';
import { markPassThrough } from '../core/pass-through.ts';
import { meterUsage, type MeteredUsage, type Pricing } from '../core/usage.ts';
import type { AttemptOutcome, ClaimedAttempt, LeaseRequest, LeaseStatus, SettleAttemptResult, Store } from '../store/store.ts';
import { defaultStreamHub, type StreamHub, type StreamWriter } from './stream-hub.ts';
import { isTransientDatabaseError } from '../store/transient-errors.ts';
import { withAttemptSpan } from '../tracing/tracing.ts';
import { Reconciler, type ReconcilerOptions } from './reconciler.ts';
import { watchEndedDoubt } from './ended-doubt-stop.ts';
import { batchRoom, DEFAULT_BATCH_MAX_SHARE, hedgeAfterMsOf, isBatchLine } from './batch-share.ts';
import {
  isOwnEarlierSettle, planHandBack, planLeaseAfterCreate, planRecord, planRefusal, planWriteFailure, startAttempt, stepAttempt, streamEndFor,
  type AbortWhy, type AttemptAction, type AttemptEvent, type AttemptState, type HandBackFacts, type LeaseReport, type RecordPlan, type RefusalCode, type UsageSource,
} from './attempt-machine.ts';

/** What a route means to the executor. */
export interface ExecutorRoute {
  readonly hedgeAfterMs: number | null;
  /** Provider refusals that end the job as its answer instead of failing over (src/core/pass-through.ts). */
  readonly passThrough?: readonly string[] | undefined;
}

/**
 * The run-time check of an output against its route's contract (CONTRACT §5).
 * Returns the job result's `content` (parsed JSON when the contract has an
 * output schema), or the findings that make the attempt a `contract_violation`.
 */
export type OutputCheck = (
  route: string,
  input: unknown,
  completion: NormalizedCompletion,
) => { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly findings: readonly unknown[] };

/** Without a contract the content is the provider's text. */
export const acceptText: OutputCheck = (_route, _input, completion) => ({ ok: true, value: completion.content });

/**
 * How long after its deadline an attempt whose provider never reported the
 * dispatch is given before the deadline is armed anyway: the HTTP providers'
 * default connect timeout (`http-exchange.ts`), after which a connect has
 * surely failed or succeeded.
 */
const PRE_DISPATCH_BOUND_MS = 10_000;

/** Options of {@link Executor}. */
export interface ExecutorOptions {
  readonly store: Store;
  /** Routes by name (hedging policy). */
  readonly routes: Readonly<Record<string, ExecutorRoute>>;
  /** Providers by configured name. */
  readonly providers: ReadonlyMap<string, Provider>;
  /** This executor's identity (lease owner). Default: a new `exe_…` id. */
  readonly id?: string;
  /** Lease length. Default 30 000 ms. */
  readonly leaseMs?: number;
  /** How often leases are renewed. Default a third of `leaseMs`. */
  readonly heartbeatMs?: number;
  /** Slow poll for work when no wake-up arrives. Default 2 000 ms. */
  readonly pollMs?: number;
  /** How often expired leases are rescued to `unknown`. Default 5 000 ms. */
  readonly rescueEveryMs?: number;
  /** Most attempts in flight at once. Default 64. */
  readonly concurrency?: number;
  /** The most of `concurrency` batch lines may take (CONTRACT §17, `batch.maxShare`). Default 0.5. */
  readonly batchMaxShare?: number;
  /** How long to keep listening for a late answer after the deadline. Default 60 000 ms. */
  readonly lateAnswerGraceMs?: number;
  /** First pause before a failed write is tried again (doubling, jittered, at most 2 s). Default 50 ms. */
  readonly writeRetryBaseMs?: number;
  /**
   * How long an answer in hand is held while the database is unreachable,
   * tried again until it is written (its lease's token still fences it after
   * the lease ran out). Past this the answer is given up (the attempt stays
   * in doubt for a person or a lookup). Default 600 000 ms (10 minutes).
   */
  readonly answerHoldMs?: number;
  /** Most answers held at once (each is one attempt's outcome in memory); one more is given up. Default 10 000. */
  readonly maxHeldAnswers?: number;
  /**
   * How long after dispatch `running` is recorded, unless the answer came
   * first (then the attempt goes from `starting` straight to its outcome, one
   * commit fewer). Routes with a hedge mark at once. Default 50 ms.
   */
  readonly runningMarkDelayMs?: number;
  /** The certification gate of a route (failover and hedges); asked on every use. Default: every provider eligible. */
  readonly eligible?: (route: string) => EligibilityCheck;
  /** The contract check of every output. Default {@link acceptText}. */
  readonly checkOutput?: OutputCheck;
  /** A provider's prices, for each attempt's `cost_usd` (CONTRACT §8). Default: none priced. */
  readonly pricing?: (provider: string) => Pricing | null;
  /**
   * A provider's `retry` policy: a definite failure that certainly did not
   * execute (429/503 with `Retry-After`, a refused connection) starts a new
   * attempt on the same provider after the wait it asked for, before the job
   * fails over (`core/job-rules.ts` `decideAfterSettle`). Default: none (fail over at once).
   */
  readonly retry?: (provider: string) => RetryPolicy | null;
  /** Where streaming attempts publish their deltas (CONTRACT §7). Default: the process's {@link defaultStreamHub}. */
  readonly streamHub?: StreamHub;
  /**
   * The reconciler of this executor (CONTRACT §11): its timings, or false for
   * none. Default: one, with {@link ReconcilerOptions}' defaults.
   */
  readonly reconciler?: Partial<Pick<ReconcilerOptions, 'everyMs' | 'firstCheckMs' | 'maxCheckMs' | 'batchSize' | 'askTimeoutMs'>> | false;
  readonly logger?: Logger;
}

/**
 * A lease for a new job's first attempt, with room reserved for it on the
 * executor: hand it to `Store.createJob`, then either {@link Executor.adopt}
 * the claimed attempt or give the lease back with `unused` (a replay, a
 * queued job, a refused create) or `lost` (the create's answer was lost: the
 * attempt may exist, leased here and never sent; the executor releases it).
 */
export interface NewWorkLease extends LeaseRequest {
  readonly eligible: EligibilityCheck;
  readonly attemptId: string;
  readonly leaseToken: string;
  unused(): void;
  lost(ownerId: string): void;
  /**
   * Ends the lease by how the create ended (attempt-machine.ts
   * `planLeaseAfterCreate`): true when the caller is to {@link Executor.adopt}
   * the attempt claimed here; otherwise the room is given back (`unused`), and
   * a create that failed without a definite refusal hands the lease back
   * (`lost`). Call it once, after the create answered or threw.
   *
   * @example
   * try { r = await store.createJob({ …, firstAttempt: lease }); } catch (error) { lease.afterCreate({ error }, owner); throw error; }
   * if (lease.afterCreate({ claimed: r.claimed !== undefined }, owner)) executor.adopt(r.claimed!, leasedAt);
   */
  afterCreate(end: { readonly claimed: boolean } | { readonly error: unknown }, ownerId: string): boolean;
}

/**
 * Typed, namespaced events (graphile-worker style). Tests await them to order
 * events without sleeping; metrics subscribe to them.
 */
export interface ExecutorEvents {
  'attempt:claimed': [ClaimedAttempt];
  'attempt:dispatched': [Attempt];
  'attempt:unknown': [Attempt, RecordedError];
  'attempt:settled': [Attempt, { state: string; won: boolean; error?: RecordedError }];
  'attempt:lease_lost': [Attempt];
  /** A write of the attempt failed transiently and will be tried again after `delayMs`. */
  'attempt:write_retry': [Attempt, { write: 'settle' | 'unknown'; attempt: number; delayMs: number; error: unknown }];
  /**
   * The attempt's job is gone (retention deleted it while the attempt was in doubt): its answer's usage has no
   * row to go to and is reported here instead (CONTRACT §8 "whatever the end"; `/metrics` counts it).
   */
  'attempt:usage_unrecorded': [Attempt, { usage: MeteredUsage['usage']; costMicros: number | null }];
  /** An answer in hand could not be written (the database is unreachable): it is held and tried again, up to `answerHoldMs`. */
  'attempt:answer_held': [Attempt];
  /** The database stayed unreachable until the lease was surely gone (a doubt) or past `answerHoldMs` (an answer): the write was given up. */
  'attempt:write_abandoned': [Attempt, { write: 'settle' | 'unknown'; error: unknown }];
  'attempt:finished': [Attempt, { outcome: ProviderOutcome['kind'] | 'abandoned'; latencyMs: number }];
  'hedge:started': [Attempt];
  /** A streaming attempt's first output: whether it claimed the job's stream. */
  'attempt:stream_claim': [Attempt, { claimed: boolean }];
  'error': [unknown];
}

interface InFlight {
  readonly attempt: Attempt;
  readonly job: Job;
  readonly abort: AbortController;
  readonly log: Logger | undefined;
  /** The attempt's state in the machine (`attempt-machine.ts`): lease, stop, doubt, marks; replaced by each event. */
  m: AttemptState;
  /** The provider's id of the request, once it sent one (CONTRACT §11). */
  providerRequestId: string | null;
  /**
   * `performance.now()` before which the lease surely still holds: the send
   * time of the claim or of the last renewal that kept it, plus `leaseMs`
   * (the database set the expiry from its own clock, no earlier).
   */
  leaseSureUntil: number;
  /** What the send step's actions act on; set before the request is sent (null without a provider). */
  io: AttemptIo | null;
  readonly done: Promise<void>;
}

/** The timers, writes and stream of one attempt's send step: what the machine's actions act on. */
interface AttemptIo {
  readonly provider: Provider;
  readonly fence: { readonly ownerId: string; readonly attemptId: string; readonly leaseOwner: string; readonly leaseToken: string };
  readonly hedgeAfterMs: number | null;
  readonly idleTimeoutMs: number;
  /** One attempt's writes happen in order: every later write waits for `running` to be recorded. */
  runningWrite: Promise<unknown>;
  /** Whether `unknown` was recorded (then, and only then, the lease may be released). */
  markedUnknown: Promise<boolean>;
  /** Why the attempt went into doubt here (the deadline, a stalled stream), once it did. */
  doubt: RecordedError | null;
  streamClaim: Promise<unknown>;
  writer: StreamWriter | null;
  /** A stream's deltas before it was published (a hedged route: before its claim came back). */
  readonly early: ChatDelta[];
  deadline: NodeJS.Timeout | undefined;
  backstop: NodeJS.Timeout | undefined;
  runningTimer: NodeJS.Timeout | undefined;
  hedgeTimer: NodeJS.Timeout | undefined;
  idleTimer: NodeJS.Timeout | undefined;
}

/** The abort messages, by why (attempt-machine.ts `AbortWhy`). */
const ABORT_MESSAGES: Readonly<Record<AbortWhy, string>> = {
  stream_deadline: 'stream deadline passed',
  stream_stalled: 'stream stalled',
  lease_lost: 'lease lost',
  job_cancelled: 'job cancelled',
  job_decided: 'another attempt decided the job',
  stream_owned_elsewhere: 'another attempt owns the job stream',
};
const DISPATCHED: AttemptEvent = { type: 'dispatched' };
const ANSWERED: AttemptEvent = { type: 'answered' };

/** A store's lease status as the machine reads it. */
function leaseReport(s: LeaseStatus): LeaseReport {
  if (s.status === 'finished') return s.state === 'cancelled' ? 'finished_cancelled' : 'finished_other';
  return s.status;
}

/** The guard a refused settle names, or null for any other error. */
function refusalCode(e: unknown): RefusalCode | null {
  for (const code of ['attempt_not_found', 'job_not_found', 'lease_lost', 'attempt_finished'] as const) if (isOnejobError(e, code)) return code;
  return null;
}

/**
 * Runs attempts. Start one or many per process, against one database.
 *
 * @example
 * const executor = new Executor({ store, routes: config.routes, providers });
 * await executor.start();
 * // …
 * await executor.stop();
 */
export class Executor {
  readonly id: string;
  readonly events = new EventEmitter<ExecutorEvents>();
  readonly #o: Required<Omit<ExecutorOptions, 'logger' | 'id' | 'reconciler'>> & { logger: Logger | undefined };
  /** Asks providers about this database's attempts in doubt (null: turned off). */
  readonly reconciler: Reconciler | null;
  readonly #inFlight = new Map<string, InFlight>();
  #running = false;
  #wakePending = false;
  /** Answers held in memory while the database is unreachable (see {@link answersHeld}). */
  #held = 0;
  /** Room reserved by {@link leaseForNewWork} for first attempts being created (by attempt id). */
  readonly #reserved = new Set<string>();
  /** The last claim was limited by room (or found none): work may be waiting for a finished attempt's slot. */
  #starved = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  #timers: NodeJS.Timeout[] = [];
  #offWork: (() => Promise<void>) | null = null;
  #offJob: (() => void) | null = null;
  #offEndedDoubt: (() => void) | null = null;

  constructor(options: ExecutorOptions) {
    this.id = options.id ?? newId('exe');
    const leaseMs = options.leaseMs ?? 30_000;
    this.#o = {
      store: options.store,
      routes: options.routes,
      providers: options.providers,
      leaseMs,
      heartbeatMs: options.heartbeatMs ?? Math.max(50, Math.floor(leaseMs / 3)),
      pollMs: options.pollMs ?? 2_000,
      batchMaxShare: options.batchMaxShare ?? DEFAULT_BATCH_MAX_SHARE,
      rescueEveryMs: options.rescueEveryMs ?? 5_000,
      concurrency: options.concurrency ?? 64,
      lateAnswerGraceMs: options.lateAnswerGraceMs ?? 60_000,
      writeRetryBaseMs: options.writeRetryBaseMs ?? 50,
      answerHoldMs: options.answerHoldMs ?? 600_000,
      maxHeldAnswers: options.maxHeldAnswers ?? 10_000,
      runningMarkDelayMs: options.runningMarkDelayMs ?? 50,
      eligible: options.eligible ?? (() => everyProviderEligible),
      checkOutput: options.checkOutput ?? acceptText,
      pricing: options.pricing ?? (() => null),
      retry: options.retry ?? (() => null),
      streamHub: options.streamHub ?? defaultStreamHub,
      logger: options.logger?.child({ executor: this.id }),
    };
    this.events.on('error', (e) => this.#o.logger?.error({ err: e }, 'executor error'));
    this.reconciler = options.reconciler === false ? null : new Reconciler({
      store: this.#o.store, providers: this.#o.providers, holder: this.id, eligible: this.#o.eligible, checkOutput: this.#o.checkOutput,
      pricing: this.#o.pricing, logger: options.logger, ...options.reconciler,
    });
  }

  /** Attempts this executor is running now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Answers in hand not yet written because the database is unreachable (the `onejob_answers_held` gauge). */
  get answersHeld(): number {
    return this.#held;
  }

  /** Starts claiming work. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#offWork = await this.#o.store.onWork(() => this.wake());
    // Doubt that ended while no executor followed it: its work is stopped upstream (docs/reconciliation.md).
    this.#offEndedDoubt = watchEndedDoubt({ store: this.#o.store, providers: this.#o.providers, logger: this.#o.logger });
    this.#offJob = this.#o.store.onJobChanged((ownerId, jobId, state) => {
      // Decisions made in this process say so at once; others are noticed by the heartbeat.
      if (state !== undefined && isJobTerminal(state)) this.#stopJobFlights(ownerId, jobId, state);
    });
    this.#timers.push(setInterval(() => void this.#heartbeat(), this.#o.heartbeatMs).unref());
    this.#timers.push(setInterval(() => void this.#rescue(), this.#o.rescueEveryMs).unref());
    // The poll keeps the process alive while the executor runs, as a listening server would.
    this.#timers.push(setInterval(() => this.wake(), this.#o.pollMs));
    this.#loop = this.#claimLoop();
    this.reconciler?.start();
    this.#o.logger?.info({ lease_ms: this.#o.leaseMs, concurrency: this.#o.concurrency }, 'executor started');
  }

  /** Asks the executor to look for work now. */
  wake(): void {
    this.#wakePending = true;
    this.#wake?.();
  }

  /**
   * Stops claiming, waits up to `graceMs` for attempts in flight, then aborts
   * the rest (a request already sent becomes `unknown`, never failed).
   */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.wake();
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await this.#offWork?.();
    this.#offJob?.();
    this.#offEndedDoubt?.();
    await this.reconciler?.stop();
    await this.#loop;
    const all = Promise.all([...this.#inFlight.values()].map((f) => f.done));
    const timer = new Promise<void>((r) => setTimeout(r, graceMs).unref());
    await Promise.race([all, timer]);
    for (const f of this.#inFlight.values()) f.abort.abort(new Error('executor stopping'));
    await all;
    this.#o.logger?.info('executor stopped');
  }

  /**
   * The lease a new job's first attempt may take at birth to run here at
   * once (the fast path, `Store.createJob`'s `firstAttempt`): while this
   * executor runs and has room; else null (the job is queued and claimed).
   */
  leaseForNewWork(route: string): NewWorkLease | null {
    // Room is reserved now, before the lease is written: a burst of creates never runs more than `concurrency` at once.
    if (!this.#running || this.#inFlight.size + this.#reserved.size >= this.#o.concurrency) return null;
    const attemptId = newId('att');
    const leaseToken = newId('lease');
    this.#reserved.add(attemptId);
    const lease: NewWorkLease = {
      leaseOwner: this.id, leaseMs: this.#o.leaseMs, eligible: this.#o.eligible(route), attemptId, leaseToken,
      unused: () => {
        if (this.#reserved.delete(attemptId) && this.#starved) this.wake();
      },
      lost: (ownerId) => {
        if (this.#reserved.delete(attemptId) && this.#starved) this.wake();
        void this.#releaseUnsent(ownerId, attemptId, leaseToken);
      },
      afterCreate: (end, ownerId) => {
        // A definite refusal wrote nothing; any other failure may have committed the leased attempt: released, never left to doubt.
        const plan = planLeaseAfterCreate('error' in end
          ? isOnejobError(end.error) && !isTransientDatabaseError(end.error) ? 'refused' : 'unanswered'
          : end.claimed ? 'created_leased' : 'replayed');
        if (plan === 'release') lease.lost(ownerId);
        else if (plan === 'unused') lease.unused();
        return plan === 'adopt';
      },
    };
    return lease;
  }

  /**
   * A create whose answer was lost may have written its first attempt,
   * leased here and surely never sent: hand it back by its lease's token
   * (`Store.handBackUnsent`: claimable again, `starting`) so it runs instead
   * of staying `unknown`. Tried with backoff while the database fails, for
   * up to `answerHoldMs` (after the lease too, from the rescuer's `unknown`
   * as well); a few more looks when the attempt is not there (yet); see
   * `planHandBack`.
   */
  async #releaseUnsent(ownerId: string, attemptId: string, leaseToken: string): Promise<void> {
    const since = performance.now();
    let absent = 0;
    for (let tries = 1; ; tries++) {
      let tried: HandBackFacts['tried'];
      let failure: unknown;
      try {
        tried = await this.#o.store.handBackUnsent({ ownerId, attemptId, leaseOwner: this.id, leaseToken });
      } catch (e) {
        failure = e;
        tried = isTransientDatabaseError(e) ? 'transient' : 'permanent';
      }
      if (tried === 'absent') absent++;
      const plan = planHandBack({ tried, absent, triedForMs: performance.now() - since, holdMs: this.#o.answerHoldMs });
      if (plan.then === 'done') {
        this.#o.logger?.info({ attempt_id: attemptId, tries }, 'the never-sent first attempt of a create that went unanswered was handed back: it will be claimed and run');
        await this.#o.store.notifyWork().catch(() => undefined);
        this.wake();
        return;
      }
      if (plan.then === 'throw') return void this.events.emit('error', failure);
      if (plan.then === 'give_up') {
        if (tried !== 'absent') this.#o.logger?.warn({ attempt_id: attemptId, tries, tried }, 'the never-sent first attempt of a create that went unanswered could not be handed back');
        return;
      }
      // Unref'd: a process shutting down while the database is away is not held open for the horizon.
      await new Promise((r) => setTimeout(r, Math.min(2_000, this.#o.writeRetryBaseMs * 2 ** Math.min(tries, 10))).unref());
    }
  }

  /**
   * Runs an attempt leased to this executor elsewhere (a job created with
   * {@link leaseForNewWork}'s lease); `leasedAt` is the `performance.now()`
   * at which the statement that leased it was sent.
   */
  adopt(claimed: ClaimedAttempt, leasedAt: number): void {
    const { attempt } = claimed;
    this.#reserved.delete(attempt.id);
    if (attempt.leaseOwner !== this.id) throw new Error(`attempt ${attempt.id} is leased to ${attempt.leaseOwner}, not to executor ${this.id}`);
    if (!this.#running) {
      // Stopped meanwhile: hand it back unsent (still `starting`) for another executor to claim.
      void this.#o.store
        .releaseLease({ ownerId: attempt.ownerId, attemptId: attempt.id, leaseOwner: this.id, leaseToken: attempt.leaseToken! })
        .then(() => this.#o.store.notifyWork())
        .catch((e) => this.events.emit('error', e));
      return;
    }
    this.#run(claimed, leasedAt);
  }

  /** Runs one rescue pass now (also done on a timer). */
  async rescueNow(): Promise<number> {
    return this.#o.store.rescueExpiredLeases();
  }

  // ---- claim ---------------------------------------------------------------

  async #claimLoop(): Promise<void> {
    while (this.#running) {
      this.#wakePending = false;
      const room = this.#o.concurrency - this.#inFlight.size - this.#reserved.size;
      let claimed: ClaimedAttempt[] = [];
      let batchFull = false;
      const sentAt = performance.now();
      if (room > 0) {
        try {
          const batchLimit = batchRoom(this.#o.concurrency, this.#o.batchMaxShare, [...this.#inFlight.values()].filter((f) => isBatchLine(f.job)).length);
          claimed = await this.#o.store.claimWork({ leaseOwner: this.id, leaseMs: this.#o.leaseMs, limit: Math.min(room, 32), eligible: this.#o.eligible, batchLimit });
          // The batch share was the limit: look again when an attempt finishes, as when room was.
          batchFull = batchLimit > 0 && claimed.filter((c) => isBatchLine(c.job)).length >= batchLimit;
        } catch (e) {
          this.events.emit('error', e);
        }
      }
      for (const c of claimed) this.#run(c, sentAt);
      // Work may be waiting that did not fit: claim again as soon as an attempt finishes.
      this.#starved = room <= 0 || claimed.length >= Math.min(room, 32) || batchFull;
      if (claimed.length > 0 && claimed.length >= Math.min(room, 32)) continue;
      if (this.#wakePending) continue;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = null;
    }
  }

  // ---- run one attempt -----------------------------------------------------
  // The steps (attempt-machine.ts, docs/executor.md "The attempt machine"):
  // lease → send → first output → answer → record → report.

  /** Runs a claimed attempt; `leasedAt` is the `performance.now()` at which its claim was sent. */
  #run(c: ClaimedAttempt, leasedAt: number): void {
    const abort = new AbortController();
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const { attempt, job } = c;
    const f: InFlight = {
      attempt, job, abort, providerRequestId: attempt.providerRequestId, leaseSureUntil: leasedAt + this.#o.leaseMs, done, io: null,
      log: this.#o.logger?.child({ job_id: job.id, attempt_id: attempt.id, owner: job.ownerId, provider: attempt.provider, attempt: attempt.number }),
      m: startAttempt({ streaming: isStreamingInput(job.input), hedged: hedgeAfterMsOf(job, this.#o.routes[job.route]?.hedgeAfterMs) !== null, runningMarkDelayMs: this.#o.runningMarkDelayMs }),
    };
    this.#inFlight.set(attempt.id, f);
    this.events.emit('attempt:claimed', c);
    void withAttemptSpan(c, this.id, () => this.#runAttempt(f))
      .catch((e) => this.events.emit('error', e))
      .finally(() => {
        this.#inFlight.delete(attempt.id);
        resolveDone();
        // Room was the limit of the last claim: look again now. Otherwise new work wakes the loop itself.
        if (this.#starved) this.wake();
      });
  }

  /** Feeds an event to the attempt's machine and carries out its actions; the promise of an action the caller must wait for (the lease status after a `running` mark that did not apply), if any. */
  #on(f: InFlight, e: AttemptEvent): Promise<void> | undefined {
    const t = stepAttempt(f.m, e);
    f.m = t.state;
    let wait: Promise<void> | undefined;
    for (const a of t.actions) wait = this.#act(f, a) ?? wait;
    return wait;
  }

  /** Carries out one action of the machine. */
  #act(f: InFlight, a: AttemptAction): Promise<void> | undefined {
    const { attempt, job, log } = f;
    const io = f.io!;
    switch (a.do) {
      case 'abort':
        if (a.why === 'stream_owned_elsewhere') log?.info('another attempt owns the job stream: stopping');
        return void f.abort.abort(new Error(ABORT_MESSAGES[a.why]));
      case 'lose_lease':
        log?.warn('lease lost: abandoning the attempt without further writes');
        return void this.events.emit('attempt:lease_lost', attempt);
      case 'ask_lease_status':
        return this.#o.store.leaseStatus(io.fence).then((status) => {
          log?.info({ write: 'running', lease: status.status, state: 'state' in status ? status.state : null }, 'fenced write not applied');
          return this.#on(f, { type: 'lease_status', after: 'write', status: leaseReport(status) });
        });
      case 'arm_deadline':
        return void (io.deadline = setTimeout(() => this.#on(f, { type: 'deadline' }), io.provider.timeoutMs));
      case 'schedule_mark':
        return void (io.runningTimer = setTimeout(() => this.#on(f, { type: 'mark_due' }), this.#o.runningMarkDelayMs));
      case 'cancel_mark':
        return void clearTimeout(io.runningTimer);
      case 'write_running':
        io.runningWrite = io.runningWrite
          // A stream whose first output already came has no deadline any more (its idle bound applies).
          .then(() => this.#o.store.markRunning({ ...io.fence, timeoutMs: a.withDeadline ? io.provider.timeoutMs : null }))
          .then((applied) => this.#on(f, { type: 'marked', applied }))
          .catch((e) => this.events.emit('error', e));
        return;
      case 'report_dispatched':
        return void this.events.emit('attempt:dispatched', attempt);
      case 'schedule_hedge': {
        const hedgeAfterMs = io.hedgeAfterMs!;
        return void (io.hedgeTimer = setTimeout(() => void this.#hedge(f, hedgeAfterMs, log), hedgeAfterMs));
      }
      case 'clear_hedge':
        return void clearTimeout(io.hedgeTimer);
      case 'clear_deadline':
        return void clearTimeout(io.deadline);
      case 'schedule_idle':
        return void (io.idleTimer = setTimeout(() => this.#on(f, { type: 'stall' }), io.idleTimeoutMs));
      case 'write_unknown': {
        const p = attempt.provider;
        const reason: RecordedError = (io.doubt = a.reason === 'stream_stalled'
          ? { code: 'stream_stalled', message: `no event from ${p} for ${io.idleTimeoutMs} ms after its first output`, details: { idle_timeout_ms: io.idleTimeoutMs } }
          : { code: 'deadline_exceeded', message: `no ${f.m.streaming ? 'output' : 'answer'} from ${p} within ${io.provider.timeoutMs} ms`, details: { timeout_ms: io.provider.timeoutMs } });
        io.markedUnknown = io.runningWrite.then(() => this.#markUnknown(f, reason, log));
        io.runningWrite = io.markedUnknown;
        return;
      }
      case 'schedule_grace': {
        const grace = setTimeout(() => f.abort.abort(new Error('late-answer grace period over')), this.#o.lateAnswerGraceMs);
        return void f.abort.signal.addEventListener('abort', () => clearTimeout(grace), { once: true });
      }
      case 'claim_stream':
        io.streamClaim = io.runningWrite
          .then(() => this.#o.store.claimStream({ ownerId: attempt.ownerId, jobId: job.id, attemptId: attempt.id, leaseOwner: this.id, leaseToken: attempt.leaseToken! }))
          .then((claimed) => {
            this.events.emit('attempt:stream_claim', attempt, { claimed });
            this.#on(f, { type: 'stream_claim', claimed });
          })
          // A claim that could not be written leaves the stream unclaimed: the attempt goes on, its result is stored as usual.
          .catch((e) => this.events.emit('error', e));
        if (a.thenMark) io.runningWrite = io.streamClaim;
        return;
      case 'publish_stream': {
        // Published from memory before the claim is in (a route without hedging); stored once it is.
        // A stream of the job already live here (an attempt started after an operator resolved this one)
        // is not replaced by one that has no claim: this attempt waits for its claim then, as a hedge does.
        if (!this.#o.streamHub.isLive(job.id)) this.#openHubStream(f, false);
        return;
      }
      case 'open_stream': {
        log?.debug('job stream claimed');
        if (io.writer !== null) io.writer.keep(this.#o.store);
        else this.#openHubStream(f, true);
        // Every other attempt of the job here stops: it can never win now.
        for (const other of this.#inFlight.values()) if (other !== f && other.job.id === job.id && other.job.ownerId === job.ownerId) this.#stopFlight(other, 'succeeded');
        return;
      }
      case 'drop_stream':
        io.writer?.end({ ok: false, error: { code: 'stream_not_claimed', message: `attempt ${attempt.number} (${attempt.provider}) could not claim the job stream: the job was decided or its lease is another's` } });
        io.writer = null;
        return;
    }
  }

  /** Opens the attempt's hub stream (stored from its first event when `stored`) and flushes the deltas that came before. */
  #openHubStream(f: InFlight, stored: boolean): void {
    const { attempt, job } = f;
    const io = f.io!;
    const writer = (io.writer = this.#o.streamHub.open(job.id, attempt.id, { ownerId: job.ownerId, attemptNumber: attempt.number, ...(stored ? { log: this.#o.store } : {}) }));
    for (const e of io.early.splice(0)) writer.push(e);
  }

  async #runAttempt(f: InFlight): Promise<void> {
    const { attempt, job, log } = f;
    const provider = this.#o.providers.get(attempt.provider);
    const startedMs = Date.now();
    if (!provider) {
      // Not configured here: nothing was sent, so this is a definite failure.
      await this.#settle(f, { state: 'failed', error: { code: 'provider_unknown', message: `provider ${attempt.provider} is not configured on executor ${this.id}` } }, log);
      return;
    }

    // Step: send. `running` is recorded when the request reaches the connection (after `runningMarkDelayMs`, unless
    // the answer came first: a fast attempt goes starting → succeeded in one commit; a hedged route marks at once).
    // The deadline (to the answer; for a stream, to its first output) is armed at the dispatch: before that nothing
    // was sent, and a connect that fails is a definite failure (`provider_unreachable`), never a doubt.
    const io: AttemptIo = (f.io = {
      provider, fence: { ownerId: attempt.ownerId, attemptId: attempt.id, leaseOwner: this.id, leaseToken: attempt.leaseToken! },
      hedgeAfterMs: hedgeAfterMsOf(job, this.#o.routes[job.route]?.hedgeAfterMs), idleTimeoutMs: provider.idleTimeoutMs ?? DEFAULT_PROVIDER_IDLE_TIMEOUT_MS,
      runningWrite: Promise.resolve(), markedUnknown: Promise.resolve(false), doubt: null, streamClaim: Promise.resolve(), writer: null, early: [],
      deadline: undefined, backstop: undefined, runningTimer: undefined, hedgeTimer: undefined, idleTimer: undefined,
    });
    // A provider that never reports its dispatch still has a deadline: once a connect would surely have ended.
    io.backstop = setTimeout(() => this.#on(f, { type: 'dispatch_backstop' }), provider.timeoutMs + PRE_DISPATCH_BOUND_MS);
    // Step: first output (a stream). After it the deadline is gone: only a silence longer than `idleTimeoutMs`
    // between events ends it (unknown, `stream_stalled`); a stream that keeps sending is never cut.
    const onDelta = (d: ChatDelta): void => {
      io.idleTimer?.refresh();
      if (io.writer !== null) return io.writer.push(d);
      if (f.m.stopped !== null || f.m.lease === 'lost') return;
      io.early.push(d);
      if (f.m.firstOutput || !isOutputDelta(d)) return;
      this.#on(f, { type: 'first_output' });
    };
    // The provider's id of the request is recorded as soon as it arrives (CONTRACT §11): a lookup needs it.
    const onProviderRequestId = (id: string) => {
      if (f.providerRequestId === id) return;
      f.providerRequestId = id;
      log?.info({ provider_request_id: id }, 'provider request id');
      if (f.m.answered || f.m.lease === 'lost') return;
      io.runningWrite = io.runningWrite
        .then(() => this.#o.store.recordProviderRequestId({ ...io.fence, providerRequestId: id }))
        .catch((e) => this.events.emit('error', e));
    };
    const request: ProviderRequest = {
      input: job.input as never,
      jobId: job.id,
      attemptId: attempt.id,
      attemptNumber: attempt.number,
      signal: f.abort.signal,
      onDispatched: () => void this.#on(f, DISPATCHED),
      onProviderRequestId,
      onEvent: () => io.idleTimer?.refresh(),
    };
    const outcome = f.m.streaming ? await provider.stream(request, onDelta) : await provider.call(request);
    // Step: answer.
    this.#on(f, ANSWERED);
    f.providerRequestId ??= providerRequestIdOf(outcome);
    await io.streamClaim;
    const stream = io.writer as StreamWriter | null;
    try {
      clearTimeout(io.runningTimer);
      clearTimeout(io.deadline);
      clearTimeout(io.backstop);
      clearTimeout(io.idleTimer);
      clearTimeout(io.hedgeTimer);
      await io.runningWrite;
      const latencyMs = Date.now() - startedMs;
      log?.debug({ outcome: outcome.kind, latency_ms: latencyMs, dispatched: f.m.dispatched }, 'provider answered');
      // The provider's whole error text goes to the log; the attempt and the job keep it redacted (src/core/redact-credentials.ts).
      if (outcome.kind !== 'success') log?.warn(providerErrorLogFields(outcome.error), 'provider error');

      // Step: record. The machine says what (planRecord); here it is written.
      const checked = outcome.kind === 'success' && outcome.result === undefined ? this.#o.checkOutput(job.route, job.input, outcome.completion) : null;
      const plan = planRecord(f.m, { kind: outcome.kind, code: outcome.kind === 'success' ? undefined : outcome.error.code, givenResult: outcome.kind === 'success' && outcome.result !== undefined, contractOk: checked === null ? null : checked.ok, executorRunning: this.#running });
      await this.#record(f, plan, outcome, checked, stream);
      // Step: report.
      this.events.emit('attempt:finished', attempt, { outcome: plan.finished === 'abandoned' ? 'abandoned' : outcome.kind, latencyMs });
    } finally {
      // Whatever happened, a stream opened here ends (a watcher never waits for an attempt that is gone).
      stream?.end({ ok: false, error: { code: 'stream_interrupted', message: `the stream of attempt ${attempt.number} (${attempt.provider}) ended without a recorded outcome` } });
    }
  }

  /** The record step: writes what {@link planRecord} decided, and ends the attempt's stream with what was recorded. */
  async #record(f: InFlight, plan: RecordPlan, outcome: ProviderOutcome, checked: ReturnType<OutputCheck> | null, stream: StreamWriter | null): Promise<void> {
    const { attempt, log } = f;
    const io = f.io!;
    const usageOf = (source: UsageSource): Partial<MeteredUsage> =>
      source === 'metered' && outcome.kind === 'success' ? meterUsage(outcome.completion.usage, this.#o.pricing(attempt.provider))
        : source === 'partial' ? this.#partialUsage(attempt.provider, outcome) : {};
    switch (plan.record) {
      case 'usage_only':
        // Another lease holds the attempt: its payload is not ours to record, what it cost still is (CONTRACT §8).
        return this.#keepUsage(f, { state: 'failed', error: { code: 'lease_lost', message: 'lease lost' }, ...usageOf(plan.usage) });
      case 'hand_back':
        // We stopped it ourselves (shutdown) before anything was sent: not a provider failure.
        // Hand the attempt back unclaimed, still `starting`, for another executor to send.
        await this.#o.store.releaseLease(io.fence).catch((e) => this.events.emit('error', e));
        return void log?.info('attempt handed back unsent');
      case 'unknown': {
        const error = outcome.kind === 'success' ? null : outcome.error;
        const said = plan.streamError === 'doubt' && io.doubt !== null ? io.doubt : error!;
        stream?.end({ ok: false, error: { code: said.code, message: said.message } });
        // Ambiguous: the provider may have executed it. Unknown, never failed; nothing more to wait for.
        const unknown = plan.reuseDoubt ? await io.markedUnknown : await this.#markUnknown(f, toRecorded(error!), log);
        // Only an attempt recorded unknown gives up its lease: a running one keeps it until the rescuer takes over.
        if (unknown) await this.#o.store.releaseLease(io.fence).catch((e) => this.events.emit('error', e));
        // A stream cut short still leaves what the provider said it cost so far (CONTRACT §8).
        const partial = this.#partialUsage(attempt.provider, outcome);
        if (unknown && partial.usage) {
          await this.#o.store
            .recordLateUsage({ ownerId: attempt.ownerId, attemptId: attempt.id, usage: partial.usage, costMicros: partial.costMicros ?? null, actor: `executor:${this.id}` })
            .catch((e) => this.events.emit('error', e));
        }
        return;
      }
      case 'settle':
        break;
    }
    if (plan.stopUpstream) this.#stopUpstream(io.provider, f, log);
    let settleOutcome: AttemptOutcome;
    let error: RecordedError | null = null;
    let result: unknown = null;
    if (plan.state === 'cancelled') {
      settleOutcome = { state: 'cancelled', error: (error = { code: 'cancelled', message: 'the job was cancelled' }) };
    } else if (plan.state === 'superseded') {
      // Stopped because another attempt won: whatever the provider did, this one can no longer win.
      // What the stopped loser had cost by then, when the provider said (a stream's partial usage): CONTRACT §8.
      error = { code: 'superseded', message: `another attempt decided the job; the request to ${attempt.provider} was stopped`, details: { stopped_by: 'executor', provider_outcome: outcome.kind === 'success' ? null : outcome.error.code } };
      settleOutcome = { state: 'superseded', error, ...usageOf(plan.usage) };
    } else if (plan.result === 'given' && outcome.kind === 'success') {
      // A provider whose answer is not a completion (an MCP tool's result): the job's result exactly as given, no usage.
      settleOutcome = { state: 'succeeded', result: outcome.result, usage: null, costMicros: null };
    } else if (plan.result === 'completion' && outcome.kind === 'success' && checked?.ok === true) {
      // Usage is recorded whatever the end: won, superseded, or a contract violation (CONTRACT §8).
      settleOutcome = { state: 'succeeded', result: (result = { ...outcome.completion, content: checked.value }), ...usageOf(plan.usage) };
    } else if (plan.error === 'contract_violation' && checked?.ok === false) {
      error = { code: 'contract_violation', message: `the output of ${attempt.provider} broke the route contract`, details: { findings: checked.findings } };
      settleOutcome = { state: 'failed', error, ...usageOf(plan.usage) };
    } else if (outcome.kind !== 'success') {
      settleOutcome = { state: 'failed', error: markPassThrough(toRecorded(outcome.error), this.#o.routes[f.job.route]?.passThrough), ...usageOf(plan.usage) };
      error = { code: outcome.error.code, message: outcome.error.message };
    } else {
      throw new Error(`attempt machine: no outcome for ${plan.state}`);
    }
    const r = await this.#settle(f, settleOutcome, log, plan.retryHere && outcome.kind !== 'success' ? this.#retryRequest(attempt.provider, outcome.error) : undefined);
    if (stream === null) return;
    // Step: report, for a stream: it ends with what was recorded.
    const end = streamEndFor(plan, r);
    if (end === 'result') stream.end({ ok: true, result: plan.result === 'completion' ? r!.job.result ?? result : r!.job.result });
    else if (end === 'superseded') stream.end({ ok: false, error: { code: 'superseded', message: `attempt ${attempt.number} (${attempt.provider}) finished after the job was decided` } });
    else if (error !== null) stream.end({ ok: false, error });
  }

  /**
   * Records the attempt's outcome, trying again while the database fails
   * transiently and the lease may still be held (see {@link #retrying}).
   */
  async #settle(f: InFlight, outcome: AttemptOutcome, log: Logger | undefined, retry?: RetryRequest): Promise<SettleAttemptResult | null> {
    const { attempt } = f;
    let tries = 0;
    try {
      const r = await this.#retrying(f, 'settle', log, () => {
        tries++;
        return this.#o.store.settleAttempt({
          ownerId: attempt.ownerId, attemptId: attempt.id, jobId: attempt.jobId, outcome,
          fence: { leaseOwner: this.id, leaseToken: attempt.leaseToken! },
          ...(f.providerRequestId === null ? {} : { providerRequestId: f.providerRequestId }),
          eligible: this.#o.eligible(f.job.route),
          ...(retry === undefined ? {} : { retry }),
        });
      });
      if (r === null) return null;
      this.#wakeWhenDue(r);
      if (outcome.state === 'succeeded' && !r.won) {
        log?.warn({ winner: r.job.completedBy, job_state: r.job.state }, 'race lost: attempt superseded, its result discarded');
      } else {
        log?.info({ state: r.attempt.state, failover: r.failover?.provider ?? null, tries, provider_request_id: f.providerRequestId, resolved_by: r.attempt.resolvedBy }, 'attempt settled');
      }
      this.events.emit('attempt:settled', r.attempt, { state: r.attempt.state, won: r.won, error: r.attempt.error ?? undefined });
      return r;
    } catch (e) {
      // Refused: the store says which guard failed, the machine what that means for the answer.
      const code = refusalCode(e);
      if (code === null) throw e;
      const plan = planRefusal(code, tries);
      if (plan.then === 'report_unrecorded') {
        log?.warn({ usage: 'usage' in outcome ? outcome.usage ?? null : null }, 'the attempt is gone (its job was deleted): its answer has nowhere to go');
        this.#reportUnrecorded(f, outcome);
        return null;
      }
      if (plan.then === 'keep_usage_lose_lease') {
        await this.#keepUsage(f, outcome);
        return (this.#on(f, { type: 'lease_status', after: 'write', status: 'lost' }), null);
      }
      if (plan.then === 'read_back') {
        // After a retry: our own earlier try may have committed although its answer was lost with the
        // connection. Read what is there and tell the truth.
        const ours = await this.#ownEarlierSettle(f, outcome).catch(() => null);
        if (ours) {
          log?.info({ state: ours.attempt.state, won: ours.won, tries }, 'attempt settled by an earlier try whose answer was lost');
          this.events.emit('attempt:settled', ours.attempt, { state: ours.attempt.state, won: ours.won, error: ours.attempt.error ?? undefined });
          return ours;
        }
      }
      // Resolved from outside (an explicit resolve) while we waited.
      log?.warn({ err: (e as Error).message, tries }, 'attempt already settled elsewhere; answer dropped');
      await this.#keepUsage(f, outcome);
      return null;
    }
  }

  /**
   * After a retried settle found the attempt finished: the result of our own
   * earlier try, when that is what committed (attempt-machine.ts
   * `isOwnEarlierSettle`), else null.
   */
  async #ownEarlierSettle(f: InFlight, outcome: AttemptOutcome): Promise<SettleAttemptResult | null> {
    const job = await this.#o.store.getJob(f.attempt.ownerId, f.attempt.jobId);
    const attempt = job?.attempts.find((a) => a.id === f.attempt.id);
    if (!job || !attempt) return null;
    const won = job.completedBy === attempt.id;
    const wrote = { state: outcome.state, totalTokens: 'usage' in outcome && outcome.usage ? outcome.usage.totalTokens : null };
    const found = { state: attempt.state, won, totalTokens: attempt.usage?.totalTokens ?? null, errorCode: attempt.error?.code ?? null };
    return isOwnEarlierSettle(wrote, found) ? { attempt, job, won: outcome.state === 'succeeded' && won, failover: null } : null;
  }

  /** A definite failure as a retry request, when it may be retried where it happened and its provider has a `retry` policy. */
  #retryRequest(provider: string, error: ProviderError): RetryRequest | undefined {
    const policy = this.#o.retry(provider);
    const hint = policy === null ? null : retryHereAfter(error);
    return policy === null || hint === null ? undefined : { provider, retryAfterMs: hint.retryAfterMs, policy };
  }

  /** A retry that becomes claimable later (its `startedAt` ahead): look for work again when it is due. */
  #wakeWhenDue(r: SettleAttemptResult): void {
    const next = r.failover;
    const settledAt = r.attempt.finishedAt;
    if (next === null || settledAt === null) return;
    // Both times are the database's: the difference is the wait, whatever this host's clock says.
    const waitMs = next.startedAt.getTime() - settledAt.getTime();
    if (waitMs > 0) setTimeout(() => this.wake(), waitMs + 5).unref();
  }

  /** The usage a provider reported before the attempt ended without a whole answer (a stream cut or stopped), metered; or nothing. */
  #partialUsage(provider: string, outcome: ProviderOutcome): Partial<MeteredUsage> {
    const u = outcome.kind === 'success' ? undefined : outcome.partial?.usage;
    // A partial result reads zeros where no usage event came: that is "none reported", not a cost of 0.
    if (!u || (u.prompt_tokens === 0 && u.completion_tokens === 0)) return {};
    const metered = meterUsage(u, this.#o.pricing(provider));
    return metered.usage ? metered : {};
  }

  /** An answer that cannot settle its attempt any more still leaves what it cost (CONTRACT §8); never its payload. */
  async #keepUsage(f: InFlight, outcome: AttemptOutcome): Promise<void> {
    if (outcome.state === 'cancelled' || !outcome.usage) return;
    const recorded = await this.#o.store
      .recordLateUsage({ ownerId: f.attempt.ownerId, attemptId: f.attempt.id, usage: outcome.usage, costMicros: outcome.costMicros ?? null, actor: `executor:${this.id}` })
      .catch((err) => (this.events.emit('error', err), true));
    // No row took it: the attempt is gone with its job, or already carries usage. Only the former is news.
    if (!recorded && (await this.#o.store.getAttempt(f.attempt.ownerId, f.attempt.id).catch(() => f.attempt)) === null) this.#reportUnrecorded(f, outcome);
  }

  /** Usage of an answer whose attempt no longer exists: an event (and `/metrics`), since no row can hold it. */
  #reportUnrecorded(f: InFlight, outcome: AttemptOutcome): void {
    if (outcome.state === 'cancelled' || !outcome.usage) return;
    this.events.emit('attempt:usage_unrecorded', f.attempt, { usage: outcome.usage, costMicros: outcome.costMicros ?? null });
  }

  async #markUnknown(f: InFlight, reason: RecordedError, log: Logger | undefined): Promise<boolean> {
    if (f.m.lease === 'lost') return false;
    const ok = await this.#retrying(f, 'unknown', log, () =>
      this.#o.store.markUnknown({
        ownerId: f.attempt.ownerId, attemptId: f.attempt.id, leaseOwner: this.id, leaseToken: f.attempt.leaseToken!, reason,
        ...(f.providerRequestId === null ? {} : { providerRequestId: f.providerRequestId }),
      }),
    ).catch((e) => (this.events.emit('error', e), null));
    if (ok) {
      log?.warn({ reason: reason.code }, 'attempt in doubt: unknown');
      this.events.emit('attempt:unknown', f.attempt, reason);
    }
    return ok === true;
  }

  /**
   * Runs a write of `f`, again after a jittered, doubling pause (from
   * `writeRetryBaseMs` to 2 s) while it fails transiently, for as long as
   * {@link planWriteFailure} says: an answer is held for up to
   * `answerHoldMs` (its token fences it after the lease ran out); a doubt is
   * tried while the lease may still be held (the heartbeat keeps renewing
   * meanwhile, and each renewal moves `leaseSureUntil`), then the rescuer
   * moves the attempt to `unknown`. Gives up with null; a permanent error is
   * thrown at once.
   */
  async #retrying<T>(f: InFlight, write: 'settle' | 'unknown', log: Logger | undefined, op: () => Promise<T>): Promise<T | null> {
    let heldSince: number | null = null;
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await op();
        } catch (e) {
          const now = performance.now();
          const plan = planWriteFailure({
            write, transient: isTransientDatabaseError(e), holding: heldSince !== null, held: this.#held, maxHeld: this.#o.maxHeldAnswers,
            heldForMs: heldSince === null ? 0 : now - heldSince, holdMs: this.#o.answerHoldMs,
            leaseLeftMs: f.leaseSureUntil + this.#o.leaseMs - now, leaseLost: f.m.lease === 'lost',
          });
          if (plan.then === 'throw') throw e;
          if (plan.then === 'give_up') {
            if (plan.why === 'too_many_held') log?.error({ err: e, held: this.#held }, 'too many answers held already; this one is given up (the attempt stays in doubt)');
            else if (plan.why === 'hold_over') log?.error({ err: e, write, tries: attempt }, 'the database stayed unavailable past the answer hold; the answer is given up');
            else log?.error({ err: e, write, tries: attempt }, 'the database stayed unavailable until the lease was surely gone; the rescuer will take the attempt over');
            this.events.emit('attempt:write_abandoned', f.attempt, { write, error: e });
            return null;
          }
          if (plan.hold) {
            heldSince = now;
            this.#held++;
            log?.warn({ err: e, hold_ms: this.#o.answerHoldMs }, 'answer held: the database is unreachable, it is written when the database returns');
            this.events.emit('attempt:answer_held', f.attempt);
          }
          const ceiling = Math.min(2_000, this.#o.writeRetryBaseMs * 2 ** Math.min(attempt - 1, 10));
          const delayMs = Math.min(plan.leftMs, ceiling / 2 + Math.random() * (ceiling / 2));
          if (attempt === 1 || attempt % 10 === 0) log?.warn({ err: e, write, tries: attempt, retry_in_ms: Math.round(delayMs) }, 'write failed transiently; trying again');
          this.events.emit('attempt:write_retry', f.attempt, { write, attempt, delayMs, error: e });
          await new Promise((r) => setTimeout(r, delayMs));
        }
      }
    } finally {
      if (heldSince !== null) this.#held--;
    }
  }

  /**
   * Asks the provider to stop work it may still do for a loser or a
   * cancelled job's attempt (CONTRACT §11: `POST /responses/{id}/cancel`, a
   * task's cancel), where its protocol can. Best effort, in the background.
   */
  #stopUpstream(provider: Provider, f: InFlight, log: Logger | undefined): void {
    if (!provider.stopUpstream || f.providerRequestId === null) return;
    const providerRequestId = f.providerRequestId;
    void provider
      .stopUpstream({ attemptId: f.attempt.id, providerRequestId, signal: AbortSignal.timeout(10_000) })
      .then(() => log?.info({ provider_request_id: providerRequestId }, 'asked the provider to stop the request'))
      .catch((e) => this.events.emit('error', e));
  }

  async #hedge(f: InFlight, hedgeAfterMs: number, log: Logger | undefined): Promise<void> {
    if (!this.#running || f.m.lease === 'lost') return;
    const sentAt = performance.now();
    try {
      const hedge = await this.#o.store.startAttempt({
        ownerId: f.job.ownerId, jobId: f.job.id, kind: 'hedge', hedgeAfterMs,
        eligible: this.#o.eligible(f.job.route), lease: { leaseOwner: this.id, leaseMs: this.#o.leaseMs },
      });
      log?.info({ hedge: hedge.id, hedge_provider: hedge.provider }, 'hedge started');
      this.events.emit('hedge:started', hedge);
      this.#run({ attempt: hedge, job: f.job }, sentAt);
    } catch (e) {
      if (isOnejobError(e)) log?.debug({ code: e.code }, 'no hedge');
      else this.events.emit('error', e);
    }
  }

  // ---- background ----------------------------------------------------------

  async #heartbeat(): Promise<void> {
    const flights = [...this.#inFlight.values()].filter((f) => f.m.lease === 'held');
    if (flights.length === 0) return;
    try {
      const sentAt = performance.now();
      const held = new Set(await this.#o.store.extendLeases({ leaseOwner: this.id, leaseTokens: flights.map((f) => f.attempt.leaseToken!), leaseMs: this.#o.leaseMs }));
      for (const f of flights) {
        if (held.has(f.attempt.leaseToken!)) {
          f.leaseSureUntil = sentAt + this.#o.leaseMs;
        } else if (this.#inFlight.has(f.attempt.id)) {
          // Not renewed: ask why. A lease that merely ran out (the database was away) keeps listening for the answer.
          const status = await this.#o.store.leaseStatus({ ownerId: f.attempt.ownerId, attemptId: f.attempt.id, leaseOwner: this.id, leaseToken: f.attempt.leaseToken! });
          if (status.status === 'expired') f.log?.warn({ state: status.state }, 'lease ran out (the database was unreachable); the answer will still be recorded by its token');
          this.#on(f, { type: 'lease_status', after: 'renewal', status: leaseReport(status) });
        }
      }
      // A job decided through another process (won, cancelled): stop its requests here too.
      const watched = flights.filter((f) => f.m.lease !== 'lost' && f.m.stopped === null);
      const states = await this.#o.store.getJobStates(watched.map((f) => ({ ownerId: f.job.ownerId, jobId: f.job.id })));
      for (const f of watched) {
        const state = states.get(f.job.id);
        if (state !== undefined && isJobTerminal(state)) this.#stopFlight(f, state);
      }
    } catch (e) {
      this.events.emit('error', e);
    }
  }

  async #rescue(): Promise<void> {
    try {
      const n = await this.#o.store.rescueExpiredLeases();
      if (n > 0) this.#o.logger?.warn({ rescued: n }, 'expired leases: attempts moved to unknown');
    } catch (e) {
      this.events.emit('error', e);
    }
  }

  #stopJobFlights(ownerId: string, jobId: string, state: JobState): void {
    for (const f of this.#inFlight.values()) if (f.job.id === jobId && f.job.ownerId === ownerId) this.#stopFlight(f, state);
  }

  /**
   * The job was decided while `f` is in flight: abort its request. A
   * cancelled job's attempt is recorded `cancelled`, any other's
   * `superseded` (a result that still arrives goes through the
   * compare-and-swap and is superseded too). The attempt that decided the
   * job has already been settled; stopping it changes nothing.
   */
  #stopFlight(f: InFlight, state: JobState): void {
    this.#on(f, { type: 'job_decided', cancelled: state === 'cancelled' });
  }
}

/** Whether a job's input asks for a streamed answer (`stream: true`, CONTRACT §7). */
export function isStreamingInput(input: unknown): boolean {
  return typeof input === 'object' && input !== null && (input as { stream?: unknown }).stream === true;
}

/** The provider's id of the request an outcome carries (a success's, or an error's `provider_request_id`), or null. */
function providerRequestIdOf(outcome: ProviderOutcome): string | null {
  if (outcome.kind === 'success') return outcome.providerRequestId ?? null;
  return outcome.error.details.provider_request_id ?? null;
}

function toRecorded(e: { code: string; message: string; details?: unknown }): RecordedError {
  return { code: e.code, message: e.message, details: e.details };
}
