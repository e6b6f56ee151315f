/**
 * Usage and cost counters on `/metrics` (CONTRACT §8), by route, provider
 * and outcome (the attempt's state), counted when an attempt settles in this
 * process with usage:
 *
 * - `onejob_attempt_tokens_total{route,provider,outcome,kind}` (`kind` =
 *   `prompt` | `completion`);
 * - `onejob_attempt_cost_usd_total{route,provider,outcome}` (from the
 *   attempt's integer micro-dollars);
 * - `onejob_attempt_usage_reports_total{route,provider,outcome}` (attempts that reported usage).
 *
 * Registered on the {@link Metrics} registry of the process (once per registry).
 */
import { Counter } from 'prom-client';
import type { Attempt } from '../core/types.ts';
import type { Executor } from '../executor/executor.ts';
import type { Metrics } from './metrics.ts';

/** The usage counters. */
export interface UsageMetrics {
  readonly tokens: Counter<'route' | 'provider' | 'outcome' | 'kind'>;
  readonly costUsd: Counter<'route' | 'provider' | 'outcome'>;
  readonly reports: Counter<'route' | 'provider' | 'outcome'>;
}

const byRegistry = new WeakMap<Metrics['registry'], UsageMetrics>();

/** The usage counters of `metrics`' registry (created on first use). */
export function usageMetrics(metrics: Metrics): UsageMetrics {
  let m = byRegistry.get(metrics.registry);
  if (!m) {
    const registers = [metrics.registry];
    m = {
      tokens: new Counter({ name: 'onejob_attempt_tokens_total', help: 'Tokens reported by providers, by route, provider, attempt outcome and kind (prompt, completion).', labelNames: ['route', 'provider', 'outcome', 'kind'], registers }),
      costUsd: new Counter({ name: 'onejob_attempt_cost_usd_total', help: "Cost of attempts in USD at their provider's pricing, by route, provider and attempt outcome.", labelNames: ['route', 'provider', 'outcome'], registers }),
      reports: new Counter({ name: 'onejob_attempt_usage_reports_total', help: 'Attempts whose provider reported usage, by route, provider and outcome.', labelNames: ['route', 'provider', 'outcome'], registers }),
    };
    byRegistry.set(metrics.registry, m);
  }
  return m;
}

/** Counts one settled attempt's usage. */
export function countUsage(m: UsageMetrics, route: string, attempt: Attempt): void {
  if (!attempt.usage) return;
  const labels = { route, provider: attempt.provider, outcome: attempt.state };
  m.reports.inc(labels);
  m.tokens.inc({ ...labels, kind: 'prompt' }, attempt.usage.promptTokens);
  m.tokens.inc({ ...labels, kind: 'completion' }, attempt.usage.completionTokens);
  if (attempt.costMicros !== null) m.costUsd.inc(labels, attempt.costMicros / 1_000_000);
}

/**
 * Counts the usage of every attempt `executor` settles into `metrics`. The
 * route comes from the claim (an attempt record does not carry it).
 */
export function instrumentUsage(executor: Executor, metrics: Metrics): void {
  const m = usageMetrics(metrics);
  const routes = new Map<string, string>();
  executor.events.on('attempt:claimed', ({ attempt, job }) => routes.set(attempt.id, job.route));
  executor.events.on('attempt:settled', (attempt) => {
    const route = routes.get(attempt.id);
    routes.delete(attempt.id);
    if (route !== undefined) countUsage(m, route, attempt);
  });
  // An answer whose job retention deleted meanwhile: no row holds its usage, the counters still do (outcome `job_deleted`).
  executor.events.on('attempt:usage_unrecorded', (attempt, u) => {
    const route = routes.get(attempt.id);
    if (route !== undefined && u.usage) countUsage(m, route, { ...attempt, state: 'job_deleted' as Attempt['state'], usage: u.usage, costMicros: u.costMicros });
  });
  executor.events.on('attempt:finished', (attempt) => routes.delete(attempt.id));
}
