-- onejob schema v7 (PostgreSQL): the W3C trace context a job was created
-- under (`traceparent`, optionally `;tracestate`), so the executor in another
-- process and duplicate requests join the intent's one trace. Nullable: jobs
-- created without tracing, and every older row, have none. See docs/tracing.md.

ALTER TABLE jobs ADD COLUMN trace_context text;
