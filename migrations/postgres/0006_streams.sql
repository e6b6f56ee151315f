-- onejob schema v6 (PostgreSQL): one stream per job (CONTRACT §7).
-- stream_attempt_id is the attempt that claimed the job's stream at its first
-- output, by compare-and-swap (jobStreamClaim). While it names an attempt that
-- has not ended definitely, no other attempt may claim the stream or win the
-- job (the completion compare-and-swap checks it too). See docs/chat-completions.md.
ALTER TABLE jobs ADD COLUMN stream_attempt_id TEXT;
