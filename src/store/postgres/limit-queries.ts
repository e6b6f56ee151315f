/**
 * Named SQL of budgets and limits (PostgreSQL, CONTRACT §16): an owner's
 * use now. The reservations themselves are made and settled by the
 * triggers of migration 0014 (docs/limits.md).
 */
import type { OwnerUse, OwnerUseParams } from '../driver.ts';
import type { Queryable } from './queryable.ts';

export const LIMIT_SQL = {
  ownerUse: {
    name: 'onejob_owner_use',
    text: `SELECT
  (SELECT spent_micros FROM spend_windows WHERE owner_id = $1 AND period = 'day' AND starts_on = $2) AS day_spent,
  (SELECT reserved_micros FROM spend_windows WHERE owner_id = $1 AND period = 'day' AND starts_on = $2) AS day_reserved,
  (SELECT spent_micros FROM spend_windows WHERE owner_id = $1 AND period = 'month' AND starts_on = $3) AS month_spent,
  (SELECT reserved_micros FROM spend_windows WHERE owner_id = $1 AND period = 'month' AND starts_on = $3) AS month_reserved,
  (SELECT count(*) FROM attempts WHERE owner_id = $1 AND state IN ('starting', 'running'))::int AS in_flight,
  (SELECT count(*) FROM jobs WHERE owner_id = $1 AND created_at > $4)::int AS created_since,
  (SELECT min(created_at) FROM jobs WHERE owner_id = $1 AND created_at > $4) AS oldest_created`,
  },
} as const;

/** See {@link DriverQueries.ownerUse}. */
export async function ownerUse(db: Queryable, p: OwnerUseParams): Promise<OwnerUse> {
  const res = await db.query<Record<string, string | number | Date | null>>({ ...LIMIT_SQL.ownerUse, values: [p.ownerId, p.day, p.month, p.createdSince] });
  const r = res.rows[0]!;
  const n = (v: string | number | Date | null | undefined): number => (v === null || v === undefined ? 0 : Number(v));
  return {
    day: { spentMicros: n(r.day_spent), reservedMicros: n(r.day_reserved) },
    month: { spentMicros: n(r.month_spent), reservedMicros: n(r.month_reserved) },
    inFlight: n(r.in_flight),
    createdSince: n(r.created_since),
    oldestCreatedAt: r.oldest_created === null || r.oldest_created === undefined ? null : new Date(r.oldest_created as Date),
  };
}
