-- onejob schema v8 (SQLite): nothing to change. PostgreSQL announces job
-- state changes to other processes (NOTIFY onejob_job); SQLite has no such
-- signal, so waiters in other processes rely on their periodic re-check
-- (one batched read of the states of every job they wait on).
SELECT 1;
