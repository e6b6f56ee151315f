/**
 * Named SQL of the append-only `job_events` table (PostgreSQL).
 */
import type { EventInsertRow } from '../driver.ts';
import type { JobEvent } from '../../core/types.ts';
import { EVENT_COLUMNS, eventFromRow, type EventRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';

/** The statements of this file, by name. */
export const EVENT_SQL = {
  // One statement for any number of rows: parallel arrays, unnested in order.
  insert: {
    name: 'onejob_event_insert',
    text: `INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
SELECT e.owner_id, e.job_id, e.attempt_id, e.type, e.data, e.at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::json[], $6::timestamptz[])
  WITH ORDINALITY AS e(owner_id, job_id, attempt_id, type, data, at, ord)
ORDER BY e.ord`,
  },
  list: {
    name: 'onejob_event_list',
    text: `SELECT ${EVENT_COLUMNS} FROM job_events WHERE owner_id = $1 AND job_id = $2 ORDER BY id`,
  },
  listAll: {
    name: 'onejob_event_list_all',
    text: `SELECT ${EVENT_COLUMNS} FROM job_events WHERE id > $1 ORDER BY id LIMIT $2`,
  },
} as const;

/** See {@link DriverQueries.eventInsert}. */
export async function eventInsert(db: Queryable, rows: readonly EventInsertRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query({
    ...EVENT_SQL.insert,
    values: [
      rows.map((r) => r.ownerId),
      rows.map((r) => r.jobId),
      rows.map((r) => r.attemptId),
      rows.map((r) => r.type),
      rows.map((r) => JSON.stringify(r.data ?? {})),
      rows.map((r) => r.at),
    ],
  });
}

/** See {@link DriverQueries.eventList}. */
export async function eventList(db: Queryable, ownerId: string, jobId: string): Promise<JobEvent[]> {
  const res = await db.query<EventRow>({ ...EVENT_SQL.list, values: [ownerId, jobId] });
  return res.rows.map(eventFromRow);
}

/** See {@link DriverQueries.eventListAll}. */
export async function eventListAll(db: Queryable, afterId: number, limit: number): Promise<JobEvent[]> {
  const res = await db.query<EventRow>({ ...EVENT_SQL.listAll, values: [afterId, limit] });
  return res.rows.map(eventFromRow);
}
