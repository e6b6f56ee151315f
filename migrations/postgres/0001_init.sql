-- onejob schema v1 (PostgreSQL). Forward-only; see docs/store.md.
-- Every table carries owner_id and every key starts with it, so the schema can be
-- distributed by owner (Citus: distribution column in every unique constraint,
-- attempts and events co-located with their job).

CREATE TABLE jobs (
  owner_id        text        NOT NULL,
  id              text        NOT NULL,
  idempotency_key text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  fingerprint     text        NOT NULL,
  route           text        NOT NULL,
  input           json        NOT NULL,
  metadata        json,
  providers       json        NOT NULL,
  state           text        NOT NULL CHECK (state IN ('queued', 'running', 'unknown', 'succeeded', 'failed', 'cancelled')),
  -- Bumped only when the outcome is decided; the completion compare-and-swap reads it.
  version         bigint      NOT NULL DEFAULT 0,
  attempt_count   integer     NOT NULL DEFAULT 0,
  completed_by    text,
  result          json,
  error           json,
  skipped         json        NOT NULL DEFAULT '[]',
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  finished_at     timestamptz,
  PRIMARY KEY (owner_id, id),
  CONSTRAINT jobs_owner_key_unique UNIQUE (owner_id, idempotency_key),
  CONSTRAINT jobs_finished_iff_terminal CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
  CONSTRAINT jobs_winner_only_when_succeeded CHECK ((completed_by IS NOT NULL) = (state = 'succeeded'))
);
CREATE INDEX jobs_owner_created_idx ON jobs (owner_id, created_at DESC, id DESC);
CREATE INDEX jobs_queued_idx ON jobs (created_at) WHERE state = 'queued';

CREATE TABLE attempts (
  owner_id         text        NOT NULL,
  id               text        NOT NULL,
  job_id           text        NOT NULL,
  number           integer     NOT NULL CHECK (number >= 1),
  provider         text        NOT NULL,
  kind             text        NOT NULL CHECK (kind IN ('first', 'failover', 'hedge', 'manual')),
  state            text        NOT NULL CHECK (state IN ('starting', 'running', 'succeeded', 'failed', 'cancelled', 'unknown', 'superseded')),
  base_version     bigint      NOT NULL,
  started_at       timestamptz NOT NULL,
  deadline_at      timestamptz,
  finished_at      timestamptz,
  error            json,
  lease_owner      text,
  lease_token      text,
  lease_expires_at timestamptz,
  PRIMARY KEY (owner_id, id),
  CONSTRAINT attempts_job_number_unique UNIQUE (owner_id, job_id, number),
  CONSTRAINT attempts_job_fk FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id),
  CONSTRAINT attempts_finished_iff_terminal CHECK ((state IN ('succeeded', 'failed', 'cancelled', 'superseded')) = (finished_at IS NOT NULL)),
  CONSTRAINT attempts_lease_complete CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);
CREATE INDEX attempts_claimable_idx ON attempts (started_at) WHERE state = 'starting' AND lease_owner IS NULL;
CREATE INDEX attempts_leased_idx ON attempts (lease_expires_at) WHERE lease_owner IS NOT NULL;

-- Append-only log of transitions and races.
CREATE TABLE job_events (
  owner_id   text        NOT NULL,
  id         bigserial,
  job_id     text        NOT NULL,
  attempt_id text,
  type       text        NOT NULL,
  data       json        NOT NULL DEFAULT '{}',
  at         timestamptz NOT NULL,
  PRIMARY KEY (owner_id, id)
);
CREATE INDEX job_events_job_idx ON job_events (owner_id, job_id, id);
-- Tailing the whole log (checkers) reads by id alone.
CREATE INDEX job_events_id_idx ON job_events (id);
