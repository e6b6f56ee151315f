-- onejob schema v10 (PostgreSQL): callers that send no Idempotency-Key
-- (CONTRACT §12, `keyless.mode: "fingerprint"`, and every /mcp tool call
-- without a key, §14). Such a job keeps the fingerprint of its request in
-- keyless_fingerprint (NULL for every keyed job and every older row); the
-- partial UNIQUE index lets at most one job per (owner, fingerprint) be
-- undecided at a time, so concurrent keyless duplicates join one job however
-- many processes receive them, as UNIQUE(owner, key) does for keys. The job's
-- own idempotency_key is a fresh unique value, so that constraint still holds.
-- The second index finds the newest finished one for the replay window.

ALTER TABLE jobs ADD COLUMN keyless_fingerprint text;

CREATE UNIQUE INDEX jobs_keyless_active_unique ON jobs (owner_id, keyless_fingerprint)
  WHERE keyless_fingerprint IS NOT NULL AND state NOT IN ('succeeded', 'failed', 'cancelled');

CREATE INDEX jobs_keyless_idx ON jobs (owner_id, keyless_fingerprint, finished_at DESC)
  WHERE keyless_fingerprint IS NOT NULL;
