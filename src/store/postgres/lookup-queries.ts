/**
 * Named SQL of the reconciler's queue (PostgreSQL, CONTRACT §11,
 * docs/reconciliation.md): `unknown` attempts whose provider can be asked,
 * leased to one asker at a time across processes (`FOR UPDATE SKIP LOCKED`,
 * the lease compared with the database's clock), asked again with backoff.
 * Cross-owner by design, like the executor's claim.
 */
import type { LookupClaimParams, LookupDeferParams } from '../driver.ts';
import type { Attempt } from '../../core/types.ts';
import { ATTEMPT_COLUMNS, attemptFromRow, type AttemptRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';

/** When an attempt in doubt is due: its next check, else `firstCheckMs` after it became unknown. */
const DUE = `COALESCE(lookup_next_at, unknown_at + $6::float8 * interval '1 millisecond', started_at)`;

export const LOOKUP_SQL = {
  claim: {
    name: 'onejob_lookup_claim',
    text: `WITH t AS (SELECT COALESCE($2::timestamptz, clock_timestamp()) AS now),
claimed AS (
  UPDATE attempts SET lookup_holder = $1, lookup_lease_expires_at = t.now + $3::float8 * interval '1 millisecond'
  FROM t
  WHERE (attempts.owner_id, attempts.id) IN (
    SELECT owner_id, id FROM attempts, t
    WHERE state = 'unknown' AND provider = ANY($4::text[]) AND ${DUE} <= t.now
      AND (lookup_lease_expires_at IS NULL OR lookup_lease_expires_at <= t.now)
    ORDER BY ${DUE}, id
    LIMIT $5
    FOR UPDATE OF attempts SKIP LOCKED)
  RETURNING attempts.*)
SELECT ${ATTEMPT_COLUMNS} FROM claimed ORDER BY ${DUE}, id`,
  },
  defer: {
    name: 'onejob_lookup_defer',
    text: `WITH t AS (SELECT COALESCE($4::timestamptz, clock_timestamp()) AS now)
UPDATE attempts SET lookup_holder = NULL, lookup_lease_expires_at = NULL, lookup_last_at = t.now,
  lookup_next_at = t.now + LEAST($6::bigint, $5::bigint * (1::bigint << LEAST(lookup_count, 20))) * interval '1 millisecond',
  lookup_count = lookup_count + 1
FROM t
WHERE owner_id = $1 AND id = $2 AND lookup_holder = $3 AND state = 'unknown'`,
  },
  oldest: {
    name: 'onejob_lookup_oldest_unknown',
    text: `SELECT min(COALESCE(unknown_at, started_at)) AS at FROM attempts WHERE state = 'unknown'`,
  },
} as const;

/** See {@link DriverQueries.attemptClaimLookups}. */
export async function attemptClaimLookups(db: Queryable, p: LookupClaimParams): Promise<Attempt[]> {
  if (p.providers.length === 0 || p.limit <= 0) return [];
  const res = await db.query<AttemptRow>({ ...LOOKUP_SQL.claim, values: [p.holder, p.now, p.leaseMs, [...p.providers], p.limit, p.firstCheckMs] });
  return res.rows.map(attemptFromRow);
}

/** See {@link DriverQueries.attemptDeferLookup}. */
export async function attemptDeferLookup(db: Queryable, p: LookupDeferParams): Promise<boolean> {
  const res = await db.query({ ...LOOKUP_SQL.defer, values: [p.ownerId, p.id, p.holder, p.now, p.backoffBaseMs, p.backoffMaxMs] });
  return res.rowCount === 1;
}

/** See {@link DriverQueries.attemptOldestUnknownAt}. */
export async function attemptOldestUnknownAt(db: Queryable): Promise<Date | null> {
  const res = await db.query<{ at: Date | null }>(LOOKUP_SQL.oldest);
  return res.rows[0]?.at ?? null;
}
