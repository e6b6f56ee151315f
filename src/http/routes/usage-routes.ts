/**
 * `GET /v1/usage` (CONTRACT §8): the owner's attempts summed by route,
 * provider and outcome (the attempt's state) over a time range, optionally in
 * time buckets (the dashboard's spend chart). Sums are done by the database
 * on integer tokens and integer micro-dollars; `cost_usd` is their quotient
 * by 10⁶, null when no attempt of the group was priced.
 */
import type { FastifyInstance } from 'fastify';
import type { FromSchema } from 'json-schema-to-ts';
import { microsToUsd } from '../../core/usage.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { instantOf } from './job-search.ts';
import { usageMetrics } from '../usage-metrics.ts';
import { requestOwner } from '../request-owner.ts';

/** Query of `GET /v1/usage`. */
export const usageQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    since: { type: 'string', format: 'date-time', description: 'Attempts started at or after this RFC 3339 time (default: all).' },
    until: { type: 'string', format: 'date-time', description: 'Attempts started before this RFC 3339 time (default: no bound).' },
    bucket_seconds: {
      type: 'integer', minimum: 60, maximum: 31 * 86_400,
      description: 'Also group by start time in buckets this long (aligned to the Unix epoch, UTC); each row then has `period_start`.',
    },
  },
} as const;
/** Query of `GET /v1/usage`. */
export type UsageQuery = FromSchema<typeof usageQuery>;

const usageRow = {
  type: 'object',
  required: ['route', 'provider', 'outcome', 'attempts', 'prompt_tokens', 'completion_tokens', 'cost_usd'],
  properties: {
    route: { type: 'string' },
    provider: { type: 'string' },
    outcome: { type: 'string', description: "The attempts' state (`succeeded` is the winner; every other outcome did not win)." },
    period_start: { type: 'string', format: 'date-time', description: 'With `bucket_seconds`: the start of the bucket.' },
    attempts: { type: 'integer' },
    attempts_with_usage: { type: 'integer', description: 'Attempts whose provider reported usage.' },
    prompt_tokens: { type: 'integer' },
    completion_tokens: { type: 'integer' },
    total_tokens: { type: 'integer' },
    cost_usd: { type: ['number', 'null'], description: 'Sum of the priced attempts, exact to the micro-dollar; null when none was priced.' },
  },
} as const;

/** Registers `GET /v1/usage`. */
export function registerUsageRoutes(app: FastifyInstance, ctx: AppContext): void {
  // The counters are listed on /metrics from the start, whether or not an executor runs here.
  usageMetrics(ctx.metrics);
  app.get<{ Querystring: UsageQuery }>('/v1/usage', {
    schema: {
      tags: ['usage'],
      summary: "The owner's usage and cost by route, provider and outcome",
      security: bearerSecurity,
      querystring: usageQuery,
      response: {
        200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: usageRow } } },
        ...errorResponses,
      },
    },
    handler: async (request) => {
      const q = request.query;
      const rows = await ctx.store.insights.usage({
        ownerId: requestOwner(request),
        since: instantOf('since', q.since),
        until: instantOf('until', q.until),
        bucketMs: q.bucket_seconds === undefined ? undefined : q.bucket_seconds * 1000,
      });
      return {
        data: rows.map((r) => ({
          route: r.route,
          provider: r.provider,
          outcome: r.outcome,
          ...(r.bucketStartMs === null ? {} : { period_start: new Date(r.bucketStartMs).toISOString() }),
          attempts: r.attempts,
          attempts_with_usage: r.attemptsWithUsage,
          prompt_tokens: r.promptTokens,
          completion_tokens: r.completionTokens,
          total_tokens: r.totalTokens,
          cost_usd: microsToUsd(r.costMicros),
        })),
      };
    },
  });
}
