CREATE TRIGGER attempts_running_has_lease_insert BEFORE INSERT ON attempts
WHEN NEW.state = 'running' AND NEW.lease_owner IS NULL
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: attempts_running_has_lease');
END;

CREATE TRIGGER attempts_running_has_lease_update BEFORE UPDATE OF state, lease_owner ON attempts
WHEN NEW.state = 'running' AND NEW.lease_owner IS NULL
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: attempts_running_has_lease');
END;

CREATE TRIGGER attempts_spend_release AFTER DELETE ON attempts
  WHEN OLD.reserve_micros IS NOT NULL AND OLD.state IN ('starting', 'running', 'unknown')
BEGIN
  UPDATE spend_windows SET reserved_micros = reserved_micros - OLD.reserve_micros
  WHERE owner_id = OLD.owner_id
    AND ((period = 'day' AND starts_on = strftime('%Y-%m-%d', OLD.started_at / 1000, 'unixepoch'))
      OR (period = 'month' AND starts_on = strftime('%Y-%m-01', OLD.started_at / 1000, 'unixepoch')));
END;

CREATE TRIGGER attempts_spend_reserve BEFORE INSERT ON attempts WHEN NEW.reserve_micros IS NOT NULL
BEGIN
  INSERT OR IGNORE INTO spend_windows (owner_id, period, starts_on) VALUES
    (NEW.owner_id, 'day', strftime('%Y-%m-%d', NEW.started_at / 1000, 'unixepoch')),
    (NEW.owner_id, 'month', strftime('%Y-%m-01', NEW.started_at / 1000, 'unixepoch'));
  SELECT RAISE(IGNORE) FROM spend_windows
    WHERE owner_id = NEW.owner_id
      AND ((period = 'day' AND starts_on = strftime('%Y-%m-%d', NEW.started_at / 1000, 'unixepoch')
            AND NEW.spend_limit_day_micros IS NOT NULL AND spent_micros + reserved_micros + NEW.reserve_micros > NEW.spend_limit_day_micros)
        OR (period = 'month' AND starts_on = strftime('%Y-%m-01', NEW.started_at / 1000, 'unixepoch')
            AND NEW.spend_limit_month_micros IS NOT NULL AND spent_micros + reserved_micros + NEW.reserve_micros > NEW.spend_limit_month_micros));
  UPDATE spend_windows SET reserved_micros = reserved_micros + NEW.reserve_micros
    WHERE owner_id = NEW.owner_id
      AND ((period = 'day' AND starts_on = strftime('%Y-%m-%d', NEW.started_at / 1000, 'unixepoch'))
        OR (period = 'month' AND starts_on = strftime('%Y-%m-01', NEW.started_at / 1000, 'unixepoch')));
END;

CREATE TRIGGER attempts_spend_settle AFTER UPDATE OF state, cost_micros ON attempts WHEN OLD.reserve_micros IS NOT NULL
BEGIN
  UPDATE spend_windows SET
    reserved_micros = reserved_micros
      + (CASE WHEN NEW.state IN ('starting', 'running', 'unknown') THEN NEW.reserve_micros ELSE 0 END)
      - (CASE WHEN OLD.state IN ('starting', 'running', 'unknown') THEN OLD.reserve_micros ELSE 0 END),
    spent_micros = spent_micros + COALESCE(NEW.cost_micros, 0) - COALESCE(OLD.cost_micros, 0)
  WHERE owner_id = OLD.owner_id
    AND ((period = 'day' AND starts_on = strftime('%Y-%m-%d', OLD.started_at / 1000, 'unixepoch'))
      OR (period = 'month' AND starts_on = strftime('%Y-%m-01', OLD.started_at / 1000, 'unixepoch')));
END;

CREATE TABLE attempts (
  owner_id         TEXT    NOT NULL,
  id               TEXT    NOT NULL,
  job_id           TEXT    NOT NULL,
  number           INTEGER NOT NULL CHECK (number >= 1),
  provider         TEXT    NOT NULL,
  kind             TEXT    NOT NULL CHECK (kind IN ('first', 'failover', 'hedge', 'manual')),
  state            TEXT    NOT NULL CHECK (state IN ('starting', 'running', 'succeeded', 'failed', 'cancelled', 'unknown', 'superseded')),
  base_version     INTEGER NOT NULL,
  started_at       INTEGER NOT NULL,
  deadline_at      INTEGER,
  finished_at      INTEGER,
  error            TEXT,
  lease_owner      TEXT,
  lease_token      TEXT,
  lease_expires_at INTEGER, prompt_tokens INTEGER CHECK (prompt_tokens >= 0), completion_tokens INTEGER CHECK (completion_tokens >= 0 AND (completion_tokens IS NULL) = (prompt_tokens IS NULL)), total_tokens INTEGER CHECK (total_tokens >= 0 AND (total_tokens IS NULL) = (prompt_tokens IS NULL)), cost_micros INTEGER CHECK (cost_micros >= 0 AND (cost_micros IS NULL OR prompt_tokens IS NOT NULL)), provider_request_id TEXT, resolved_by TEXT CHECK (resolved_by IN ('lookup', 'callback', 'policy', 'late_answer', 'operator')), unknown_at INTEGER, lookup_next_at INTEGER, lookup_last_at INTEGER, lookup_count INTEGER NOT NULL DEFAULT 0 CHECK (lookup_count >= 0), lookup_holder TEXT, lookup_lease_expires_at INTEGER CHECK ((lookup_holder IS NULL) = (lookup_lease_expires_at IS NULL)), reserve_micros INTEGER CHECK (reserve_micros >= 0), spend_limit_day_micros INTEGER CHECK (spend_limit_day_micros >= 0), spend_limit_month_micros INTEGER CHECK (spend_limit_month_micros >= 0),
  PRIMARY KEY (owner_id, id),
  CONSTRAINT attempts_job_number_unique UNIQUE (owner_id, job_id, number),
  CONSTRAINT attempts_job_fk FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id),
  CONSTRAINT attempts_finished_iff_terminal CHECK ((state IN ('succeeded', 'failed', 'cancelled', 'superseded')) = (finished_at IS NOT NULL)),
  CONSTRAINT attempts_lease_complete CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
) WITHOUT ROWID;

CREATE TABLE batch_lines (
  owner_id   TEXT    NOT NULL,
  batch_id   TEXT    NOT NULL,
  line_no    INTEGER NOT NULL,
  custom_id  TEXT    NOT NULL,
  job_id     TEXT,
  outcome    TEXT    CHECK (outcome IN ('output', 'error')),
  output     TEXT,
  PRIMARY KEY (owner_id, batch_id, line_no),
  CONSTRAINT batch_lines_output_iff_outcome CHECK ((outcome IS NULL) = (output IS NULL))
);

CREATE TABLE batches (
  owner_id          TEXT        NOT NULL,
  id                TEXT        NOT NULL,
  idempotency_key   TEXT        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  fingerprint       TEXT        NOT NULL,
  input_file_id     TEXT        NOT NULL,
  endpoint          TEXT        NOT NULL,
  completion_window TEXT        NOT NULL,
  metadata          TEXT,
  status            TEXT        NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed', 'cancelling', 'cancelled', 'expired', 'failed')),
  line_count        INTEGER     NOT NULL,
  lines_created     INTEGER     NOT NULL DEFAULT 0,
  output_file_id    TEXT,
  error_file_id     TEXT,
  errors            TEXT,
  created_at        INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL,
  in_progress_at    INTEGER,
  finalizing_at     INTEGER,
  completed_at      INTEGER,
  failed_at         INTEGER,
  expired_at        INTEGER,
  cancelling_at     INTEGER,
  cancelled_at      INTEGER,
  finished_at       INTEGER,
  PRIMARY KEY (owner_id, id),
  CONSTRAINT batches_owner_key_unique UNIQUE (owner_id, idempotency_key),
  CONSTRAINT batches_finished_iff_terminal CHECK ((status IN ('completed', 'cancelled', 'expired', 'failed')) = (finished_at IS NOT NULL))
);

CREATE TABLE callback_signatures (
  signature  TEXT    PRIMARY KEY,
  attempt_id TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;

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

CREATE TABLE file_lines (
  owner_id  TEXT    NOT NULL,
  file_id   TEXT    NOT NULL,
  line_no   INTEGER NOT NULL CHECK (line_no >= 1),
  custom_id TEXT    NOT NULL,
  url       TEXT    NOT NULL,
  route     TEXT    NOT NULL,
  line      TEXT    NOT NULL,
  PRIMARY KEY (owner_id, file_id, line_no)
);

CREATE TABLE files (
  owner_id    TEXT        NOT NULL,
  id          TEXT        NOT NULL,
  purpose     TEXT        NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  filename    TEXT        NOT NULL,
  bytes       INTEGER      NOT NULL DEFAULT 0,
  line_count  INTEGER     NOT NULL DEFAULT 0,
  endpoints   TEXT        NOT NULL DEFAULT '[]',
  status      TEXT        NOT NULL CHECK (status IN ('uploading', 'processed')),
  batch_id    TEXT,
  kind        TEXT        NOT NULL DEFAULT 'upload' CHECK (kind IN ('upload', 'output', 'error')),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (owner_id, id)
);

CREATE TABLE job_events (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  owner_id   TEXT    NOT NULL,
  job_id     TEXT    NOT NULL,
  attempt_id TEXT,
  type       TEXT    NOT NULL,
  data       TEXT    NOT NULL DEFAULT '{}',
  at         INTEGER NOT NULL
);

CREATE TABLE jobs (
  owner_id        TEXT    NOT NULL,
  id              TEXT    NOT NULL,
  idempotency_key TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  fingerprint     TEXT    NOT NULL,
  route           TEXT    NOT NULL,
  input           TEXT    NOT NULL,
  metadata        TEXT,
  providers       TEXT    NOT NULL,
  state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'unknown', 'succeeded', 'failed', 'cancelled')),
  version         INTEGER NOT NULL DEFAULT 0,
  attempt_count   INTEGER NOT NULL DEFAULT 0,
  completed_by    TEXT,
  result          TEXT,
  error           TEXT,
  skipped         TEXT    NOT NULL DEFAULT '[]',
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  finished_at     INTEGER, stream_attempt_id TEXT, trace_context TEXT, keyless_fingerprint TEXT, batch_id TEXT,
  PRIMARY KEY (owner_id, id),
  CONSTRAINT jobs_owner_key_unique UNIQUE (owner_id, idempotency_key),
  CONSTRAINT jobs_finished_iff_terminal CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
  CONSTRAINT jobs_winner_only_when_succeeded CHECK ((completed_by IS NOT NULL) = (state = 'succeeded'))
) WITHOUT ROWID;

CREATE TABLE maintenance_leases (
  name       TEXT    PRIMARY KEY,
  holder     TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE onejob_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);

CREATE TABLE spend_windows (
  owner_id        TEXT    NOT NULL,
  period          TEXT    NOT NULL CHECK (period IN ('day', 'month')),
  starts_on       TEXT    NOT NULL,
  spent_micros    INTEGER NOT NULL DEFAULT 0,
  reserved_micros INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (owner_id, period, starts_on)
) WITHOUT ROWID;

CREATE TABLE stream_events (
  owner_id       TEXT    NOT NULL,
  job_id         TEXT    NOT NULL,
  attempt_number INTEGER NOT NULL,
  seq            INTEGER NOT NULL,
  events         TEXT    NOT NULL,
  PRIMARY KEY (owner_id, job_id, attempt_number, seq)
) WITHOUT ROWID;

CREATE INDEX attempts_claimable_idx ON attempts (started_at) WHERE state = 'starting' AND lease_owner IS NULL;

CREATE INDEX attempts_leased_idx ON attempts (lease_expires_at) WHERE lease_owner IS NOT NULL;

CREATE INDEX attempts_orphan_idx ON attempts (started_at) WHERE state = 'running' AND lease_owner IS NULL;

CREATE INDEX attempts_owner_active_idx ON attempts (owner_id) WHERE state IN ('starting', 'running');

CREATE INDEX attempts_owner_started_idx ON attempts (owner_id, started_at);

CREATE INDEX attempts_unknown_idx ON attempts (started_at) WHERE state = 'unknown';

CREATE INDEX batch_lines_pending_idx ON batch_lines (owner_id, batch_id, line_no) WHERE outcome IS NULL;

CREATE INDEX batches_finished_idx ON batches (finished_at) WHERE finished_at IS NOT NULL;

CREATE INDEX batches_open_idx ON batches (created_at) WHERE finished_at IS NULL;

CREATE INDEX batches_owner_created_idx ON batches (owner_id, created_at DESC, id DESC);

CREATE INDEX callback_signatures_expiry_idx ON callback_signatures (expires_at);

CREATE INDEX files_uploading_idx ON files (created_at) WHERE status = 'uploading';

CREATE INDEX job_events_job_idx ON job_events (owner_id, job_id, id);

CREATE INDEX jobs_batch_idx ON jobs (owner_id, batch_id) WHERE batch_id IS NOT NULL;

CREATE INDEX jobs_batch_queued_idx ON jobs (created_at, id) WHERE state = 'queued' AND batch_id IS NOT NULL;

CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE UNIQUE INDEX jobs_keyless_active_unique ON jobs (owner_id, keyless_fingerprint)
  WHERE keyless_fingerprint IS NOT NULL AND state NOT IN ('succeeded', 'failed', 'cancelled');

CREATE INDEX jobs_keyless_idx ON jobs (owner_id, keyless_fingerprint, finished_at DESC)
  WHERE keyless_fingerprint IS NOT NULL;

CREATE INDEX jobs_owner_created_idx ON jobs (owner_id, created_at DESC, id DESC);

CREATE INDEX jobs_queued_idx ON jobs (created_at) WHERE state = 'queued' AND batch_id IS NULL;
