-- onejob schema v3 (PostgreSQL): no attempt runs without an owner.
-- A `running` attempt always holds a lease (its executor's); a lease is given
-- up only by settling the attempt or after it became `unknown`. Before this
-- migration a failed "mark unknown" followed by a lease release could leave a
-- running attempt nobody owned: those are moved to `unknown` here (never
-- failed: the request may have been executed), their jobs with them, and the
-- state is refused from now on.

INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at)
SELECT owner_id, job_id, id, 'attempt.unknown',
       '{"reason":{"code":"lease_expired","message":"running without an owner when migration 0003 ran"}}', now()
FROM attempts WHERE state = 'running' AND lease_owner IS NULL;

UPDATE attempts
SET state = 'unknown', error = '{"code":"lease_expired","message":"running without an owner when migration 0003 ran"}'
WHERE state = 'running' AND lease_owner IS NULL;

UPDATE jobs j SET state = 'unknown', updated_at = now()
WHERE j.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.state IN ('starting', 'running'))
  AND EXISTS (SELECT 1 FROM attempts a WHERE a.owner_id = j.owner_id AND a.job_id = j.id AND a.state = 'unknown');

ALTER TABLE attempts ADD CONSTRAINT attempts_running_has_lease CHECK (state <> 'running' OR lease_owner IS NOT NULL);

-- The rescuer's second look (running without a lease) stays an index probe of an empty set.
CREATE INDEX attempts_orphan_idx ON attempts (started_at) WHERE state = 'running' AND lease_owner IS NULL;
