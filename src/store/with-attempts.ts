/**
 * A page of one owner's jobs with their attempts, read in one statement for
 * the whole page (`GET /v1/jobs`, the dashboard's search).
 */
import type { Attempt, Job, JobWithAttempts } from '../core/types.ts';
import type { DriverQueries } from './driver.ts';

export async function withAttempts(q: DriverQueries, ownerId: string, page: readonly Job[]): Promise<JobWithAttempts[]> {
  const attempts = page.length === 0 ? [] : await q.attemptListByJobs(ownerId, page.map((j) => j.id));
  const byJob = new Map<string, Attempt[]>();
  for (const a of attempts) {
    const list = byJob.get(a.jobId);
    if (list) list.push(a);
    else byJob.set(a.jobId, [a]);
  }
  return page.map((j) => ({ ...j, attempts: byJob.get(j.id) ?? [] }));
}
