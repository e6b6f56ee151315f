/**
 * `GET /v1/models` and `GET /v1/models/{id}` (CONTRACT §12): the routes a
 * token may use, as OpenAI's model list, so `client.models.list()` and the
 * frameworks that probe it (LangChain, model pickers) see what to call.
 *
 * A route is a model to a caller: `model: "<route>"` on the gateway
 * endpoints names it. Every authenticated owner may use every configured
 * route, so every owner sees the same list. MCP tool routes (`mcp:…`) are
 * tools, not models, and are left out.
 */
import type { FastifyInstance } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';

const modelSchema = {
  type: 'object',
  required: ['id', 'object', 'created', 'owned_by'],
  properties: {
    id: { type: 'string', description: 'A route name: pass it as `model`.' },
    object: { const: 'model' },
    created: { type: 'integer', description: 'Unix seconds: when this server loaded its configuration.' },
    owned_by: { const: 'onejob' },
  },
} as const;

/** Registers the model routes. */
export function registerModelRoutes(app: FastifyInstance, ctx: AppContext): void {
  const created = Math.floor(Date.now() / 1000);
  const modelOf = (id: string) => ({ id, object: 'model' as const, created, owned_by: 'onejob' as const });
  const routeNames = (): string[] => Object.keys(ctx.config.routes).filter((name) => !name.startsWith('mcp:')).sort();

  app.get('/v1/models', {
    schema: {
      tags: ['openai'],
      summary: 'The routes this token may use, as OpenAI models',
      security: bearerSecurity,
      response: {
        200: { type: 'object', required: ['object', 'data'], properties: { object: { const: 'list' }, data: { type: 'array', items: modelSchema } } },
        ...errorResponses,
      },
    },
    handler: async () => ({ object: 'list', data: routeNames().map(modelOf) }),
  });

  app.get<{ Params: { id: string } }>('/v1/models/:id', {
    schema: {
      tags: ['openai'],
      summary: 'One route, as an OpenAI model',
      security: bearerSecurity,
      params: { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 255 } } },
      response: { 200: modelSchema, ...errorResponses },
    },
    handler: async (request) => {
      const id = request.params.id.startsWith('route:') ? request.params.id.slice('route:'.length) : request.params.id;
      if (!routeNames().includes(id)) throw new OnejobError('not_found', `no route named ${JSON.stringify(id)} is configured`, { details: { model: request.params.id } });
      return modelOf(id);
    },
  });
}
