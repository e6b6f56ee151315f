/**
 * Named SQL of the reconciler's queue (SQLite, CONTRACT §11): see
 * `postgres/lookup-queries.ts`. One writer at a time, so the lease is a plain
 * guarded UPDATE; timestamps are integer milliseconds.
 */

/** The database's clock, unless a stand-in is given (tests). */
const NOW = `COALESCE(@now, CAST(round(unixepoch('subsec') * 1000) AS INTEGER))`;

/** When an attempt in doubt is due: its next check, else `firstCheckMs` after it became unknown. */
const DUE = `COALESCE(lookup_next_at, unknown_at + @firstCheckMs, started_at)`;

export const LOOKUP_CLAIM = `
UPDATE attempts SET lookup_holder = @holder, lookup_lease_expires_at = ${NOW} + @leaseMs
WHERE (owner_id, id) IN (
  SELECT owner_id, id FROM attempts
  WHERE state = 'unknown' AND provider IN (SELECT value FROM json_each(@providers)) AND ${DUE} <= ${NOW}
    AND (lookup_lease_expires_at IS NULL OR lookup_lease_expires_at <= ${NOW})
  ORDER BY ${DUE}, id
  LIMIT @limit)
RETURNING *`;

export const LOOKUP_DEFER = `
UPDATE attempts SET lookup_holder = NULL, lookup_lease_expires_at = NULL, lookup_last_at = ${NOW},
  lookup_next_at = ${NOW} + MIN(@backoffMaxMs, @backoffBaseMs * (1 << MIN(lookup_count, 20))),
  lookup_count = lookup_count + 1
WHERE owner_id = @ownerId AND id = @id AND lookup_holder = @holder AND state = 'unknown'`;

export const LOOKUP_OLDEST_UNKNOWN = `SELECT min(COALESCE(unknown_at, started_at)) AS at FROM attempts WHERE state = 'unknown'`;
