-- onejob schema v10 (SQLite): callers that send no Idempotency-Key (CONTRACT
-- §12 and §14). Same shape as migrations/postgres/0010_keyless_fingerprint.sql:
-- at most one undecided job per (owner, fingerprint), enforced by a partial
-- UNIQUE index; finished_at (epoch ms) finds the replay window's job.

ALTER TABLE jobs ADD COLUMN keyless_fingerprint TEXT;

CREATE UNIQUE INDEX jobs_keyless_active_unique ON jobs (owner_id, keyless_fingerprint)
  WHERE keyless_fingerprint IS NOT NULL AND state NOT IN ('succeeded', 'failed', 'cancelled');

CREATE INDEX jobs_keyless_idx ON jobs (owner_id, keyless_fingerprint, finished_at DESC)
  WHERE keyless_fingerprint IS NOT NULL;
