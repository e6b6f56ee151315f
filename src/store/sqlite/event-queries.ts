/** Named SQL for the `job_events` table (SQLite). */

export const EVENT_INSERT = `
INSERT INTO job_events (owner_id, job_id, attempt_id, type, data, at) VALUES (@ownerId, @jobId, @attemptId, @type, @data, @at)`;

export const EVENT_LIST = `SELECT * FROM job_events WHERE owner_id = ? AND job_id = ? ORDER BY id`;

export const EVENT_LIST_ALL = `SELECT * FROM job_events WHERE id > ? ORDER BY id LIMIT ?`;
