-- onejob schema: usage and cost of every attempt (CONTRACT §8). Same shape as
-- migrations/postgres/0005_usage.sql: token counts (NULL: none came back) and
-- the cost in integer micro-dollars (NULL: unpriced). SQLite cannot add a
-- table constraint to an existing table, so the pairing checks live on the
-- columns.

ALTER TABLE attempts ADD COLUMN prompt_tokens INTEGER CHECK (prompt_tokens >= 0);
ALTER TABLE attempts ADD COLUMN completion_tokens INTEGER CHECK (completion_tokens >= 0 AND (completion_tokens IS NULL) = (prompt_tokens IS NULL));
ALTER TABLE attempts ADD COLUMN total_tokens INTEGER CHECK (total_tokens >= 0 AND (total_tokens IS NULL) = (prompt_tokens IS NULL));
ALTER TABLE attempts ADD COLUMN cost_micros INTEGER CHECK (cost_micros >= 0 AND (cost_micros IS NULL OR prompt_tokens IS NOT NULL));

-- GET /v1/usage and the dashboard's spend: one owner's attempts by start time.
CREATE INDEX attempts_owner_started_idx ON attempts (owner_id, started_at);
