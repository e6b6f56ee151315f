-- onejob schema v7 (SQLite): the W3C trace context a job was created under.
-- Same shape as migrations/postgres/0007_trace_context.sql. See docs/tracing.md.

ALTER TABLE jobs ADD COLUMN trace_context TEXT;
