-- onejob schema v12 (PostgreSQL): each v4 callback signature is accepted once
-- (CONTRACT §15). A task service signs "<t>.<attempt id>.<body>" with a unix
-- time t; onejob accepts t within 300 s of its clock either way, and records
-- the signature here (its hex HMAC is the key): a second delivery of the same
-- signature finds the row and is refused. A row is useless once t is out of
-- the window (expires_at); the insert of a new one deletes expired ones, a
-- bounded batch at a time, so the table holds about ten minutes of callbacks.

CREATE TABLE callback_signatures (
  signature  text        PRIMARY KEY,
  attempt_id text        NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE INDEX callback_signatures_expiry_idx ON callback_signatures (expires_at);
