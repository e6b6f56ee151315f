/**
 * The reconciler: doubt that resolves itself (CONTRACT §11, docs/reconciliation.md).
 *
 * Runs in every executor. It takes `unknown` attempts whose provider can be
 * asked (a {@link Provider.lookup}) or that a `settleUnknownAfterMs` policy
 * may settle, leased to one asker at a time across processes (the store's
 * `claimLookups`: `FOR UPDATE SKIP LOCKED`, the database's clock), in bounded
 * batches, and asks the provider: first about 1 s after the attempt became
 * unknown, then with backoff up to 60 s between asks.
 *
 * What the provider says is applied through the paths that exist, exactly as
 * if the attempt had ended that way ({@link applyAnswer}): an output is
 * checked against the route's contract and goes through the job's
 * compare-and-swap (it may be `superseded`); a definite failure lets the job
 * continue down its chain; "still running", "not found yet" or a question
 * that could not be asked waits for the next ask. It never sends the work
 * again. It knows nothing of protocols: each provider's lookup does.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { isOnejobError, OnejobError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { everyProviderEligible, type EligibilityCheck } from '../core/job-rules.ts';
import type { Attempt, RecordedError, ResolvedBy } from '../core/types.ts';
import { meterUsage, type Pricing } from '../core/usage.ts';
import type { LookupAnswer, LookupAnswerKind, NormalizedCompletion, Provider } from '../providers/provider.ts';
import { IN_DOUBT_ONLY, settleRefusal } from '../store/settle-guard.ts';
import type { AttemptOutcome, SettleAttemptResult, Store } from '../store/store.ts';
import { acceptText, type OutputCheck } from './executor.ts';

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  readonly store: Store;
  /** Providers by configured name. */
  readonly providers: ReadonlyMap<string, Provider>;
  /** The asker's identity (the executor's id). Default: a new `rec_…` id. */
  readonly holder?: string;
  /** How often the queue is read. Default 1 000 ms. */
  readonly everyMs?: number;
  /** The first ask, this long after the attempt became unknown. Default 1 000 ms. */
  readonly firstCheckMs?: number;
  /** Backoff: the n-th ask that found nothing definite waits `min(maxCheckMs, firstCheckMs × 2^n)`. Default 60 000 ms. */
  readonly maxCheckMs?: number;
  /** Attempts per batch. Default 16. */
  readonly batchSize?: number;
  /** How long one ask may take (and the lookup lease, twice that). Default 10 000 ms. */
  readonly askTimeoutMs?: number;
  /** The certification gate of a route (a failure's failover). Default: every provider eligible. */
  readonly eligible?: (route: string) => EligibilityCheck;
  /** The contract check of an output found by a lookup. Default {@link acceptText}. */
  readonly checkOutput?: OutputCheck;
  /** A provider's prices (CONTRACT §8). Default: none. */
  readonly pricing?: (provider: string) => Pricing | null;
  readonly logger?: Logger | undefined;
}

/** Events of a {@link Reconciler} (metrics subscribe; tests await them). */
export interface ReconcilerEvents {
  /** A provider was asked about an attempt and said `kind`. */
  'lookup': [Attempt, LookupAnswerKind];
  /** An attempt's doubt ended: who ended it, and how long it had been in doubt (ms, null when unknown). */
  'resolved': [Attempt, { resolvedBy: ResolvedBy; doubtMs: number | null }];
  'error': [unknown];
}

/** What a reconciler will do about one attempt in doubt: see {@link Reconciler.plan}. */
export interface ReconcilePlan {
  /** The provider has a lookup: the reconciler asks it, and `POST /v1/attempts/{id}/check` can. */
  readonly canCheck: boolean;
  /** When it is asked next (null when it cannot be asked). */
  readonly nextCheckAt: Date | null;
  /** When a `settleUnknownAfterMs` policy settles it `failed` (null without a policy). */
  readonly settlesAt: Date | null;
}

/** What applying an answer did. */
export interface AppliedAnswer {
  /** The settle, when the answer was definite and this applied it; null when it waits (or someone else settled first). */
  readonly settled: SettleAttemptResult | null;
  readonly answer: LookupAnswer;
}

/**
 * The reconciler of one executor.
 *
 * @example
 * const reconciler = new Reconciler({ store, providers });
 * reconciler.start(); // … await reconciler.stop();
 */
export class Reconciler {
  readonly holder: string;
  readonly events = new EventEmitter<ReconcilerEvents>();
  readonly #o: Required<Omit<ReconcilerOptions, 'logger' | 'holder'>> & { logger: Logger | undefined };
  #timer: NodeJS.Timeout | null = null;
  #pass: Promise<unknown> | null = null;
  #stopping = new AbortController();

  constructor(options: ReconcilerOptions) {
    this.holder = options.holder ?? newId('rec');
    this.#o = {
      store: options.store,
      providers: options.providers,
      everyMs: options.everyMs ?? 1_000,
      firstCheckMs: options.firstCheckMs ?? 1_000,
      maxCheckMs: options.maxCheckMs ?? 60_000,
      batchSize: options.batchSize ?? 16,
      askTimeoutMs: options.askTimeoutMs ?? 10_000,
      eligible: options.eligible ?? (() => everyProviderEligible),
      checkOutput: options.checkOutput ?? acceptText,
      pricing: options.pricing ?? (() => null),
      logger: options.logger?.child({ reconciler: this.holder }),
    };
    this.events.on('error', (e) => this.#o.logger?.error({ err: e }, 'reconciler error'));
  }

  /** The providers whose attempts in doubt this reconciler takes: those with a lookup or a settle policy. */
  get askable(): string[] {
    return [...this.#o.providers.values()].filter((p) => canReconcile(p)).map((p) => p.name);
  }

  /** Whether `provider` has a lookup this reconciler can ask. */
  canLookUp(provider: string): boolean {
    return typeof this.#o.providers.get(provider)?.lookup === 'function';
  }

  /**
   * What this reconciler will do about an attempt in doubt (the dashboard's
   * doubt queue): whether its provider can be asked, when it is asked next
   * (its `lookup_next_at`, else `firstCheckMs` after it became unknown: the
   * due time the store's `claimLookups` reads), and for a provider with a
   * `settleUnknownAfterMs` policy, when the policy settles it.
   *
   * @example reconciler.plan(attempt) // { canCheck: true, nextCheckAt: 2026-…, settlesAt: null }
   */
  plan(attempt: Pick<Attempt, 'provider' | 'startedAt' | 'unknownAt' | 'lookupNextAt'>): ReconcilePlan {
    const provider = this.#o.providers.get(attempt.provider);
    const canCheck = typeof provider?.lookup === 'function';
    const nextCheckAt = !canCheck ? null : attempt.lookupNextAt ?? new Date((attempt.unknownAt ?? attempt.startedAt).getTime() + this.#o.firstCheckMs);
    const policy = !canCheck ? provider?.settleUnknownAfterMs ?? null : null;
    return { canCheck, nextCheckAt, settlesAt: policy === null ? null : new Date(attempt.startedAt.getTime() + policy) };
  }

  /** Starts reading the queue every `everyMs` (nothing to do when no provider can be asked). */
  start(): void {
    if (this.#timer !== null || this.askable.length === 0) return;
    this.#stopping = new AbortController();
    this.#timer = setInterval(() => {
      if (this.#pass === null) this.#pass = this.runOnce().catch((e) => this.events.emit('error', e)).finally(() => (this.#pass = null));
    }, this.#o.everyMs).unref();
  }

  /** Stops; an ask in flight is aborted (its attempt is asked again by the next holder once the lookup lease ends). */
  async stop(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    this.#stopping.abort(new Error('reconciler stopping'));
    await this.#pass;
  }

  /** One pass: claims a batch of due attempts, asks about each, applies the answers. Returns how many were asked. */
  async runOnce(): Promise<number> {
    const providers = this.askable;
    if (providers.length === 0) return 0;
    const claimed = await this.#o.store.claimLookups({
      holder: this.holder, providers, limit: this.#o.batchSize, leaseMs: 2 * this.#o.askTimeoutMs, firstCheckMs: this.#o.firstCheckMs,
    });
    await Promise.all(claimed.map((a) => this.#reconcile(a).catch((e) => this.events.emit('error', e))));
    return claimed.length;
  }

  /**
   * Asks the provider about `attempt` now and applies the answer
   * (`POST /v1/attempts/{id}/check`): an outcome found this way is
   * `resolved_by: "lookup"`. Outside the lookup lease: the settle is guarded
   * as every settle is. Only an attempt in doubt is asked about (CONTRACT §15).
   *
   * @throws OnejobError `lookup_unsupported` when the provider has no lookup;
   *   `attempt_in_flight` when the attempt is `starting` or `running` (its
   *   executor decides); `attempt_finished` when it ended.
   */
  async check(attempt: Attempt): Promise<AppliedAnswer> {
    const provider = this.#o.providers.get(attempt.provider);
    if (!provider?.lookup) throw lookupUnsupported(attempt.provider);
    const refused = settleRefusal(attempt.id, attempt.state, IN_DOUBT_ONLY);
    if (refused) throw refused;
    const answer = await this.#ask(provider, attempt);
    return { answer, settled: await this.applyAnswer(attempt, answer, 'lookup') };
  }

  /**
   * Applies what a provider said about an attempt (a lookup's answer, or a
   * signed callback's body read the same way) through the settle paths:
   * `succeeded` through the contract check and the compare-and-swap,
   * `failed` down the chain; anything else changes nothing (null). Null too
   * when the attempt was settled meanwhile (by its own late answer, an
   * operator, another asker).
   */
  async applyAnswer(attempt: Attempt, answer: LookupAnswer, resolvedBy: ResolvedBy): Promise<SettleAttemptResult | null> {
    let outcome: AttemptOutcome;
    if (answer.kind === 'succeeded') {
      const job = await this.#o.store.getJob(attempt.ownerId, attempt.jobId);
      if (job === null) return null;
      outcome = this.#successOutcome(attempt, job.route, job.input, answer.completion);
    } else if (answer.kind === 'failed') {
      outcome = { state: 'failed', error: { code: answer.error.code, message: answer.error.message, ...(answer.error.details === undefined ? {} : { details: answer.error.details }) } };
    } else {
      return null;
    }
    const providerRequestId = answer.kind === 'succeeded' ? answer.providerRequestId : undefined;
    return this.#settle(attempt, outcome, resolvedBy, providerRequestId);
  }

  async #reconcile(attempt: Attempt): Promise<void> {
    const provider = this.#o.providers.get(attempt.provider);
    if (provider === undefined) return;
    const log = this.#o.logger?.child({ job_id: attempt.jobId, attempt_id: attempt.id, provider: attempt.provider, provider_request_id: attempt.providerRequestId });
    if (provider.lookup) {
      const answer = await this.#ask(provider, attempt);
      const settled = await this.applyAnswer(attempt, answer, 'lookup');
      if (settled !== null) {
        log?.info({ answer: answer.kind, state: settled.attempt.state, job_state: settled.job.state }, 'doubt resolved by lookup');
        return;
      }
      if (answer.kind === 'succeeded' || answer.kind === 'failed') return; // settled by someone else meanwhile
      log?.debug({ answer: answer.kind, ...(answer.kind === 'error' ? { reason: answer.message } : {}) }, 'lookup: nothing definite yet');
    } else if (provider.settleUnknownAfterMs != null) {
      // CONTRACT §11: only for providers that do nothing but compute and whose maxDurationMs bounds every request (opt-in).
      const now = await this.#o.store.databaseNow();
      if (now.getTime() - attempt.startedAt.getTime() >= provider.settleUnknownAfterMs) {
        const error: RecordedError = {
          code: 'settled_by_policy',
          message: `still unknown ${provider.settleUnknownAfterMs} ms after it started: settled failed by the provider's settleUnknownAfterMs policy`,
          details: { provider: provider.name, settle_unknown_after_ms: provider.settleUnknownAfterMs, was: attempt.error },
        };
        const settled = await this.#settle(attempt, { state: 'failed', error }, 'policy', undefined);
        if (settled !== null) log?.warn({ job_state: settled.job.state }, 'doubt settled by policy (settleUnknownAfterMs)');
        return;
      }
    }
    await this.#o.store.deferLookup({
      ownerId: attempt.ownerId, attemptId: attempt.id, holder: this.holder, backoffBaseMs: this.#o.firstCheckMs, backoffMaxMs: this.#o.maxCheckMs,
    });
  }

  async #ask(provider: Provider, attempt: Attempt): Promise<LookupAnswer> {
    const job = await this.#o.store.getJob(attempt.ownerId, attempt.jobId);
    const signal = AbortSignal.any([AbortSignal.timeout(this.#o.askTimeoutMs), this.#stopping.signal]);
    let answer: LookupAnswer;
    try {
      answer = await provider.lookup!({
        attemptId: attempt.id, jobId: attempt.jobId, attemptNumber: attempt.number, input: job?.input ?? null,
        providerRequestId: attempt.providerRequestId, startedAt: attempt.startedAt, now: await this.#o.store.databaseNow(), signal,
      });
    } catch (e) {
      answer = { kind: 'error', message: e instanceof Error ? e.message : String(e) };
    }
    this.events.emit('lookup', attempt, answer.kind);
    return answer;
  }

  #successOutcome(attempt: Attempt, route: string, input: unknown, completion: NormalizedCompletion): AttemptOutcome {
    const metered = meterUsage(completion.usage, this.#o.pricing(attempt.provider));
    const checked = this.#o.checkOutput(route, input, completion);
    if (checked.ok) return { state: 'succeeded', result: { ...completion, content: checked.value }, ...metered };
    return { state: 'failed', error: { code: 'contract_violation', message: `the output of ${attempt.provider} broke the route contract`, details: { findings: checked.findings } }, ...metered };
  }

  async #settle(attempt: Attempt, outcome: AttemptOutcome, resolvedBy: ResolvedBy, providerRequestId: string | undefined): Promise<SettleAttemptResult | null> {
    const job = await this.#o.store.getJob(attempt.ownerId, attempt.jobId);
    try {
      const settled = await this.#o.store.settleAttempt({
        ownerId: attempt.ownerId, attemptId: attempt.id, outcome, actor: `${resolvedBy}:${this.holder}`, resolvedBy, fromStates: IN_DOUBT_ONLY,
        eligible: job ? this.#o.eligible(job.route) : undefined,
        ...(providerRequestId === undefined || attempt.providerRequestId !== null ? {} : { providerRequestId }),
      });
      const doubtMs = attempt.unknownAt === null ? null : Math.max(0, (settled.attempt.finishedAt ?? new Date()).getTime() - attempt.unknownAt.getTime());
      this.events.emit('resolved', settled.attempt, { resolvedBy, doubtMs });
      return settled;
    } catch (e) {
      // Not in doubt (any more, or not yet again): its executor or whoever settled it decides (CONTRACT §15).
      if (isOnejobError(e, 'attempt_finished') || isOnejobError(e, 'attempt_in_flight') || isOnejobError(e, 'attempt_not_found')) return null;
      throw e;
    }
  }
}

/** Whether the reconciler takes a provider's attempts in doubt: it has a lookup, or a settle policy. */
export function canReconcile(provider: Provider): boolean {
  return typeof provider.lookup === 'function' || provider.settleUnknownAfterMs != null;
}

/** Whether an attempt may be checked: only one in doubt (CONTRACT §15). */
export function isCheckable(attempt: Attempt): boolean {
  return attempt.state === 'unknown';
}

function lookupUnsupported(provider: string): OnejobError {
  return new OnejobError('lookup_unsupported', `provider ${provider} has no lookup: onejob cannot ask it what became of a request (resolve the attempt instead)`, { details: { provider } });
}
