-- onejob schema v2 (PostgreSQL): provider certifications (CONTRACT §5).
-- One row per (provider, model, contract fingerprint): the latest verdict of
-- `onejob verify`. A new contract fingerprint or model is a new key, so an
-- edit voids a certification by simply not matching it.

CREATE TABLE certifications (
  provider             text        NOT NULL,
  model                text        NOT NULL,
  contract_fingerprint text        NOT NULL CHECK (contract_fingerprint LIKE 'sha256:%'),
  route                text,
  passed               boolean     NOT NULL,
  report               json        NOT NULL,
  verified_at          timestamptz NOT NULL,
  PRIMARY KEY (provider, model, contract_fingerprint)
);
