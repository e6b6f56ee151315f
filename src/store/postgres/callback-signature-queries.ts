/**
 * Named SQL of used callback signatures (PostgreSQL, CONTRACT §15): a v4
 * signature is accepted once. See migrations/postgres/0012_callback_signatures.sql.
 */
import type { CallbackSignatureUseParams } from '../driver.ts';
import type { Queryable } from './queryable.ts';

/** The statements of this file, by name. */
export const CALLBACK_SIGNATURE_SQL = {
  /** Records the signature unless it is there already; deletes a bounded batch of expired ones in the same statement. */
  use: {
    name: 'onejob_callback_signature_use',
    text: `WITH expired AS (
  DELETE FROM callback_signatures WHERE signature IN (
    SELECT signature FROM callback_signatures WHERE expires_at < COALESCE($4::timestamptz, now())
    ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)
)
INSERT INTO callback_signatures (signature, attempt_id, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (signature) DO NOTHING
RETURNING signature`,
  },
} as const;

/** See {@link DriverQueries.callbackSignatureUse}. */
export async function callbackSignatureUse(db: Queryable, p: CallbackSignatureUseParams): Promise<boolean> {
  const res = await db.query({ ...CALLBACK_SIGNATURE_SQL.use, values: [p.signature, p.attemptId, p.expiresAt, p.now] });
  return res.rowCount === 1;
}
