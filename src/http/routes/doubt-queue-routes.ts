/**
 * `GET /v1/doubt`: the owner's doubt queue, for the dashboard's In doubt page
 * (CONTRACT §10, §11; additive, docs/http-api.md). Every `unknown` attempt
 * of a job not yet terminal, oldest doubt first, each with what a person
 * needs to decide it without opening the job: its job's key, route and a
 * line of its input, the provider's own id of the request, whether the
 * provider can be asked (a lookup) and when it is asked next or settled by
 * policy. One statement per page (`store.insights.doubtQueue`); the actions
 * are the existing endpoints (`POST /v1/attempts/{id}/resolve`, `POST
 * /v1/jobs/{id}/cancel`, `POST /v1/attempts/{id}/check`).
 */
import type { FastifyInstance } from 'fastify';
import type { FromSchema } from 'json-schema-to-ts';
import { attemptBody } from '../api-bodies.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { inputLine } from '../input-line.ts';
import { requestOwner } from '../request-owner.ts';
import { askHint } from '../../providers/ask-hint.ts';

/** Query of `GET /v1/doubt`. */
export const doubtQueueQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 200, default: 100 },
    cursor: { type: 'string', minLength: 1, description: "The previous page's `next_cursor`." },
  },
} as const;
/** Query of `GET /v1/doubt`. */
export type DoubtQueueQuery = FromSchema<typeof doubtQueueQuery>;

const doubtRowSchema = {
  type: 'object',
  description:
    'An attempt in doubt (the attempt body; `next_check_at` is filled in before the first ask too) with the job it blocks and what onejob will do about it.',
  allOf: [{ $ref: 'Attempt#' }],
  required: ['job', 'can_check', 'settles_at', 'ask_hint'],
  properties: {
    job: {
      type: 'object',
      required: ['id', 'idempotency_key', 'route', 'state', 'created_at', 'input_line'],
      properties: {
        id: { type: 'string' },
        idempotency_key: { type: 'string' },
        route: { type: 'string' },
        state: { type: 'string' },
        created_at: { type: 'string', format: 'date-time' },
        input_line: { type: 'string', description: "The input as one line (the last user message's text, else compact JSON), at most 160 characters." },
      },
    },
    can_check: { type: 'boolean', description: 'The provider has a lookup: the reconciler asks it, and `POST /v1/attempts/{id}/check` asks it now.' },
    settles_at: { type: ['string', 'null'], format: 'date-time', description: 'When the provider\'s `settleUnknownAfterMs` policy resolves it `failed` (null without a policy).' },
    ask_hint: {
      type: ['string', 'null'],
      description: 'When `can_check` is false: what would make the attempt askable (the provider type and the setting that give it a lookup); null when it can be asked.',
    },
  },
} as const;

/** Registers `GET /v1/doubt`. */
export function registerDoubtQueueRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get<{ Querystring: DoubtQueueQuery }>('/v1/doubt', {
    schema: {
      tags: ['attempts'],
      summary: "The owner's attempts in doubt, oldest first (the dashboard's work queue)",
      description:
        'Every `unknown` attempt of a job that is not terminal, oldest doubt first (`unknown_at`), with its job\'s idempotency key, route and a line of its input, and whether its provider can be asked. Resolve, check and cancel them with the attempt and job endpoints.',
      security: bearerSecurity,
      querystring: doubtQueueQuery,
      response: {
        200: {
          type: 'object',
          required: ['data', 'next_cursor'],
          properties: { data: { type: 'array', items: doubtRowSchema }, next_cursor: { type: ['string', 'null'] } },
        },
        ...errorResponses,
      },
    },
    handler: async (request) => {
      const page = await ctx.store.insights.doubtQueue({ ownerId: requestOwner(request), limit: request.query.limit, cursor: request.query.cursor });
      return {
        data: page.rows.map(({ attempt, job }) => {
          const plan = ctx.reconciler?.plan(attempt) ?? { canCheck: false, nextCheckAt: null, settlesAt: null };
          return {
            ...attemptBody(attempt),
            next_check_at: plan.nextCheckAt?.toISOString() ?? null,
            job: {
              id: job.id, idempotency_key: job.idempotencyKey, route: job.route, state: job.state,
              created_at: job.createdAt.toISOString(), input_line: inputLine(job.input),
            },
            can_check: plan.canCheck,
            settles_at: plan.settlesAt?.toISOString() ?? null,
            ask_hint: plan.canCheck ? null : askHint(attempt.provider, ctx.config.providers[attempt.provider]),
          };
        }),
        next_cursor: page.nextCursor,
      };
    },
  });
}
