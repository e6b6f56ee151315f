-- onejob schema v9 (PostgreSQL): doubt that resolves itself (CONTRACT §11,
-- docs/reconciliation.md).
-- provider_request_id: the provider's own id of the request (a Responses
--   `resp_…` id, a task id, else its x-request-id / request-id header),
--   written as soon as the provider sends it.
-- resolved_by: who ended the attempt's doubt (null: undecided, or decided by
--   its own answer).
-- unknown_at: when the attempt last became `unknown` (age of the oldest
--   doubt, time to resolution).
-- lookup_*: the reconciler's bookkeeping. One asker per attempt at a time
--   across processes: lookup_holder / lookup_lease_expires_at is a short
--   lease taken with FOR UPDATE SKIP LOCKED and compared with the database's
--   clock; lookup_next_at is when the attempt is asked next (backoff from
--   ~1 s to 60 s), lookup_last_at when it was last asked, lookup_count how
--   many asks have found nothing definite. The queue is read through
--   attempts_unknown_idx (0004): attempts in doubt are few.
ALTER TABLE attempts
  ADD COLUMN provider_request_id TEXT,
  ADD COLUMN resolved_by TEXT CHECK (resolved_by IN ('lookup', 'callback', 'policy', 'late_answer', 'operator')),
  ADD COLUMN unknown_at timestamptz,
  ADD COLUMN lookup_next_at timestamptz,
  ADD COLUMN lookup_last_at timestamptz,
  ADD COLUMN lookup_count integer NOT NULL DEFAULT 0 CHECK (lookup_count >= 0),
  ADD COLUMN lookup_holder TEXT,
  ADD COLUMN lookup_lease_expires_at timestamptz,
  ADD CONSTRAINT attempts_lookup_lease_complete CHECK ((lookup_holder IS NULL) = (lookup_lease_expires_at IS NULL));

