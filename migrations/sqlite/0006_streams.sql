-- onejob schema v6 (SQLite): one stream per job (CONTRACT §7). Same shape as
-- migrations/postgres/0006_streams.sql. See docs/chat-completions.md.
ALTER TABLE jobs ADD COLUMN stream_attempt_id TEXT;
