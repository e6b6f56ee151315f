-- onejob schema v11 (PostgreSQL): resumable streams (CONTRACT §13).
-- stream_events holds a job's stream as the executor that ran it published
-- it: one row per batch of protocol-neutral events (normalized deltas, then
-- one end marker) of one attempt's stream, `seq` the number of the batch's
-- first event (1, 2, … within the attempt). Batches are cut per time slice,
-- so a stream costs a bounded number of writes whatever the provider's chunk
-- rate. Every insert sends NOTIFY onejob_stream '<job id>' (at commit), so a
-- relay in another process reads the new events at once. Deleted with the job
-- by retention. See docs/streaming.md.
CREATE TABLE stream_events (
  owner_id       TEXT    NOT NULL,
  job_id         TEXT    NOT NULL,
  attempt_number INTEGER NOT NULL,
  seq            INTEGER NOT NULL,
  events         TEXT    NOT NULL,
  PRIMARY KEY (owner_id, job_id, attempt_number, seq)
);
