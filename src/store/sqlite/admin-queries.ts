/**
 * Named SQL of the operations and admin reads (SQLite): the
 * `attempts_in_doubt` gauge and the command line's cross-owner look-ups.
 * They span owners by design (see `driver.ts`).
 */

/** attempts_unknown_idx (0004) keeps this an index-only count. */
export const ATTEMPT_COUNT_IN_DOUBT = `SELECT count(*) AS n FROM attempts WHERE state = 'unknown'`;

export const JOB_GET_ANY_OWNER = `SELECT * FROM jobs WHERE id = ? LIMIT 1`;

export const ATTEMPT_GET_ANY_OWNER = `SELECT * FROM attempts WHERE id = ? LIMIT 1`;

/** Every owner's jobs, newest first; @state and @afterCreatedAt may be NULL. */
export const JOB_LIST_ALL = `
SELECT * FROM jobs
WHERE (@state IS NULL OR state = @state)
  AND (@afterCreatedAt IS NULL OR created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))
ORDER BY created_at DESC, id DESC
LIMIT @limit`;
