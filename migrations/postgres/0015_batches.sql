-- onejob schema v15 (PostgreSQL): batches, one job per line (CONTRACT §17).
-- See docs/batches.md.

-- Uploaded files (purpose 'batch') and the output/error files of batches
-- ('batch_output'). An upload is 'uploading' until its last line is stored:
-- no read sees it before; one cut by a crash is swept by retention.
CREATE TABLE files (
  owner_id    text        NOT NULL,
  id          text        NOT NULL,
  purpose     text        NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  filename    text        NOT NULL,
  bytes       bigint      NOT NULL DEFAULT 0,
  line_count  integer     NOT NULL DEFAULT 0,
  endpoints   json        NOT NULL DEFAULT '[]',
  status      text        NOT NULL CHECK (status IN ('uploading', 'processed')),
  batch_id    text,
  kind        text        NOT NULL DEFAULT 'upload' CHECK (kind IN ('upload', 'output', 'error')),
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (owner_id, id)
);
CREATE INDEX files_uploading_idx ON files (created_at) WHERE status = 'uploading';

-- One row per line of an upload: a file is many small rows, never one value.
CREATE TABLE file_lines (
  owner_id  text    NOT NULL,
  file_id   text    NOT NULL,
  line_no   integer NOT NULL CHECK (line_no >= 1),
  custom_id text    NOT NULL,
  url       text    NOT NULL,
  route     text    NOT NULL,
  line      text    NOT NULL,
  PRIMARY KEY (owner_id, file_id, line_no)
);

CREATE TABLE batches (
  owner_id          text        NOT NULL,
  id                text        NOT NULL,
  idempotency_key   text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  fingerprint       text        NOT NULL,
  input_file_id     text        NOT NULL,
  endpoint          text        NOT NULL,
  completion_window text        NOT NULL,
  metadata          json,
  status            text        NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed', 'cancelling', 'cancelled', 'expired', 'failed')),
  line_count        integer     NOT NULL,
  lines_created     integer     NOT NULL DEFAULT 0,
  output_file_id    text,
  error_file_id     text,
  errors            json,
  created_at        timestamptz NOT NULL,
  expires_at        timestamptz NOT NULL,
  in_progress_at    timestamptz,
  finalizing_at     timestamptz,
  completed_at      timestamptz,
  failed_at         timestamptz,
  expired_at        timestamptz,
  cancelling_at     timestamptz,
  cancelled_at      timestamptz,
  finished_at       timestamptz,
  PRIMARY KEY (owner_id, id),
  CONSTRAINT batches_owner_key_unique UNIQUE (owner_id, idempotency_key),
  CONSTRAINT batches_finished_iff_terminal CHECK ((status IN ('completed', 'cancelled', 'expired', 'failed')) = (finished_at IS NOT NULL))
);
CREATE INDEX batches_owner_created_idx ON batches (owner_id, created_at DESC, id DESC);
CREATE INDEX batches_open_idx ON batches (created_at) WHERE finished_at IS NULL;
CREATE INDEX batches_finished_idx ON batches (finished_at) WHERE finished_at IS NOT NULL;

-- A batch's lines: the job each became and, once it finished, its output line.
CREATE TABLE batch_lines (
  owner_id   text    NOT NULL,
  batch_id   text    NOT NULL,
  line_no    integer NOT NULL,
  custom_id  text    NOT NULL,
  job_id     text,
  outcome    text    CHECK (outcome IN ('output', 'error')),
  output     text,
  PRIMARY KEY (owner_id, batch_id, line_no),
  CONSTRAINT batch_lines_output_iff_outcome CHECK ((outcome IS NULL) = (output IS NULL))
);
CREATE INDEX batch_lines_pending_idx ON batch_lines (owner_id, batch_id, line_no) WHERE outcome IS NULL;

-- The batch a line's job belongs to (NULL for every other job). Interactive
-- work is claimed without batch lines; batch lines by their own claim.
ALTER TABLE jobs ADD COLUMN batch_id text;
DROP INDEX jobs_queued_idx;
CREATE INDEX jobs_queued_idx ON jobs (created_at) WHERE state = 'queued' AND batch_id IS NULL;
CREATE INDEX jobs_batch_queued_idx ON jobs (created_at, id) WHERE state = 'queued' AND batch_id IS NOT NULL;
CREATE INDEX jobs_batch_idx ON jobs (owner_id, batch_id) WHERE batch_id IS NOT NULL;
