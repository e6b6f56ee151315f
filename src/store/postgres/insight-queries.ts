/**
 * Named SQL of the read model (PostgreSQL): job search, usage totals, the
 * owner's event tail. See `store/insight-queries.ts`.
 */
import { type DoubtQueueParams, type DoubtRow, type InsightQueries, type JobSearchParams, type UsageTotalRow, type UsageTotalsParams } from '../insight-queries.ts';
import type { AttemptState, JobState } from '../../core/states.ts';
import { ATTEMPT_COLUMNS, EVENT_COLUMNS, JOB_COLUMNS, attemptFromRow, eventFromRow, jobFromRow, type AttemptRow, type EventRow, type JobRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

/** Every filter is optional: `$n IS NULL OR …`. The keyset condition follows the order. */
function searchText(order: 'newest' | 'oldest'): string {
  const cmp = order === 'newest' ? '<' : '>';
  const dir = order === 'newest' ? 'DESC' : 'ASC';
  return `SELECT ${JOB_COLUMNS} FROM jobs j
WHERE owner_id = $1
  AND ($2::text IS NULL OR state = $2)
  AND ($3::text IS NULL OR route = $3)
  AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.provider = $4))
  AND ($5::timestamptz IS NULL OR created_at >= $5)
  AND ($6::timestamptz IS NULL OR created_at < $6)
  AND ($7::text IS NULL OR id = $7 OR starts_with(idempotency_key, $7))
  AND ($8::timestamptz IS NULL OR (created_at, id) ${cmp} ($8, $9::text))
ORDER BY created_at ${dir}, id ${dir}
LIMIT $10`;
}

/** The statements of this file, by name. */
export const INSIGHT_SQL = {
  searchNewest: { name: 'onejob_insight_search_newest', text: searchText('newest') },
  searchOldest: { name: 'onejob_insight_search_oldest', text: searchText('oldest') },
  usageTotals: {
    name: 'onejob_insight_usage_totals',
    text: `SELECT j.route, a.provider, a.state AS outcome,
  CASE WHEN $4::bigint IS NULL THEN NULL
       ELSE (floor(extract(epoch FROM a.started_at) * 1000 / $4::bigint) * $4::bigint)::bigint END AS bucket_ms,
  count(*)::bigint AS attempts,
  count(a.prompt_tokens)::bigint AS attempts_with_usage,
  coalesce(sum(a.prompt_tokens), 0)::bigint AS prompt_tokens,
  coalesce(sum(a.completion_tokens), 0)::bigint AS completion_tokens,
  coalesce(sum(a.total_tokens), 0)::bigint AS total_tokens,
  sum(a.cost_micros)::bigint AS cost_micros
FROM attempts a JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.owner_id = $1 AND a.started_at >= $2 AND a.started_at < $3
GROUP BY 1, 2, 3, 4
ORDER BY 4 NULLS FIRST, 1, 2, 3`,
  },
  // The doubt queue: attempts in doubt are few (attempts_unknown_idx), each joined to its job by primary key.
  doubtQueue: {
    name: 'onejob_insight_doubt_queue',
    text: `SELECT ${ATTEMPT_COLUMNS.split(', ').map((c) => `a.${c}`).join(', ')},
  j.idempotency_key AS job_idempotency_key, j.route AS job_route, j.state AS job_state, j.input AS job_input, j.created_at AS job_created_at
FROM attempts a JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.owner_id = $1 AND a.state = 'unknown' AND j.state NOT IN ${TERMINAL_JOB_STATES_SQL}
  AND ($2::timestamptz IS NULL OR (COALESCE(a.unknown_at, a.started_at), a.id) > ($2, $3::text))
ORDER BY COALESCE(a.unknown_at, a.started_at), a.id
LIMIT $4`,
  },
  eventsByOwner: {
    name: 'onejob_insight_events_by_owner',
    text: `SELECT ${EVENT_COLUMNS} FROM job_events WHERE owner_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
  },
  eventLastId: {
    name: 'onejob_insight_event_last_id',
    text: `SELECT coalesce(max(id), 0)::bigint AS id FROM job_events WHERE owner_id = $1`,
  },
} as const;

interface UsageRow {
  route: string;
  provider: string;
  outcome: AttemptState;
  bucket_ms: number | null;
  attempts: number;
  attempts_with_usage: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_micros: number | null;
}

/** The read model's queries on one connection. */
export function insightQueriesOn(db: Queryable): InsightQueries {
  return {
    async jobSearch(p: JobSearchParams) {
      const sql = p.order === 'newest' ? INSIGHT_SQL.searchNewest : INSIGHT_SQL.searchOldest;
      const res = await db.query<JobRow>({
        ...sql,
        values: [
          p.ownerId, p.state ?? null, p.route ?? null, p.provider ?? null, p.createdSince ?? null, p.createdUntil ?? null,
          p.text ?? null, p.after?.createdAt ?? null, p.after?.id ?? null, p.limit,
        ],
      });
      return res.rows.map(jobFromRow);
    },
    async usageTotals(p: UsageTotalsParams): Promise<UsageTotalRow[]> {
      const res = await db.query<UsageRow>({ ...INSIGHT_SQL.usageTotals, values: [p.ownerId, p.since, p.until, p.bucketMs] });
      return res.rows.map((r) => ({
        route: r.route, provider: r.provider, outcome: r.outcome, bucketStartMs: r.bucket_ms,
        attempts: r.attempts, attemptsWithUsage: r.attempts_with_usage,
        promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens, totalTokens: r.total_tokens,
        costMicros: r.cost_micros,
      }));
    },
    async doubtQueue(p: DoubtQueueParams): Promise<DoubtRow[]> {
      type Row = AttemptRow & { job_idempotency_key: string; job_route: string; job_state: JobState; job_input: unknown; job_created_at: Date };
      const res = await db.query<Row>({ ...INSIGHT_SQL.doubtQueue, values: [p.ownerId, p.after?.since ?? null, p.after?.id ?? null, p.limit] });
      return res.rows.map((r) => ({
        attempt: attemptFromRow(r),
        job: { id: r.job_id, idempotencyKey: r.job_idempotency_key, route: r.job_route, state: r.job_state, input: r.job_input, createdAt: r.job_created_at },
      }));
    },
    async eventListByOwner(ownerId, afterId, limit) {
      const res = await db.query<EventRow>({ ...INSIGHT_SQL.eventsByOwner, values: [ownerId, afterId, limit] });
      return res.rows.map(eventFromRow);
    },
    async eventLastId(ownerId) {
      const res = await db.query<{ id: number }>({ ...INSIGHT_SQL.eventLastId, values: [ownerId] });
      return res.rows[0]?.id ?? 0;
    },
  };
}
