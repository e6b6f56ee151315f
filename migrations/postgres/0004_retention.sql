-- onejob schema v4 (PostgreSQL): retention (CONTRACT §9) and operations.
-- See docs/retention.md.

-- The retention sweep reads terminal jobs oldest first: finished_at is set
-- exactly when a job is terminal (jobs_finished_iff_terminal), so this partial
-- index holds the terminal jobs only and `finished_at < cutoff` uses it.
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- The attempts_in_doubt gauge counts these at every scrape.
CREATE INDEX attempts_unknown_idx ON attempts (started_at) WHERE state = 'unknown';

-- Named leases of background maintenance (the retention sweep): one holder
-- per name and database at a time, until expires_at (the database's clock).
-- A lease row works the same on SQLite, where advisory locks do not exist.
CREATE TABLE maintenance_leases (
  name       text        PRIMARY KEY,
  holder     text        NOT NULL,
  expires_at timestamptz NOT NULL
);
