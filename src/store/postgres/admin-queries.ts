/**
 * Named SQL of the operations and admin reads (PostgreSQL): the
 * `attempts_in_doubt` gauge and the command line's cross-owner look-ups.
 * They span owners by design (see `driver.ts`).
 */
import type { JobListParams } from '../driver.ts';
import type { Attempt, Job } from '../../core/types.ts';
import { ATTEMPT_COLUMNS, JOB_COLUMNS, attemptFromRow, jobFromRow, type AttemptRow, type JobRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';

/** The fixed statements of this file, by name. */
export const ADMIN_SQL = {
  // attempts_unknown_idx (0004) keeps this an index-only count.
  countInDoubt: { name: 'onejob_attempt_count_in_doubt', text: `SELECT count(*)::int AS n FROM attempts WHERE state = 'unknown'` },
  jobGetAnyOwner: { name: 'onejob_job_get_any_owner', text: `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = $1 LIMIT 1` },
  attemptGetAnyOwner: { name: 'onejob_attempt_get_any_owner', text: `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE id = $1 LIMIT 1` },
} as const;

/** See {@link DriverQueries.attemptCountInDoubt}. */
export async function attemptCountInDoubt(db: Queryable): Promise<number> {
  const res = await db.query<{ n: number }>({ ...ADMIN_SQL.countInDoubt, values: [] });
  return res.rows[0]?.n ?? 0;
}

/** See {@link DriverQueries.jobGetAnyOwner}. */
export async function jobGetAnyOwner(db: Queryable, id: string): Promise<Job | null> {
  const res = await db.query<JobRow>({ ...ADMIN_SQL.jobGetAnyOwner, values: [id] });
  const r = res.rows[0];
  return r ? jobFromRow(r) : null;
}

/** See {@link DriverQueries.attemptGetAnyOwner}. */
export async function attemptGetAnyOwner(db: Queryable, id: string): Promise<Attempt | null> {
  const res = await db.query<AttemptRow>({ ...ADMIN_SQL.attemptGetAnyOwner, values: [id] });
  const r = res.rows[0];
  return r ? attemptFromRow(r) : null;
}

/** See {@link DriverQueries.jobListAll}: every owner's jobs, newest first. */
export async function jobListAll(db: Queryable, p: Omit<JobListParams, 'ownerId'>): Promise<Job[]> {
  const where: string[] = [];
  const values: unknown[] = [p.limit];
  if (p.state !== undefined) {
    values.push(p.state);
    where.push(`state = $${values.length}`);
  }
  if (p.after !== undefined) {
    values.push(p.after.createdAt, p.after.id);
    where.push(`(created_at, id) < ($${values.length - 1}, $${values.length})`);
  }
  const res = await db.query<JobRow>({
    text: `SELECT ${JOB_COLUMNS} FROM jobs ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT $1`,
    values,
  });
  return res.rows.map(jobFromRow);
}
