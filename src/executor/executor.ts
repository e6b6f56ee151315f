/**
 * The executor: claims attempts from the database and runs them against providers.
 *
 * One attempt is a pipeline of small named steps (Oban-style):
 * claim → dispatch (→ `running`) → classify → record → report.
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
 *   publishes its deltas to the {@link StreamHub}; an attempt that loses the
 *   claim is stopped and ends `superseded`, and the owner stops its siblings
 *   here. A hedge counts to the first output. The stream ends after the
 *   outcome is recorded: with the stored result when the attempt won, else
 *   with an error (`failed`, `unknown`). A streaming attempt past its deadline
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
import { meterUsage, type MeteredUsage, type Pricing } from '../core/usage.ts';
import type { ClaimedAttempt, LeaseRequest, SettleAttemptResult, Store } from '../store/store.ts';
import { defaultStreamHub, type StreamHub, type StreamWriter } from './stream-hub.ts';
import { isTransientDatabaseError } from '../store/transient-errors.ts';
import { withAttemptSpan } from '../tracing/tracing.ts';
import { Reconciler, type ReconcilerOptions } from './reconciler.ts';

/** What a route means to the executor. */
export interface ExecutorRoute {
  readonly hedgeAfterMs: number | null;
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
  /** True once the lease is gone: no more writes. */
  leaseLost: boolean;
  /**
   * The lease ran out (or the rescuer released it) but its token still names
   * the attempt: no more renewals, and the answer, when it comes, is still
   * recorded (fenced by the token).
   */
  leaseExpired: boolean;
  cancelled: boolean;
  /** Another attempt decided the job: this one is stopped and recorded `superseded`. */
  superseded: boolean;
  /** The provider's id of the request, once it sent one (CONTRACT §11). */
  providerRequestId: string | null;
  /**
   * `performance.now()` before which the lease surely still holds: the send
   * time of the claim or of the last renewal that kept it, plus `leaseMs`
   * (the database set the expiry from its own clock, no earlier).
   */
  leaseSureUntil: number;
  readonly done: Promise<void>;
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
    return {
      leaseOwner: this.id, leaseMs: this.#o.leaseMs, eligible: this.#o.eligible(route), attemptId, leaseToken,
      unused: () => {
        if (this.#reserved.delete(attemptId) && this.#starved) this.wake();
      },
      lost: (ownerId) => {
        if (this.#reserved.delete(attemptId) && this.#starved) this.wake();
        void this.#releaseUnsent(ownerId, attemptId, leaseToken);
      },
    };
  }

  /**
   * A create whose answer was lost may have written its first attempt,
   * leased here and surely never sent: hand the lease back (the attempt is
   * claimable again, `starting`) so it runs instead of ending `unknown` when
   * the lease expires. Tried while the database fails, for as long as the
   * lease may hold; a few more looks when the attempt is not there (yet).
   */
  async #releaseUnsent(ownerId: string, attemptId: string, leaseToken: string): Promise<void> {
    const until = performance.now() + this.#o.leaseMs;
    let absent = 0;
    for (let tries = 1; performance.now() < until; tries++) {
      try {
        if (await this.#o.store.releaseLease({ ownerId, attemptId, leaseOwner: this.id, leaseToken })) {
          this.#o.logger?.info({ attempt_id: attemptId, tries }, 'the lease of a first attempt whose create went unanswered was handed back: it will be claimed and run');
          await this.#o.store.notifyWork().catch(() => undefined);
          this.wake();
          return;
        }
        if (++absent >= 3) return;
      } catch (e) {
        if (!isTransientDatabaseError(e)) return void this.events.emit('error', e);
      }
      await new Promise((r) => setTimeout(r, Math.min(2_000, this.#o.writeRetryBaseMs * 2 ** Math.min(tries, 10))));
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
      const sentAt = performance.now();
      if (room > 0) {
        try {
          claimed = await this.#o.store.claimWork({ leaseOwner: this.id, leaseMs: this.#o.leaseMs, limit: Math.min(room, 32), eligible: this.#o.eligible });
        } catch (e) {
          this.events.emit('error', e);
        }
      }
      for (const c of claimed) this.#run(c, sentAt);
      // Work may be waiting that did not fit: claim again as soon as an attempt finishes.
      this.#starved = room <= 0 || claimed.length >= Math.min(room, 32);
      if (claimed.length > 0 && claimed.length >= Math.min(room, 32)) continue;
      if (this.#wakePending) continue;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = null;
    }
  }

  // ---- run one attempt -----------------------------------------------------

  /** Runs a claimed attempt; `leasedAt` is the `performance.now()` at which its claim was sent. */
  #run(c: ClaimedAttempt, leasedAt: number): void {
    const abort = new AbortController();
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const f: InFlight = {
      attempt: c.attempt, job: c.job, abort, leaseLost: false, leaseExpired: false, cancelled: false, superseded: false, providerRequestId: c.attempt.providerRequestId,
      leaseSureUntil: leasedAt + this.#o.leaseMs, done,
    };
    this.#inFlight.set(c.attempt.id, f);
    this.events.emit('attempt:claimed', c);
    void withAttemptSpan(c, this.id, () => this.#runAttempt(f))
      .catch((e) => this.events.emit('error', e))
      .finally(() => {
        this.#inFlight.delete(c.attempt.id);
        resolveDone();
        // Room was the limit of the last claim: look again now. Otherwise new work wakes the loop itself.
        if (this.#starved) this.wake();
      });
  }

  async #runAttempt(f: InFlight): Promise<void> {
    const { attempt, job } = f;
    const log = this.#o.logger?.child({ job_id: job.id, attempt_id: attempt.id, owner: job.ownerId, provider: attempt.provider, attempt: attempt.number });
    const fence = { ownerId: attempt.ownerId, attemptId: attempt.id, leaseOwner: this.id, leaseToken: attempt.leaseToken! };
    const provider = this.#o.providers.get(attempt.provider);
    const startedMs = Date.now();
    if (!provider) {
      // Not configured here: nothing was sent, so this is a definite failure.
      await this.#settle(f, { state: 'failed', error: { code: 'provider_unknown', message: `provider ${attempt.provider} is not configured on executor ${this.id}` } }, log);
      return;
    }

    let dispatched = false;
    let inDoubt = false;
    /** Whether `unknown` was recorded (then, and only then, the lease may be released). */
    let markedUnknown: Promise<boolean> = Promise.resolve(false);
    let hedgeTimer: NodeJS.Timeout | undefined;
    // Streaming (CONTRACT §7): the first output claims the job's stream; its deltas go to the hub.
    const streaming = isStreamingInput(job.input);
    let firstOutput = false;
    let writer: StreamWriter | null = null;
    let streamClaim: Promise<unknown> = Promise.resolve();
    const early: ChatDelta[] = [];
    // One attempt's writes happen in order: every later write waits for `running` to be recorded.
    let runningWrite: Promise<unknown> = Promise.resolve();
    // Step: dispatch. `running` is recorded when the request reaches the connection.
    let answered = false;
    let runningTimer: NodeJS.Timeout | undefined;
    /** The `running` mark is scheduled and not yet written. */
    let markPending = false;
    const hedgeAfterMs = this.#o.routes[job.route]?.hedgeAfterMs ?? null;
    const markRunning = () => {
      markPending = false;
      if (answered || f.leaseLost) return;
      runningWrite = runningWrite
        // A stream whose first output already came has no deadline any more (its idle bound applies).
        .then(() => this.#o.store.markRunning({ ...fence, timeoutMs: firstOutput ? null : provider.timeoutMs }))
        .then(async (ok) => {
          // Not applied: ask which guard failed before giving anything up (STYLE §23).
          if (!ok) return this.#guardFailed(f, 'running', log);
          this.events.emit('attempt:dispatched', attempt);
          if (hedgeAfterMs !== null && !inDoubt && !answered && !firstOutput) {
            hedgeTimer = setTimeout(() => void this.#hedge(f, hedgeAfterMs, log), hedgeAfterMs);
          }
        })
        .catch((e) => this.events.emit('error', e));
    };
    // `running` is recorded once the request is on the wire, unless the answer arrives first
    // (within `runningMarkDelayMs`): a fast attempt goes starting → succeeded in one commit.
    // A route that hedges marks at once: a hedge needs a running attempt to stand beside.
    const onDispatched = () => {
      dispatched = true;
      // The deadline counts from here: a slow connect is not the provider's silence.
      armDeadline();
      if (hedgeAfterMs !== null || this.#o.runningMarkDelayMs === 0) markRunning();
      else {
        markPending = true;
        runningTimer = setTimeout(markRunning, this.#o.runningMarkDelayMs);
      }
    };
    // Step: the deadline (to the answer; for a stream, to its first output) makes the attempt unknown;
    // a non-streamed request keeps listening for a late answer. It is armed when the request has been written
    // (`onDispatched`): before that nothing was sent, and a connect that fails is a definite failure
    // (`provider_unreachable`, bounded by the provider's connect timeout), never a doubt.
    /** Why the attempt went into doubt here (the deadline, a stalled stream), once it did. */
    let doubt = null as RecordedError | null;
    let deadline: NodeJS.Timeout | undefined;
    const onDeadline = (): void => {
      inDoubt = true;
      const reason: RecordedError = (doubt = streaming
        ? { code: 'deadline_exceeded', message: `no output from ${attempt.provider} within ${provider.timeoutMs} ms`, details: { timeout_ms: provider.timeoutMs } }
        : { code: 'deadline_exceeded', message: `no answer from ${attempt.provider} within ${provider.timeoutMs} ms`, details: { timeout_ms: provider.timeoutMs } });
      markedUnknown = runningWrite.then(() => this.#markUnknown(f, reason, log));
      runningWrite = markedUnknown;
      if (streaming) {
        // A stream cannot be resumed: stop it, the attempt stays unknown (the job blocks).
        f.abort.abort(new Error('stream deadline passed'));
        return;
      }
      const grace = setTimeout(() => f.abort.abort(new Error('late-answer grace period over')), this.#o.lateAnswerGraceMs);
      f.abort.signal.addEventListener('abort', () => clearTimeout(grace), { once: true });
    };
    function armDeadline(): void {
      if (deadline === undefined && !answered) deadline = setTimeout(onDeadline, provider!.timeoutMs);
    }
    // A provider that never reports its dispatch still has a deadline: once a connect would surely have ended.
    const backstop = setTimeout(() => dispatched || armDeadline(), provider.timeoutMs + PRE_DISPATCH_BOUND_MS);
    // After a stream's first output its deadline is gone: only a silence longer than `idleTimeoutMs` between events ends it
    // (unknown, `stream_stalled`); a stream that keeps sending is never cut.
    const idleTimeoutMs = provider.idleTimeoutMs ?? DEFAULT_PROVIDER_IDLE_TIMEOUT_MS;
    let idleTimer: NodeJS.Timeout | undefined;
    const onStall = () => {
      if (answered || inDoubt) return;
      inDoubt = true;
      const reason: RecordedError = (doubt = { code: 'stream_stalled', message: `no event from ${attempt.provider} for ${idleTimeoutMs} ms after its first output`, details: { idle_timeout_ms: idleTimeoutMs } });
      markedUnknown = runningWrite.then(() => this.#markUnknown(f, reason, log));
      runningWrite = markedUnknown;
      f.abort.abort(new Error('stream stalled'));
    };
    const onEvent = () => idleTimer?.refresh();

    const onDelta = (d: ChatDelta): void => {
      idleTimer?.refresh();
      if (writer !== null) return writer.push(d);
      if (f.superseded || f.cancelled || f.leaseLost) return;
      early.push(d);
      if (firstOutput || !isOutputDelta(d)) return;
      firstOutput = true;
      clearTimeout(hedgeTimer);
      if (!inDoubt) {
        clearTimeout(deadline);
        idleTimer = setTimeout(onStall, idleTimeoutMs);
      }
      // The first token waits for nothing but the claim: a `running` mark not yet written goes after it.
      const markAfter = markPending;
      if (markAfter) clearTimeout(runningTimer);
      streamClaim = runningWrite
        .then(() => this.#o.store.claimStream({ ownerId: attempt.ownerId, jobId: job.id, attemptId: attempt.id, leaseOwner: this.id, leaseToken: attempt.leaseToken! }))
        .then((claimed) => {
          this.events.emit('attempt:stream_claim', attempt, { claimed });
          if (claimed) {
            log?.debug('job stream claimed');
            writer = this.#o.streamHub.open(job.id, attempt.id, { ownerId: job.ownerId, attemptNumber: attempt.number, log: this.#o.store });
            for (const e of early.splice(0)) writer.push(e);
            // Every other attempt of the job here stops: it can never win now.
            for (const other of this.#inFlight.values()) if (other !== f && other.job.id === job.id && other.job.ownerId === job.ownerId) this.#stopFlight(other, 'succeeded');
          } else if (!f.cancelled && !f.superseded) {
            log?.info('another attempt owns the job stream: stopping');
            f.superseded = true;
            f.abort.abort(new Error('another attempt owns the job stream'));
          }
        })
        // A claim that could not be written leaves the stream unclaimed: the attempt goes on, its result is stored as usual.
        .catch((e) => this.events.emit('error', e));
      if (markAfter) {
        runningWrite = streamClaim;
        markRunning();
      }
    };
    // The provider's id of the request is recorded as soon as it arrives (CONTRACT §11): a lookup needs it.
    const onProviderRequestId = (id: string) => {
      if (f.providerRequestId === id) return;
      f.providerRequestId = id;
      log?.info({ provider_request_id: id }, 'provider request id');
      if (answered || f.leaseLost) return;
      runningWrite = runningWrite
        .then(() => this.#o.store.recordProviderRequestId({ ...fence, providerRequestId: id }))
        .catch((e) => this.events.emit('error', e));
    };
    const request: ProviderRequest = {
      input: job.input as never,
      jobId: job.id,
      attemptId: attempt.id,
      attemptNumber: attempt.number,
      signal: f.abort.signal,
      onDispatched,
      onProviderRequestId,
      onEvent,
    };
    const outcome = streaming ? await provider.stream(request, onDelta) : await provider.call(request);
    answered = true;
    f.providerRequestId ??= providerRequestIdOf(outcome);
    await streamClaim;
    const stream = writer as StreamWriter | null;
    try {
      clearTimeout(runningTimer);
      clearTimeout(deadline);
      clearTimeout(backstop);
      clearTimeout(idleTimer);
      clearTimeout(hedgeTimer);
      await runningWrite;
      const latencyMs = Date.now() - startedMs;
      log?.debug({ outcome: outcome.kind, latency_ms: latencyMs, dispatched }, 'provider answered');
      // The provider's whole error text goes to the log; the attempt and the job keep it redacted (src/core/redact-credentials.ts).
      if (outcome.kind !== 'success') log?.warn(providerErrorLogFields(outcome.error), 'provider error');

      // Step: classify and record.
      if (f.leaseLost) {
        // Another lease holds the attempt: its payload is not ours to record, what it cost still is (CONTRACT §8).
        const metered = outcome.kind === 'success' ? meterUsage(outcome.completion.usage, this.#o.pricing(attempt.provider)) : this.#partialUsage(attempt.provider, outcome);
        await this.#keepUsage(f, { state: 'failed', error: { code: 'lease_lost', message: 'lease lost' }, ...metered });
        this.events.emit('attempt:finished', attempt, { outcome: 'abandoned', latencyMs });
        return;
      }
      if (!this.#running && !f.cancelled && !f.superseded && outcome.kind === 'failure' && outcome.error.code === 'aborted_before_send') {
        // We stopped it ourselves (shutdown) before anything was sent: not a provider failure.
        // Hand the attempt back unclaimed, still `starting`, for another executor to send.
        await this.#o.store.releaseLease(fence).catch((e) => this.events.emit('error', e));
        log?.info('attempt handed back unsent');
        this.events.emit('attempt:finished', attempt, { outcome: 'abandoned', latencyMs });
        return;
      }
      if ((f.cancelled || f.superseded) && outcome.kind !== 'success') this.#stopUpstream(provider, f, log);
      if (f.cancelled && outcome.kind !== 'success') {
        await this.#settle(f, { state: 'cancelled', error: { code: 'cancelled', message: 'the job was cancelled' } }, log);
        stream?.end({ ok: false, error: { code: 'cancelled', message: 'the job was cancelled' } });
      } else if (f.superseded && outcome.kind !== 'success') {
        // Stopped because another attempt won: whatever the provider did, this one can no longer win.
        const error: RecordedError = { code: 'superseded', message: `another attempt decided the job; the request to ${attempt.provider} was stopped`, details: { stopped_by: 'executor', provider_outcome: outcome.error.code } };
        // What the stopped loser had cost by then, when the provider said (a stream's partial usage): CONTRACT §8.
        await this.#settle(f, { state: 'superseded', error, ...this.#partialUsage(attempt.provider, outcome) }, log);
        stream?.end({ ok: false, error });
      } else if (outcome.kind === 'success' && outcome.result !== undefined) {
        // A provider whose answer is not a completion (an MCP tool's result): the job's result exactly as given, no usage.
        const r = await this.#settle(f, { state: 'succeeded', result: outcome.result, usage: null, costMicros: null }, log);
        stream?.end(r?.won === true ? { ok: true, result: r.job.result } : { ok: false, error: { code: 'superseded', message: `attempt ${attempt.number} (${attempt.provider}) finished after the job was decided` } });
      } else if (outcome.kind === 'success') {
        // Usage is recorded whatever the end: won, superseded, or a contract violation (CONTRACT §8).
        const metered = meterUsage(outcome.completion.usage, this.#o.pricing(attempt.provider));
        const checked = this.#o.checkOutput(job.route, job.input, outcome.completion);
        if (checked.ok) {
          const result = { ...outcome.completion, content: checked.value };
          const r = await this.#settle(f, { state: 'succeeded', result, ...metered }, log);
          if (r?.won === true) stream?.end({ ok: true, result: r.job.result ?? result });
          else stream?.end({ ok: false, error: { code: 'superseded', message: `attempt ${attempt.number} (${attempt.provider}) finished after the job was decided` } });
        } else {
          const error: RecordedError = { code: 'contract_violation', message: `the output of ${attempt.provider} broke the route contract`, details: { findings: checked.findings } };
          await this.#settle(f, { state: 'failed', error, ...metered }, log);
          stream?.end({ ok: false, error });
        }
      } else if (outcome.kind === 'failure') {
        await this.#settle(f, { state: 'failed', error: toRecorded(outcome.error), ...this.#partialUsage(attempt.provider, outcome) }, log, this.#retryRequest(attempt.provider, outcome.error));
        stream?.end({ ok: false, error: { code: outcome.error.code, message: outcome.error.message } });
      } else {
        stream?.end({ ok: false, error: inDoubt && doubt !== null ? { code: doubt.code, message: doubt.message } : { code: outcome.error.code, message: outcome.error.message } });
        // Ambiguous: the provider may have executed it. Unknown, never failed; nothing more to wait for.
        const unknown = inDoubt ? await markedUnknown : await this.#markUnknown(f, toRecorded(outcome.error), log);
        // Only an attempt recorded unknown gives up its lease: a running one keeps it until the rescuer takes over.
        if (unknown) await this.#o.store.releaseLease(fence).catch((e) => this.events.emit('error', e));
        // A stream cut short still leaves what the provider said it cost so far (CONTRACT §8).
        const partial = this.#partialUsage(attempt.provider, outcome);
        if (unknown && partial.usage) {
          await this.#o.store
            .recordLateUsage({ ownerId: attempt.ownerId, attemptId: attempt.id, usage: partial.usage, costMicros: partial.costMicros ?? null, actor: `executor:${this.id}` })
            .catch((e) => this.events.emit('error', e));
        }
      }
      this.events.emit('attempt:finished', attempt, { outcome: outcome.kind, latencyMs });
    } finally {
      // Whatever happened, a stream opened here ends (a watcher never waits for an attempt that is gone).
      stream?.end({ ok: false, error: { code: 'stream_interrupted', message: `the stream of attempt ${attempt.number} (${attempt.provider}) ended without a recorded outcome` } });
    }
  }

  /**
   * Records the attempt's outcome, trying again while the database fails
   * transiently and the lease may still be held (see {@link #retrying}).
   */
  async #settle(f: InFlight, outcome: Parameters<Store['settleAttempt']>[0]['outcome'], log: Logger | undefined, retry?: RetryRequest): Promise<SettleAttemptResult | null> {
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
      if (isOnejobError(e, 'attempt_not_found') || isOnejobError(e, 'job_not_found')) {
        log?.warn({ usage: 'usage' in outcome ? outcome.usage ?? null : null }, 'the attempt is gone (its job was deleted): its answer has nowhere to go');
        this.#reportUnrecorded(f, outcome);
        return null;
      }
      if (isOnejobError(e, 'lease_lost')) {
        await this.#keepUsage(f, outcome);
        return (this.#loseLease(f, log), null);
      }
      if (isOnejobError(e, 'attempt_finished')) {
        // Resolved from outside (an explicit resolve) while we waited, or, after a retry, our own
        // earlier try committed although its answer was lost with the connection: read what is there and tell the truth.
        const ours = tries > 1 ? await this.#ownEarlierSettle(f, outcome).catch(() => null) : null;
        if (ours) {
          log?.info({ state: ours.attempt.state, won: ours.won, tries }, 'attempt settled by an earlier try whose answer was lost');
          this.events.emit('attempt:settled', ours.attempt, { state: ours.attempt.state, won: ours.won, error: ours.attempt.error ?? undefined });
          return ours;
        }
        log?.warn({ err: e.message, tries }, 'attempt already settled elsewhere; answer dropped');
        await this.#keepUsage(f, outcome);
        return null;
      }
      throw e;
    }
  }

  /**
   * After a retried settle found the attempt finished: the result of our own
   * earlier try, when that is what committed (the attempt ended as we wrote
   * it, a success winning the job with our result), else null.
   */
  async #ownEarlierSettle(f: InFlight, outcome: Parameters<Store['settleAttempt']>[0]['outcome']): Promise<SettleAttemptResult | null> {
    const job = await this.#o.store.getJob(f.attempt.ownerId, f.attempt.jobId);
    const attempt = job?.attempts.find((a) => a.id === f.attempt.id);
    if (!job || !attempt) return null;
    const won = job.completedBy === attempt.id;
    if (outcome.state === 'succeeded') {
      // Won, or lost the race on that earlier try (superseded with our usage).
      const ourUsage = outcome.usage === undefined || outcome.usage === null || attempt.usage?.totalTokens === outcome.usage.totalTokens;
      if ((attempt.state === 'succeeded' && won) || (attempt.state === 'superseded' && ourUsage && attempt.error?.code === 'superseded')) {
        return { attempt, job, won, failover: null };
      }
      return null;
    }
    return attempt.state === outcome.state ? { attempt, job, won: false, failover: null } : null;
  }

  /**
   * A fenced write (`running`) did not apply: ask the store which guard
   * failed. Only another lease (or no attempt) is a lost lease; a lease
   * that ran out still records the answer by its token; a decided attempt
   * stops the request.
   */
  async #guardFailed(f: InFlight, write: 'running', log: Logger | undefined): Promise<void> {
    const status = await this.#o.store.leaseStatus({ ownerId: f.attempt.ownerId, attemptId: f.attempt.id, leaseOwner: this.id, leaseToken: f.attempt.leaseToken! });
    log?.info({ write, lease: status.status, state: 'state' in status ? status.state : null }, 'fenced write not applied');
    if (status.status === 'lost' || status.status === 'gone') this.#loseLease(f, log);
    else if (status.status === 'expired') f.leaseExpired = true;
    else if (status.status === 'finished') this.#stopFlight(f, status.state === 'cancelled' ? 'cancelled' : 'succeeded');
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
  async #keepUsage(f: InFlight, outcome: Parameters<Store['settleAttempt']>[0]['outcome']): Promise<void> {
    if (outcome.state === 'cancelled' || !outcome.usage) return;
    const recorded = await this.#o.store
      .recordLateUsage({ ownerId: f.attempt.ownerId, attemptId: f.attempt.id, usage: outcome.usage, costMicros: outcome.costMicros ?? null, actor: `executor:${this.id}` })
      .catch((err) => (this.events.emit('error', err), true));
    // No row took it: the attempt is gone with its job, or already carries usage. Only the former is news.
    if (!recorded && (await this.#o.store.getAttempt(f.attempt.ownerId, f.attempt.id).catch(() => f.attempt)) === null) this.#reportUnrecorded(f, outcome);
  }

  /** Usage of an answer whose attempt no longer exists: an event (and `/metrics`), since no row can hold it. */
  #reportUnrecorded(f: InFlight, outcome: Parameters<Store['settleAttempt']>[0]['outcome']): void {
    if (outcome.state === 'cancelled' || !outcome.usage) return;
    this.events.emit('attempt:usage_unrecorded', f.attempt, { usage: outcome.usage, costMicros: outcome.costMicros ?? null });
  }

  async #markUnknown(f: InFlight, reason: RecordedError, log: Logger | undefined): Promise<boolean> {
    if (f.leaseLost) return false;
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
   * `writeRetryBaseMs` to 2 s) while it fails transiently, for as long as the
   * lease may still be held: the heartbeat keeps renewing meanwhile, and each
   * renewal moves `leaseSureUntil`. Gives up (null) once the lease is surely
   * gone (its last sure expiry passed by a further lease length) or was
   * lost; then the rescuer moves the attempt to `unknown`. A permanent error
   * is thrown at once.
   */
  async #retrying<T>(f: InFlight, write: 'settle' | 'unknown', log: Logger | undefined, op: () => Promise<T>): Promise<T | null> {
    // An answer in hand is held for up to `answerHoldMs` (its token fences it after the lease ran out); a doubt only while the lease may hold.
    let heldSince: number | null = null;
    try {
      return await this.#retryingWhile(f, write, log, op, (attempt, e) => {
        if (write === 'settle') {
          if (heldSince === null) {
            if (this.#held >= this.#o.maxHeldAnswers) {
              log?.error({ err: e, held: this.#held }, 'too many answers held already; this one is given up (the attempt stays in doubt)');
              return -1;
            }
            heldSince = performance.now();
            this.#held++;
            log?.warn({ err: e, hold_ms: this.#o.answerHoldMs }, 'answer held: the database is unreachable, it is written when the database returns');
            this.events.emit('attempt:answer_held', f.attempt);
          }
          const left = heldSince + this.#o.answerHoldMs - performance.now();
          if (left <= 0) log?.error({ err: e, write, tries: attempt }, 'the database stayed unavailable past the answer hold; the answer is given up');
          return left;
        }
        const left = f.leaseSureUntil + this.#o.leaseMs - performance.now();
        if (f.leaseLost || left <= 0) log?.error({ err: e, write, tries: attempt }, 'the database stayed unavailable until the lease was surely gone; the rescuer will take the attempt over');
        return f.leaseLost ? -1 : left;
      });
    } finally {
      if (heldSince !== null) this.#held--;
    }
  }

  /** {@link #retrying}'s loop: `left` says how long more a transient failure may be tried again (≤ 0: give up). */
  async #retryingWhile<T>(f: InFlight, write: 'settle' | 'unknown', log: Logger | undefined, op: () => Promise<T>, leftAfter: (attempt: number, e: unknown) => number): Promise<T | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await op();
      } catch (e) {
        if (!isTransientDatabaseError(e)) throw e;
        const left = leftAfter(attempt, e);
        if (left <= 0) {
          this.events.emit('attempt:write_abandoned', f.attempt, { write, error: e });
          return null;
        }
        const ceiling = Math.min(2_000, this.#o.writeRetryBaseMs * 2 ** Math.min(attempt - 1, 10));
        const delayMs = Math.min(left, ceiling / 2 + Math.random() * (ceiling / 2));
        if (attempt === 1 || attempt % 10 === 0) log?.warn({ err: e, write, tries: attempt, retry_in_ms: Math.round(delayMs) }, 'write failed transiently; trying again');
        this.events.emit('attempt:write_retry', f.attempt, { write, attempt, delayMs, error: e });
        await new Promise((r) => setTimeout(r, delayMs));
      }
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

  #loseLease(f: InFlight, log: Logger | undefined): void {
    if (f.leaseLost) return;
    f.leaseLost = true;
    log?.warn('lease lost: abandoning the attempt without further writes');
    this.events.emit('attempt:lease_lost', f.attempt);
  }

  async #hedge(f: InFlight, hedgeAfterMs: number, log: Logger | undefined): Promise<void> {
    if (!this.#running || f.leaseLost) return;
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
    const flights = [...this.#inFlight.values()].filter((f) => !f.leaseLost && !f.leaseExpired);
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
          const log = this.#o.logger?.child({ job_id: f.job.id, attempt_id: f.attempt.id });
          if (status.status === 'expired') {
            f.leaseExpired = true;
            log?.warn({ state: status.state }, 'lease ran out (the database was unreachable); the answer will still be recorded by its token');
          } else if (status.status === 'finished') {
            this.#stopFlight(f, status.state === 'cancelled' ? 'cancelled' : 'succeeded');
          } else if (status.status !== 'held') {
            this.#loseLease(f, log);
            f.abort.abort(new Error('lease lost'));
          }
        }
      }
      // A job decided through another process (won, cancelled): stop its requests here too.
      const watched = flights.filter((f) => !f.leaseLost && !f.cancelled && !f.superseded);
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
    if (f.cancelled || f.superseded) return;
    if (state === 'cancelled') f.cancelled = true;
    else f.superseded = true;
    f.abort.abort(new Error(state === 'cancelled' ? 'job cancelled' : `job ${state}: another attempt decided it`));
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
