-- onejob schema v12 (SQLite): each v4 callback signature is accepted once
-- (CONTRACT §15). Same shape as migrations/postgres/0012_callback_signatures.sql;
-- expires_at is epoch ms.

CREATE TABLE callback_signatures (
  signature  TEXT    PRIMARY KEY,
  attempt_id TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX callback_signatures_expiry_idx ON callback_signatures (expires_at);
