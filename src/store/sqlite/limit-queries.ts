/** Named SQL of budgets and limits (SQLite, CONTRACT §16): an owner's use now (see `../postgres/limit-queries.ts`). */

export const OWNER_USE = `
SELECT
  (SELECT spent_micros FROM spend_windows WHERE owner_id = @ownerId AND period = 'day' AND starts_on = @day) AS day_spent,
  (SELECT reserved_micros FROM spend_windows WHERE owner_id = @ownerId AND period = 'day' AND starts_on = @day) AS day_reserved,
  (SELECT spent_micros FROM spend_windows WHERE owner_id = @ownerId AND period = 'month' AND starts_on = @month) AS month_spent,
  (SELECT reserved_micros FROM spend_windows WHERE owner_id = @ownerId AND period = 'month' AND starts_on = @month) AS month_reserved,
  (SELECT count(*) FROM attempts WHERE owner_id = @ownerId AND state IN ('starting', 'running')) AS in_flight,
  (SELECT count(*) FROM jobs WHERE owner_id = @ownerId AND created_at > @createdSince) AS created_since,
  (SELECT min(created_at) FROM jobs WHERE owner_id = @ownerId AND created_at > @createdSince) AS oldest_created`;
