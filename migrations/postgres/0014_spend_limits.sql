-- onejob schema v14 (PostgreSQL): budgets reserved with the attempt (CONTRACT §16, docs/limits.md).
--
-- An attempt started under a spend limit carries its worst case (reserve_micros) and the limits it was
-- reserved under (NULL: that window is unlimited). spend_windows holds, per owner and UTC window (a day
-- 'YYYY-MM-DD', a month 'YYYY-MM-01'), what the owner's limited attempts started in it cost (spent_micros)
-- and what those not yet settled hold (reserved_micros). The triggers below are the only writers:
--
-- * BEFORE INSERT (the reservation): the window rows are updated by a guarded UPDATE that applies only while
--   spent + reserved + the worst case stays within the limit; the row lock makes concurrent reservations of
--   one owner queue on it (across every process), each re-checking the guard on the latest row. When a
--   window refuses, the attempt row is not inserted at all (RETURN NULL): the caller sees no attempt.
-- * AFTER UPDATE of state or cost (the settle): the attempt's charge moves in the same statement that moves
--   the attempt. An attempt holds its reserve while starting, running or unknown, and nothing after; its
--   cost counts as spent whatever its state. So every end (succeeded, failed, cancelled, superseded, a
--   resolve, a rescue, a late answer's usage) settles it, whichever code path wrote it.
-- * AFTER DELETE (retention): a deleted attempt's reserve is released (it should hold none); its cost stays
--   spent: the window's spend does not shrink when old jobs are collected.
--
-- An attempt is charged to the windows of its started_at, whenever it settles (reserved on day 1, settled on
-- day 2: day 1). A create whose first attempt is refused must create nothing: onejob_first_attempt_reserved
-- raises in the create statement (SQLSTATE OJ429), rolling the job back with it.

ALTER TABLE attempts
  ADD COLUMN reserve_micros bigint CHECK (reserve_micros >= 0),
  ADD COLUMN spend_limit_day_micros bigint CHECK (spend_limit_day_micros >= 0),
  ADD COLUMN spend_limit_month_micros bigint CHECK (spend_limit_month_micros >= 0);

CREATE TABLE spend_windows (
  owner_id        text   NOT NULL,
  period          text   NOT NULL CHECK (period IN ('day', 'month')),
  starts_on       text   NOT NULL,
  spent_micros    bigint NOT NULL DEFAULT 0,
  reserved_micros bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (owner_id, period, starts_on)
);

CREATE FUNCTION onejob_spend_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d text := to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
  m text := to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-01');
BEGIN
  INSERT INTO spend_windows (owner_id, period, starts_on) VALUES (NEW.owner_id, 'day', d), (NEW.owner_id, 'month', m)
    ON CONFLICT DO NOTHING;
  -- Day first, then month: every writer locks an owner's two rows in this order.
  UPDATE spend_windows SET reserved_micros = reserved_micros + NEW.reserve_micros
    WHERE owner_id = NEW.owner_id AND period = 'day' AND starts_on = d
      AND (NEW.spend_limit_day_micros IS NULL OR spent_micros + reserved_micros + NEW.reserve_micros <= NEW.spend_limit_day_micros);
  IF NOT FOUND THEN RETURN NULL; END IF;
  UPDATE spend_windows SET reserved_micros = reserved_micros + NEW.reserve_micros
    WHERE owner_id = NEW.owner_id AND period = 'month' AND starts_on = m
      AND (NEW.spend_limit_month_micros IS NULL OR spent_micros + reserved_micros + NEW.reserve_micros <= NEW.spend_limit_month_micros);
  IF NOT FOUND THEN
    UPDATE spend_windows SET reserved_micros = reserved_micros - NEW.reserve_micros
      WHERE owner_id = NEW.owner_id AND period = 'day' AND starts_on = d;
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$;

CREATE FUNCTION onejob_spend_settle() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  held_old bigint := CASE WHEN OLD.state IN ('starting', 'running', 'unknown') THEN OLD.reserve_micros ELSE 0 END;
  held_new bigint := CASE WHEN TG_OP = 'UPDATE' AND NEW.state IN ('starting', 'running', 'unknown') THEN NEW.reserve_micros ELSE 0 END;
  dr bigint := held_new - held_old;
  ds bigint := CASE WHEN TG_OP = 'UPDATE' THEN COALESCE(NEW.cost_micros, 0) - COALESCE(OLD.cost_micros, 0) ELSE 0 END;
BEGIN
  IF dr <> 0 OR ds <> 0 THEN
    UPDATE spend_windows SET reserved_micros = reserved_micros + dr, spent_micros = spent_micros + ds
      WHERE owner_id = OLD.owner_id AND period = 'day' AND starts_on = to_char(OLD.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
    UPDATE spend_windows SET reserved_micros = reserved_micros + dr, spent_micros = spent_micros + ds
      WHERE owner_id = OLD.owner_id AND period = 'month' AND starts_on = to_char(OLD.started_at AT TIME ZONE 'UTC', 'YYYY-MM-01');
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION onejob_first_attempt_reserved(reserved boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF NOT reserved THEN
    RAISE EXCEPTION 'budget_exceeded: the first attempt could not be reserved within the owner''s spend limit' USING ERRCODE = 'OJ429';
  END IF;
  RETURN true;
END $$;

CREATE TRIGGER attempts_spend_reserve BEFORE INSERT ON attempts
  FOR EACH ROW WHEN (NEW.reserve_micros IS NOT NULL) EXECUTE FUNCTION onejob_spend_reserve();
CREATE TRIGGER attempts_spend_settle AFTER UPDATE OF state, cost_micros ON attempts
  FOR EACH ROW WHEN (OLD.reserve_micros IS NOT NULL) EXECUTE FUNCTION onejob_spend_settle();
CREATE TRIGGER attempts_spend_release AFTER DELETE ON attempts
  FOR EACH ROW WHEN (OLD.reserve_micros IS NOT NULL AND OLD.state IN ('starting', 'running', 'unknown')) EXECUTE FUNCTION onejob_spend_settle();

-- concurrency (CONTRACT §16): an owner's attempts starting or running, counted by the database.
CREATE INDEX attempts_owner_active_idx ON attempts (owner_id) WHERE state IN ('starting', 'running');
