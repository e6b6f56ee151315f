-- onejob schema v11 (SQLite): resumable streams (CONTRACT §13). Same shape as
-- migrations/postgres/0011_stream_events.sql (without the notification: one
-- SQLite file is read by pollers in other processes). See docs/streaming.md.
CREATE TABLE stream_events (
  owner_id       TEXT    NOT NULL,
  job_id         TEXT    NOT NULL,
  attempt_number INTEGER NOT NULL,
  seq            INTEGER NOT NULL,
  events         TEXT    NOT NULL,
  PRIMARY KEY (owner_id, job_id, attempt_number, seq)
) WITHOUT ROWID;
