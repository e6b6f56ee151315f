/**
 * Prometheus metrics of one onejob process (prom-client).
 *
 * {@link createMetrics} returns a small {@link Metrics} object on its own
 * registry, so two apps in one test process do not collide. The HTTP layer
 * counts what it sees; the executor increments the same object (attempt
 * outcomes, races lost, provider latency). State that other processes change
 * too (attempts in doubt) is a gauge read from the database at scrape time,
 * never a counter kept in one process's memory.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Reconciler } from '../executor/reconciler.ts';
import type { Store } from '../store/store.ts';
import type { Attempt } from '../core/types.ts';

/** The metrics of one process. Names are prefixed `onejob_`. */
export interface Metrics {
  readonly registry: Registry;
  /** `onejob_jobs_created_total`: new jobs (201s and jobs created under the hood). */
  readonly jobsCreated: Counter<'route'>;
  /** `onejob_idempotent_replays_total`: requests answered with an existing job (200 + Idempotent-Replayed). */
  readonly replays: Counter<'route'>;
  /** `onejob_idempotency_conflicts_total`: a key reused with another body (409 idempotency_key_reused). */
  readonly conflicts: Counter;
  /** `onejob_attempts_total{state}`: attempts entering a state (`starting`, `running`, `succeeded`, …). */
  readonly attempts: Counter<'state'>;
  /** `onejob_races_lost_total`: successes that lost the completion compare-and-swap (superseded). */
  readonly racesLost: Counter;
  /**
   * `onejob_attempts_in_doubt`: attempts `unknown` right now, counted in the
   * database at each scrape (every process's transitions out of doubt
   * included: resolves, late answers, status look-ups). Without a
   * `countInDoubt` source it stays at 0.
   */
  readonly attemptsInDoubt: Gauge;
  /**
   * `onejob_chat_requests_total{outcome,replayed}`: `POST /v1/chat/completions`
   * requests that reached their job, by answer (`succeeded`, `failed`,
   * `in_doubt`, `cancelled`, `pending`) and whether the key already had a job.
   */
  readonly chatRequests: Counter<'outcome' | 'replayed'>;
  /** `onejob_provider_latency_seconds{provider,outcome}`: time from dispatch to a definite answer. */
  readonly providerLatency: Histogram<'provider' | 'outcome'>;
  /**
   * `onejob_gateway_overhead_seconds{route}`: per answer of
   * `POST /v1/chat/completions` (`route="chat_completions"`) and
   * `POST /v1/jobs` (`route="jobs_create"`), the time spent in onejob minus
   * the time this process waited on a provider for it (see
   * `src/http/server-timing.ts`).
   */
  readonly gatewayOverhead: Histogram<'route'>;
  /**
   * `onejob_answers_held`: providers' answers this process holds in memory
   * because the database is unreachable, written when it returns (read at
   * scrape time from each executor added to `answersHeldSources`).
   */
  readonly answersHeld: Gauge;
  /** Where `onejob_answers_held` is summed from (an executor's `answersHeld`). */
  readonly answersHeldSources: Set<() => number>;
  /**
   * `onejob_oldest_doubt_age_seconds`: how long the oldest attempt now in
   * doubt has been `unknown`, read from the database at scrape time (0 when
   * none is). CONTRACT §11.
   */
  readonly oldestDoubtAge: Gauge;
  /** `onejob_lookups_total{provider,outcome}`: questions to providers about attempts in doubt, by answer (`succeeded`, `failed`, `running`, `not_found`, `error`). */
  readonly lookups: Counter<'provider' | 'outcome'>;
  /** `onejob_doubt_resolved_total{resolved_by}`: attempts whose doubt ended, by who ended it (`lookup`, `callback`, `policy`, `late_answer`, `operator`). */
  readonly doubtResolved: Counter<'resolved_by'>;
  /** `onejob_doubt_resolution_seconds{resolved_by}`: time from `unknown` to the end of the doubt. */
  readonly doubtResolution: Histogram<'resolved_by'>;
}

/** Options of {@link createMetrics}. */
export interface CreateMetricsOptions {
  /** Also collect Node's process metrics (CPU, memory, event loop). Default true. */
  readonly processMetrics?: boolean;
  /**
   * Where `onejob_attempts_in_doubt` comes from at scrape time, e.g.
   * `() => store.countAttemptsInDoubt()`. When it fails (the database is
   * down) the gauge keeps its last value and `onejob_metrics_source_errors_total` counts it.
   */
  readonly countInDoubt?: (() => Promise<number>) | undefined;
  /** Where `onejob_oldest_doubt_age_seconds` comes from: when the oldest attempt in doubt became unknown, and the database's now. */
  readonly oldestDoubt?: (() => Promise<{ readonly since: Date | null; readonly now: Date }>) | undefined;
}

/**
 * Registers onejob's metrics on a new registry.
 *
 * @example const metrics = createMetrics(); metrics.attempts.inc({ state: 'unknown' });
 */
export function createMetrics(options: CreateMetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'onejob_' });
  const registers = [registry];
  const countInDoubt = options.countInDoubt;
  const answersHeldSources = new Set<() => number>();
  const oldestDoubt = options.oldestDoubt;
  const sourceErrors = new Counter({ name: 'onejob_metrics_source_errors_total', help: 'Scrapes at which a gauge read from the database could not be refreshed (it kept its last value).', registers });
  return {
    registry,
    jobsCreated: new Counter({ name: 'onejob_jobs_created_total', help: 'Jobs created.', labelNames: ['route'], registers }),
    replays: new Counter({ name: 'onejob_idempotent_replays_total', help: 'Requests answered with the job their idempotency key already created.', labelNames: ['route'], registers }),
    conflicts: new Counter({ name: 'onejob_idempotency_conflicts_total', help: 'Idempotency keys reused with a different request (409 idempotency_key_reused).', registers }),
    attempts: new Counter({ name: 'onejob_attempts_total', help: 'Attempts entering each state.', labelNames: ['state'], registers }),
    racesLost: new Counter({ name: 'onejob_races_lost_total', help: 'Successful attempts that lost the completion compare-and-swap (superseded).', registers }),
    attemptsInDoubt: new Gauge({
      name: 'onejob_attempts_in_doubt',
      help: 'Attempts currently unknown (in doubt), counted in the database at scrape time.',
      registers,
      async collect() {
        if (!countInDoubt) return;
        try {
          this.set(await countInDoubt());
        } catch {
          sourceErrors.inc();
        }
      },
    }),
    chatRequests: new Counter({
      name: 'onejob_chat_requests_total',
      help: 'OpenAI-compatible chat completion requests that reached their job, by answer and replay.',
      labelNames: ['outcome', 'replayed'],
      registers,
    }),
    gatewayOverhead: new Histogram({
      name: 'onejob_gateway_overhead_seconds',
      help: 'Time an answer spent in onejob minus the time this process waited on a provider for it.',
      labelNames: ['route'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    answersHeld: new Gauge({
      name: 'onejob_answers_held',
      help: 'Provider answers held in memory because the database is unreachable, written when it returns.',
      registers,
      collect() {
        let n = 0;
        for (const source of answersHeldSources) n += source();
        this.set(n);
      },
    }),
    answersHeldSources,
    oldestDoubtAge: new Gauge({
      name: 'onejob_oldest_doubt_age_seconds',
      help: 'How long the oldest attempt now in doubt has been unknown (0 when none is), read from the database at scrape time.',
      registers,
      async collect() {
        if (!oldestDoubt) return;
        try {
          const { since, now } = await oldestDoubt();
          this.set(since === null ? 0 : Math.max(0, (now.getTime() - since.getTime()) / 1000));
        } catch {
          sourceErrors.inc();
        }
      },
    }),
    lookups: new Counter({ name: 'onejob_lookups_total', help: 'Questions to providers about attempts in doubt, by answer.', labelNames: ['provider', 'outcome'], registers }),
    doubtResolved: new Counter({ name: 'onejob_doubt_resolved_total', help: 'Attempts whose doubt ended, by who ended it.', labelNames: ['resolved_by'], registers }),
    doubtResolution: new Histogram({
      name: 'onejob_doubt_resolution_seconds',
      help: 'Time from unknown to the end of the doubt.',
      labelNames: ['resolved_by'],
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600, 14400, 86400],
      registers,
    }),
    providerLatency: new Histogram({
      name: 'onejob_provider_latency_seconds',
      help: 'Time from dispatch to a definite provider answer.',
      labelNames: ['provider', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60],
      registers,
    }),
  };
}

/**
 * The gauges a store answers at scrape time: attempts in doubt, and the age
 * of the oldest doubt (CONTRACT §11).
 *
 * @example createMetrics(storeMetricSources(store))
 */
export function storeMetricSources(store: Pick<Store, 'countAttemptsInDoubt' | 'oldestUnknownAt' | 'databaseNow'>): CreateMetricsOptions {
  return {
    countInDoubt: () => store.countAttemptsInDoubt(),
    oldestDoubt: async () => ({ since: await store.oldestUnknownAt(), now: await store.databaseNow() }),
  };
}

/** Counts a reconciler's lookups and the doubt it ends (CONTRACT §11). */
export function instrumentReconciler(reconciler: Reconciler, metrics: Metrics): void {
  reconciler.events.on('lookup', (attempt, outcome) => metrics.lookups.inc({ provider: attempt.provider, outcome }));
  reconciler.events.on('resolved', (attempt, r) => {
    metrics.attempts.inc({ state: attempt.state });
    metrics.doubtResolved.inc({ resolved_by: r.resolvedBy });
    if (r.doubtMs !== null) metrics.doubtResolution.observe({ resolved_by: r.resolvedBy }, r.doubtMs / 1000);
  });
}

/**
 * Counts an attempt whose doubt was ended by an answer outside the
 * reconciler (a resolve, a late answer): by its `resolved_by`, and how long
 * it had been unknown. Nothing for an attempt decided by its own answer.
 */
export function countDoubtResolved(metrics: Metrics, attempt: Pick<Attempt, 'resolvedBy' | 'unknownAt' | 'finishedAt'>): void {
  if (attempt.resolvedBy === null) return;
  metrics.doubtResolved.inc({ resolved_by: attempt.resolvedBy });
  if (attempt.unknownAt !== null && attempt.finishedAt !== null) {
    metrics.doubtResolution.observe({ resolved_by: attempt.resolvedBy }, Math.max(0, attempt.finishedAt.getTime() - attempt.unknownAt.getTime()) / 1000);
  }
}
