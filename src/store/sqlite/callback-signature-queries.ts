/**
 * Named SQL of used callback signatures (SQLite, CONTRACT §15): a v4
 * signature is accepted once. Timestamps are epoch milliseconds. See
 * migrations/sqlite/0012_callback_signatures.sql.
 */

/** The database's now, in epoch milliseconds. */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;

/** A bounded batch of signatures whose window has passed. */
export const CALLBACK_SIGNATURES_DELETE_EXPIRED = `
DELETE FROM callback_signatures WHERE signature IN (
  SELECT signature FROM callback_signatures WHERE expires_at < COALESCE(@now, ${NOW_MS}) ORDER BY expires_at LIMIT 100)`;

/** Records the signature unless it is there already (no row returned then). */
export const CALLBACK_SIGNATURE_INSERT = `
INSERT INTO callback_signatures (signature, attempt_id, expires_at) VALUES (@signature, @attemptId, @expiresAt)
ON CONFLICT (signature) DO NOTHING
RETURNING signature`;
