/** Named SQL of the `stream_events` table (SQLite, migration 0011). See docs/streaming.md. */

export const STREAM_BATCH_INSERT = `
INSERT INTO stream_events (owner_id, job_id, attempt_number, seq, events) VALUES (@ownerId, @jobId, @attemptNumber, @seq, @events)`;

export const STREAM_BATCH_LIST = `
SELECT owner_id, job_id, attempt_number, seq, events FROM stream_events
WHERE owner_id = @ownerId AND job_id = @jobId AND (@attemptNumber IS NULL OR attempt_number = @attemptNumber) AND seq > @afterSeq
ORDER BY attempt_number, seq`;
