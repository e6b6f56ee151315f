/**
 * `GET /v1/limits` (CONTRACT §16): the owner's limits and use now, and the
 * same per owner on `/metrics` (read from the database at scrape time, as
 * every state other processes change), with the refusals this process
 * answered, by code. docs/limits.md.
 */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { isOnejobError } from '../../core/errors.ts';
import { hasSpendLimit, limitsOf, windowsAt, type OwnerLimits } from '../../core/limits.ts';
import type { OwnerUse } from '../../store/driver.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import type { Metrics } from '../metrics.ts';
import { requestOwner } from '../request-owner.ts';

const usd = (micros: number | null): number | null => (micros === null ? null : micros / 1_000_000);

/** The body of `GET /v1/limits`: every member present, `limit` null where unlimited. */
export function limitsBody(limits: OwnerLimits, use: OwnerUse, now: Date): Record<string, unknown> {
  const w = windowsAt(now);
  const window = (limit: number | null, u: OwnerUse['day'], resetsAt: Date) => ({
    limit: usd(limit), spent: usd(u.spentMicros), reserved: usd(u.reservedMicros), resets_at: resetsAt.toISOString(),
  });
  return {
    spend_usd: { day: window(limits.spendDayMicros, use.day, w.day.resetsAt), month: window(limits.spendMonthMicros, use.month, w.month.resetsAt) },
    concurrency: { limit: limits.concurrency, in_use: use.inFlight },
    requests_per_minute: { limit: limits.requestsPerMinute, used: use.createdSince },
  };
}

const windowSchema = {
  type: 'object',
  required: ['limit', 'spent', 'reserved', 'resets_at'],
  properties: {
    limit: { type: ['number', 'null'], description: 'USD; null: unlimited.' },
    spent: { type: 'number', description: "The cost_usd of the owner's limited attempts started in this UTC window (every outcome)." },
    reserved: { type: 'number', description: 'The worst cases of those not yet settled (starting, running or unknown).' },
    resets_at: { type: 'string', format: 'date-time' },
  },
} as const;

/** The limit refusals on `/metrics`, and the per-owner gauges (registered once per registry). */
const registered = new WeakMap<Metrics['registry'], Counter<'owner' | 'code'>>();
/** The same refusals per owner, for `GET /v1/limits` (`refusals`: answered by this process since it started). */
const refusedHere = new WeakMap<Metrics['registry'], Map<string, Record<string, number>>>();

function limitMetrics(ctx: AppContext): Counter<'owner' | 'code'> {
  const { registry } = ctx.metrics;
  let refusals = registered.get(registry);
  if (refusals) return refusals;
  const registers = [registry];
  refusals = new Counter({ name: 'onejob_limit_refusals_total', help: 'Job-creating requests refused by a limit (budget_exceeded, concurrency_limited, rate_limited), by owner.', labelNames: ['owner', 'code'], registers });
  registered.set(registry, refusals);
  // Owners with a limit: those named under "limits", and every token's owner when the default sets one.
  const owners = (): string[] => {
    const config = ctx.config.limits;
    const named = new Set(Object.keys(config.owners ?? {}));
    if (Object.keys(config.default ?? {}).length > 0) for (const g of Object.values(ctx.config.apiKeys)) named.add(typeof g === 'string' ? g : g.owner);
    return [...named].sort();
  };
  const spend = new Gauge({ name: 'onejob_limit_spend_usd', help: "Each owner's spend in its current UTC windows: kind spent, reserved, limit (absent: unlimited).", labelNames: ['owner', 'window', 'kind'], registers,
    async collect() {
      this.reset();
      for (const owner of owners()) {
        const l = limitsOf(ctx.config.limits, owner);
        if (!hasSpendLimit(l)) continue;
        const { use } = await ctx.store.ownerUse(owner);
        for (const [window, u, limit] of [['day', use.day, l.spendDayMicros], ['month', use.month, l.spendMonthMicros]] as const) {
          this.set({ owner, window, kind: 'spent' }, u.spentMicros / 1e6);
          this.set({ owner, window, kind: 'reserved' }, u.reservedMicros / 1e6);
          if (limit !== null) this.set({ owner, window, kind: 'limit' }, limit / 1e6);
        }
      }
    },
  });
  void spend;
  const concurrency = new Gauge({ name: 'onejob_limit_concurrency', help: "Each owner's attempts starting or running (kind in_use) and its limit (kind limit).", labelNames: ['owner', 'kind'], registers,
    async collect() {
      this.reset();
      for (const owner of owners()) {
        const l = limitsOf(ctx.config.limits, owner);
        if (l.concurrency === null) continue;
        const { use } = await ctx.store.ownerUse(owner);
        this.set({ owner, kind: 'in_use' }, use.inFlight);
        this.set({ owner, kind: 'limit' }, l.concurrency);
      }
    },
  });
  void concurrency;
  return refusals;
}

const LIMIT_CODES = new Set(['budget_exceeded', 'concurrency_limited', 'rate_limited']);

/** Registers `GET /v1/limits` and counts the limits' refusals of the `/v1` scope. */
export function registerLimitRoutes(app: FastifyInstance, ctx: AppContext): void {
  const refusals = limitMetrics(ctx);
  let here = refusedHere.get(ctx.metrics.registry);
  if (!here) refusedHere.set(ctx.metrics.registry, (here = new Map()));
  const byOwner = here;
  app.addHook('onError', async (request, _reply, error) => {
    if (!isOnejobError(error) || !LIMIT_CODES.has(error.code)) return;
    try {
      const owner = requestOwner(request);
      refusals.inc({ owner, code: error.code });
      const counts = byOwner.get(owner) ?? {};
      counts[error.code] = (counts[error.code] ?? 0) + 1;
      byOwner.set(owner, counts);
    } catch {
      // No owner (cannot happen after authentication): nothing to count.
    }
  });
  app.get('/v1/limits', {
    schema: {
      tags: ['usage'],
      summary: "The owner's limits and use now (CONTRACT §16)",
      security: bearerSecurity,
      response: {
        200: {
          type: 'object',
          required: ['spend_usd', 'concurrency', 'requests_per_minute'],
          properties: {
            spend_usd: { type: 'object', required: ['day', 'month'], properties: { day: windowSchema, month: windowSchema } },
            concurrency: { type: 'object', required: ['limit', 'in_use'], properties: { limit: { type: ['integer', 'null'] }, in_use: { type: 'integer' } } },
            requests_per_minute: { type: 'object', required: ['limit', 'used'], properties: { limit: { type: ['integer', 'null'] }, used: { type: 'integer' } } },
            refusals: {
              type: 'object', additionalProperties: { type: 'integer' },
              description: "Extension: the owner's job-creating requests this process refused since it started, by code (budget_exceeded, concurrency_limited, rate_limited).",
            },
          },
        },
        ...errorResponses,
      },
    },
    handler: async (request) => {
      const owner = requestOwner(request);
      const { now, use } = await ctx.store.ownerUse(owner);
      return { ...limitsBody(limitsOf(ctx.config.limits, owner), use, now), refusals: { budget_exceeded: 0, concurrency_limited: 0, rate_limited: 0, ...byOwner.get(owner) } };
    },
  });
}
