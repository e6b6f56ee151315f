/**
 * Operations routes: liveness, readiness, metrics, the OpenAPI document.
 * None of them needs an API token; `/metrics` needs the `metricsToken` when
 * one is configured (default: open, as Prometheus scrapes expect).
 */
import type { FastifyInstance } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import { errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { createApiTokenAuthenticator } from '../api-token-auth.ts';

/** Registers the operations routes. */
export function registerOpsRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/healthz', {
    schema: {
      tags: ['operations'],
      summary: 'Liveness: the process is up',
      description: '503 `unavailable` when the process cannot serve whatever the database does (its SQLite worker died and does not start again): replace the process.',
      response: { 200: { type: 'object', required: ['status'], properties: { status: { type: 'string', const: 'ok' } } }, ...errorResponses },
    },
    handler: async () => {
      const reason = ctx.store.liveness();
      if (reason !== null) throw new OnejobError('unavailable', reason, { details: { reason: 'process_unhealthy' } });
      return { status: 'ok' };
    },
  });

  app.get('/readyz', {
    schema: {
      tags: ['operations'],
      summary: 'Readiness: the database answers and its migrations are current',
      response: {
        200: { type: 'object', required: ['status'], properties: { status: { type: 'string', const: 'ready' } } },
        ...errorResponses,
      },
    },
    handler: async (request) => {
      let readiness;
      try {
        readiness = await ctx.store.readiness();
      } catch (cause) {
        request.log.warn({ err: cause }, 'readiness check failed');
        throw new OnejobError('database_unavailable', 'the database did not answer', { cause });
      }
      if (!readiness.ok) {
        const pending = readiness.pendingMigrations;
        const detail = readiness.error ?? (pending.length > 0 ? `migrations pending: ${pending.join(', ')}; run onejob migrate` : 'the database is not ready');
        throw new OnejobError('database_unavailable', detail, { details: { pending_migrations: [...pending] } });
      }
      return { status: 'ready' };
    },
  });

  // The same constant-time comparison as the API tokens'.
  const metricsToken = ctx.config.metricsToken;
  const scraper = metricsToken === null ? null : createApiTokenAuthenticator({ [metricsToken]: 'metrics' });
  app.get('/metrics', {
    schema: {
      tags: ['operations'],
      summary: 'Prometheus metrics (text exposition format)',
      description: 'Open by default; with `metricsToken` configured it needs `Authorization: Bearer <metricsToken>` (401 `unauthorized` otherwise).',
      produces: ['text/plain'],
      response: { 200: { type: 'string', description: 'Prometheus text.' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      if (scraper !== null && scraper(request.headers.authorization) === null) {
        throw new OnejobError('unauthorized', 'GET /metrics needs Authorization: Bearer <metricsToken>');
      }
      const text = await ctx.metrics.registry.metrics();
      return reply.type(ctx.metrics.registry.contentType).send(text);
    },
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
