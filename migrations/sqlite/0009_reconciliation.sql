-- onejob schema v9 (SQLite): doubt that resolves itself (CONTRACT §11). Same
-- shape as migrations/postgres/0009_reconciliation.sql (timestamps are integer
-- milliseconds). One writer at a time: the lookup lease is taken by a plain
-- guarded UPDATE.
ALTER TABLE attempts ADD COLUMN provider_request_id TEXT;
ALTER TABLE attempts ADD COLUMN resolved_by TEXT CHECK (resolved_by IN ('lookup', 'callback', 'policy', 'late_answer', 'operator'));
ALTER TABLE attempts ADD COLUMN unknown_at INTEGER;
ALTER TABLE attempts ADD COLUMN lookup_next_at INTEGER;
ALTER TABLE attempts ADD COLUMN lookup_last_at INTEGER;
ALTER TABLE attempts ADD COLUMN lookup_count INTEGER NOT NULL DEFAULT 0 CHECK (lookup_count >= 0);
ALTER TABLE attempts ADD COLUMN lookup_holder TEXT;
ALTER TABLE attempts ADD COLUMN lookup_lease_expires_at INTEGER CHECK ((lookup_holder IS NULL) = (lookup_lease_expires_at IS NULL));

