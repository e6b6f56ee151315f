-- onejob schema: usage and cost of every attempt (CONTRACT §8). Forward-only.
-- Token counts as the provider reported them (NULL: none came back) and the
-- cost in integer micro-dollars (1e-6 USD; NULL: unpriced), so totals are sums
-- of integers with no float drift. See docs/usage.md.

ALTER TABLE attempts
  ADD COLUMN prompt_tokens     bigint CHECK (prompt_tokens >= 0),
  ADD COLUMN completion_tokens bigint CHECK (completion_tokens >= 0),
  ADD COLUMN total_tokens      bigint CHECK (total_tokens >= 0),
  ADD COLUMN cost_micros       bigint CHECK (cost_micros >= 0),
  ADD CONSTRAINT attempts_usage_complete CHECK ((prompt_tokens IS NULL) = (completion_tokens IS NULL) AND (prompt_tokens IS NULL) = (total_tokens IS NULL)),
  ADD CONSTRAINT attempts_cost_needs_usage CHECK (cost_micros IS NULL OR prompt_tokens IS NOT NULL);

-- GET /v1/usage and the dashboard's spend: one owner's attempts by start time.
CREATE INDEX attempts_owner_started_idx ON attempts (owner_id, started_at);
