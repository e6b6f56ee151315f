-- onejob schema v14 (SQLite): budgets reserved with the attempt (CONTRACT §16, docs/limits.md). The same
-- shape as migrations/postgres/0014_spend_limits.sql: the triggers are the only writers of spend_windows.
-- SQLite has one writer at a time, so the reservation's check and its update cannot interleave with
-- another's. A refused reservation skips the attempt's row (RAISE(IGNORE)); the create of a job whose first
-- attempt is refused is rolled back by its script (nothing created). Windows are UTC: started_at is in ms.

ALTER TABLE attempts ADD COLUMN reserve_micros INTEGER CHECK (reserve_micros >= 0);
ALTER TABLE attempts ADD COLUMN spend_limit_day_micros INTEGER CHECK (spend_limit_day_micros >= 0);
ALTER TABLE attempts ADD COLUMN spend_limit_month_micros INTEGER CHECK (spend_limit_month_micros >= 0);

CREATE TABLE spend_windows (
  owner_id        TEXT    NOT NULL,
  period          TEXT    NOT NULL CHECK (period IN ('day', 'month')),
  starts_on       TEXT    NOT NULL,
  spent_micros    INTEGER NOT NULL DEFAULT 0,
  reserved_micros INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (owner_id, period, starts_on)
) WITHOUT ROWID;

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

CREATE TRIGGER attempts_spend_release AFTER DELETE ON attempts
  WHEN OLD.reserve_micros IS NOT NULL AND OLD.state IN ('starting', 'running', 'unknown')
BEGIN
  UPDATE spend_windows SET reserved_micros = reserved_micros - OLD.reserve_micros
  WHERE owner_id = OLD.owner_id
    AND ((period = 'day' AND starts_on = strftime('%Y-%m-%d', OLD.started_at / 1000, 'unixepoch'))
      OR (period = 'month' AND starts_on = strftime('%Y-%m-01', OLD.started_at / 1000, 'unixepoch')));
END;

CREATE INDEX attempts_owner_active_idx ON attempts (owner_id) WHERE state IN ('starting', 'running');
