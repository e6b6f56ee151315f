/**
 * The search side of `GET /v1/jobs` (additive query members `route`,
 * `provider`, `since`, `until`, `q`, `order`): answered by the store's read
 * model when any of them is given, else by the plain list.
 */
import type { FastifyRequest } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import { jobBody } from '../api-bodies.ts';
import type { ListJobsQuery } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { requestOwner } from '../request-owner.ts';

const SEARCH_MEMBERS = ['route', 'provider', 'since', 'until', 'q', 'order'] as const;

/** Whether the query asks for more than the plain list (state, limit, cursor). */
export function isJobSearch(query: ListJobsQuery): boolean {
  return SEARCH_MEMBERS.some((m) => query[m] !== undefined);
}

/**
 * An RFC 3339 query value as a Date.
 *
 * @throws OnejobError `invalid_request` naming the member when it is not a real instant.
 */
export function instantOf(name: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) throw new OnejobError('invalid_request', `${name} must be an RFC 3339 date-time, e.g. 2025-01-31T12:00:00Z`);
  return d;
}

/** The answer of a searching `GET /v1/jobs`: `{data, next_cursor}` as the plain list. */
export async function searchJobsAnswer(ctx: AppContext, request: FastifyRequest<{ Querystring: ListJobsQuery }>) {
  const q = request.query;
  const createdSince = instantOf('since', q.since);
  const createdUntil = instantOf('until', q.until);
  if (createdSince && createdUntil && createdSince > createdUntil) throw new OnejobError('invalid_request', 'since must not be after until');
  const page = await ctx.store.insights.searchJobs({
    ownerId: requestOwner(request), state: q.state, route: q.route, provider: q.provider, createdSince, createdUntil,
    text: q.q, order: q.order, limit: q.limit, cursor: q.cursor,
  });
  return { data: page.jobs.map(jobBody), next_cursor: page.nextCursor };
}
