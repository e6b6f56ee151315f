-- onejob schema v8 (PostgreSQL): job state changes are announced to every
-- process (docs/performance.md, "the fast path"). A committed change of
-- jobs.state sends NOTIFY onejob_job '["<owner>", "<job id>", "<state>"]'
-- (delivered at commit, never for a rolled-back change). Waiters in other
-- processes read that one job once; executors stop their attempts of a job
-- decided elsewhere at once instead of at their next heartbeat.
CREATE FUNCTION onejob_job_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('onejob_job', json_build_array(NEW.owner_id, NEW.id, NEW.state)::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_state_notify AFTER UPDATE OF state ON jobs
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION onejob_job_notify();
