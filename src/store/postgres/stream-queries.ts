/**
 * Named SQL of the `stream_events` table (PostgreSQL, migration 0011): the
 * stored stream of a job, batch by batch (CONTRACT §13). See docs/streaming.md.
 */
import type { StreamBatchRow } from '../driver.ts';
import type { Queryable } from './queryable.ts';

/** The channel of stream batches: `NOTIFY onejob_stream '<job id>'`. */
export const STREAM_CHANNEL = 'onejob_stream';

/** The statements of this file, by name. */
export const STREAM_SQL = {
  // The insert and its notification in one statement: a reader elsewhere is woken at commit.
  insert: {
    name: 'onejob_stream_batch_insert',
    text: `WITH ins AS (
  INSERT INTO stream_events (owner_id, job_id, attempt_number, seq, events) VALUES ($1, $2, $3, $4, $5) RETURNING job_id
)
SELECT pg_notify('${STREAM_CHANNEL}', job_id) FROM ins`,
  },
  list: {
    name: 'onejob_stream_batch_list',
    text: `SELECT owner_id, job_id, attempt_number, seq, events FROM stream_events
WHERE owner_id = $1 AND job_id = $2 AND ($3::int IS NULL OR attempt_number = $3::int) AND seq > $4
ORDER BY attempt_number, seq`,
  },
} as const;

/** See {@link DriverQueries.streamBatchInsert}. */
export async function streamBatchInsert(db: Queryable, r: StreamBatchRow): Promise<void> {
  await db.query({ ...STREAM_SQL.insert, values: [r.ownerId, r.jobId, r.attemptNumber, r.seq, r.events] });
}

/** See {@link DriverQueries.streamBatchList}. */
export async function streamBatchList(db: Queryable, ownerId: string, jobId: string, attemptNumber: number | null, afterSeq: number): Promise<StreamBatchRow[]> {
  const res = await db.query<{ owner_id: string; job_id: string; attempt_number: number; seq: number; events: string }>({
    ...STREAM_SQL.list,
    values: [ownerId, jobId, attemptNumber, afterSeq],
  });
  return res.rows.map((r) => ({ ownerId: r.owner_id, jobId: r.job_id, attemptNumber: r.attempt_number, seq: r.seq, events: r.events }));
}
