-- onejob schema v4 (SQLite): retention (CONTRACT §9) and operations. Same
-- shape as migrations/postgres/0004_retention.sql; expires_at is integer
-- milliseconds since the epoch. See docs/retention.md.

CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE INDEX attempts_unknown_idx ON attempts (started_at) WHERE state = 'unknown';

CREATE TABLE maintenance_leases (
  name       TEXT    PRIMARY KEY,
  holder     TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
