-- onejob schema v3 (SQLite): no attempt runs without an owner. Same rule as
-- migrations/postgres/0003_hardening.sql; SQLite cannot add a CHECK to an
-- existing table, so two triggers refuse the state instead (the error reads
-- "CHECK constraint failed: attempts_running_has_lease" as a CHECK would).

INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
SELECT owner_id, job_id, id, 'attempt.unknown',
       '{"reason":{"code":"lease_expired","message":"running without an owner when migration 0003 ran"}}',
       CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
FROM attempts WHERE state = 'running' AND lease_owner IS NULL;

UPDATE attempts
SET state = 'unknown', error = '{"code":"lease_expired","message":"running without an owner when migration 0003 ran"}'
WHERE state = 'running' AND lease_owner IS NULL;

UPDATE jobs SET state = 'unknown', updated_at = CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
WHERE state = 'running'
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = jobs.owner_id AND a.job_id = jobs.id AND a.state IN ('starting', 'running'))
  AND EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = jobs.owner_id AND a.job_id = jobs.id AND a.state = 'unknown');

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

CREATE INDEX attempts_orphan_idx ON attempts (started_at) WHERE state = 'running' AND lease_owner IS NULL;
