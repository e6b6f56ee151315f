-- onejob schema v2 (SQLite): provider certifications (CONTRACT §5). Same
-- shape as migrations/postgres/0002_certifications.sql; verified_at is
-- integer milliseconds since the epoch, report is JSON text, passed is 0/1.

CREATE TABLE certifications (
  provider             TEXT    NOT NULL,
  model                TEXT    NOT NULL,
  contract_fingerprint TEXT    NOT NULL CHECK (contract_fingerprint LIKE 'sha256:%'),
  route                TEXT,
  passed               INTEGER NOT NULL CHECK (passed IN (0, 1)),
  report               TEXT    NOT NULL,
  verified_at          INTEGER NOT NULL,
  PRIMARY KEY (provider, model, contract_fingerprint)
) WITHOUT ROWID;
