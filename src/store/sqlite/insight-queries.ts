/**
 * Named SQL of the read model (SQLite): job search, usage totals, the owner's
 * event tail. Same answers as
 * `postgres/insight-queries.ts`; timestamps are epoch milliseconds.
 */
import type { AttemptState, JobState } from '../../core/states.ts';
import type { Attempt, Job, JobEvent } from '../../core/types.ts';
import { type InsightQueries } from '../insight-queries.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

function searchSql(order: 'newest' | 'oldest'): string {
  const cmp = order === 'newest' ? '<' : '>';
  const dir = order === 'newest' ? 'DESC' : 'ASC';
  return `
SELECT * FROM jobs j
WHERE owner_id = @ownerId
  AND (@state IS NULL OR state = @state)
  AND (@route IS NULL OR route = @route)
  AND (@provider IS NULL OR EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.provider = @provider))
  AND (@since IS NULL OR created_at >= @since)
  AND (@until IS NULL OR created_at < @until)
  AND (@text IS NULL OR id = @text OR substr(idempotency_key, 1, length(@text)) = @text)
  AND (@afterCreatedAt IS NULL OR created_at ${cmp} @afterCreatedAt OR (created_at = @afterCreatedAt AND id ${cmp} @afterId))
ORDER BY created_at ${dir}, id ${dir}
LIMIT @limit`;
}

export const INSIGHT_SEARCH_NEWEST = searchSql('newest');
export const INSIGHT_SEARCH_OLDEST = searchSql('oldest');

export const INSIGHT_USAGE_TOTALS = `
SELECT j.route AS route, a.provider AS provider, a.state AS outcome,
  CASE WHEN @bucketMs IS NULL THEN NULL ELSE (CAST(a.started_at AS INTEGER) / CAST(@bucketMs AS INTEGER)) * CAST(@bucketMs AS INTEGER) END AS bucket_ms,
  count(*) AS attempts,
  count(a.prompt_tokens) AS attempts_with_usage,
  coalesce(sum(a.prompt_tokens), 0) AS prompt_tokens,
  coalesce(sum(a.completion_tokens), 0) AS completion_tokens,
  coalesce(sum(a.total_tokens), 0) AS total_tokens,
  sum(a.cost_micros) AS cost_micros
FROM attempts a JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.owner_id = @ownerId AND a.started_at >= @since AND a.started_at < @until
GROUP BY 1, 2, 3, 4
ORDER BY 4 NULLS FIRST, 1, 2, 3`;

export const INSIGHT_DOUBT_QUEUE = `
SELECT a.*, j.idempotency_key AS job_idempotency_key, j.route AS job_route, j.state AS job_state, j.input AS job_input, j.created_at AS job_created_at
FROM attempts a JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.owner_id = @ownerId AND a.state = 'unknown' AND j.state NOT IN ${TERMINAL_JOB_STATES_SQL}
  AND (@afterSince IS NULL OR coalesce(a.unknown_at, a.started_at) > @afterSince
       OR (coalesce(a.unknown_at, a.started_at) = @afterSince AND a.id > @afterId))
ORDER BY coalesce(a.unknown_at, a.started_at), a.id
LIMIT @limit`;

export const INSIGHT_EVENTS_BY_OWNER = `SELECT * FROM job_events WHERE owner_id = ? AND id > ? ORDER BY id LIMIT ?`;

export const INSIGHT_EVENT_LAST_ID = `SELECT coalesce(max(id), 0) AS id FROM job_events WHERE owner_id = ?`;

type Row = Record<string, unknown>;

/** How the driver runs one statement (its worker's `get`/`all`/`run`). */
export interface SqliteExec {
  all(sql: string, ...args: unknown[]): Promise<Row[]>;
  get(sql: string, ...args: unknown[]): Promise<Row | undefined>;
}

/** The read model's queries over the driver's statement runner and row mappers. */
export function sqliteInsightQueries(db: SqliteExec, map: { job(r: Row): Job; attempt(r: Row): Attempt; event(r: Row): JobEvent }): InsightQueries {
  return {
    async jobSearch(p) {
      const rows = await db.all(p.order === 'newest' ? INSIGHT_SEARCH_NEWEST : INSIGHT_SEARCH_OLDEST, {
        ownerId: p.ownerId, state: p.state ?? null, route: p.route ?? null, provider: p.provider ?? null,
        since: p.createdSince?.getTime() ?? null, until: p.createdUntil?.getTime() ?? null, text: p.text ?? null,
        afterCreatedAt: p.after?.createdAt.getTime() ?? null, afterId: p.after?.id ?? null, limit: p.limit,
      });
      return rows.map(map.job);
    },
    async usageTotals(p) {
      const rows = await db.all(INSIGHT_USAGE_TOTALS, { ownerId: p.ownerId, since: p.since.getTime(), until: p.until.getTime(), bucketMs: p.bucketMs });
      return rows.map((r) => ({
        route: String(r.route), provider: String(r.provider), outcome: r.outcome as AttemptState,
        bucketStartMs: r.bucket_ms === null ? null : Number(r.bucket_ms),
        attempts: Number(r.attempts), attemptsWithUsage: Number(r.attempts_with_usage),
        promptTokens: Number(r.prompt_tokens), completionTokens: Number(r.completion_tokens), totalTokens: Number(r.total_tokens),
        costMicros: r.cost_micros === null ? null : Number(r.cost_micros),
      }));
    },
    async doubtQueue(p) {
      const rows = await db.all(INSIGHT_DOUBT_QUEUE, { ownerId: p.ownerId, afterSince: p.after?.since.getTime() ?? null, afterId: p.after?.id ?? null, limit: p.limit });
      return rows.map((r) => ({
        attempt: map.attempt(r),
        job: {
          id: String(r.job_id), idempotencyKey: String(r.job_idempotency_key), route: String(r.job_route), state: r.job_state as JobState,
          input: JSON.parse(String(r.job_input)) as unknown, createdAt: new Date(Number(r.job_created_at)),
        },
      }));
    },
    async eventListByOwner(ownerId, afterId, limit) {
      return (await db.all(INSIGHT_EVENTS_BY_OWNER, ownerId, afterId, limit)).map(map.event);
    },
    async eventLastId(ownerId) {
      const row = await db.get(INSIGHT_EVENT_LAST_ID, ownerId);
      return Number(row?.id ?? 0);
    },
  };
}
