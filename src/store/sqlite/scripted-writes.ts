/**
 * The SQLite writes that are scripts (see `group-commit.ts`): the job
 * inserts, the fast path's create with its first attempt and its winning
 * settle, the stream claim and marking an attempt running.
 */
import type { DriverQueries, FirstAttemptRow, JobInsertRow, JobStreamClaimParams, MarkRunningParams, SettleWonParams } from '../driver.ts';
import * as A from './attempt-queries.ts';
import * as E from './event-queries.ts';
import * as J from './job-queries.ts';
import { json, toAttempt, toJob, type Row } from './row-mappers.ts';
import type { ScriptStep } from './sqlite-connection.ts';

/**
 * The writes that are scripts: the job insert, and the fast path's create
 * with its first attempt and winning settle (see `DriverQueries`), over
 * `script` (the group commit, or a transaction's statements).
 */
export function scriptedWrites(
  script: (steps: ScriptStep[]) => Promise<unknown[]>,
): Pick<DriverQueries, 'jobInsert' | 'jobInsertKeyless' | 'jobInsertLeased' | 'attemptSettleWon' | 'jobStreamClaim' | 'attemptMarkRunning'> {
  return {
    jobStreamClaim: async (p: JobStreamClaimParams) => {
      const now = (p.now ?? new Date()).getTime();
      const [claimed] = await script([
        { k: 'run', s: J.JOB_STREAM_CLAIM, p: [{ ownerId: p.ownerId, id: p.id, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now }] },
        { k: 'run', s: E.EVENT_INSERT, if: 0, p: [{ ownerId: p.ownerId, jobId: p.id, attemptId: p.attemptId, type: 'attempt.stream_claimed', data: '{}', at: now }] },
        { k: 'run', s: A.ATTEMPT_CLEAR_DEADLINE, if: 0, p: [{ ownerId: p.ownerId, attemptId: p.attemptId }] },
      ]);
      return claimed === 1;
    },
    attemptMarkRunning: async (p: MarkRunningParams) => {
      const now = (p.now ?? new Date()).getTime();
      const deadlineAt = p.timeoutMs === null ? null : now + p.timeoutMs;
      const [marked] = await script([
        { k: 'get', s: A.ATTEMPT_MARK_RUNNING, p: [{ ownerId: p.ownerId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now, deadlineAt }] },
        {
          k: 'run', s: A.ATTEMPT_RUNNING_EVENT, if: 0,
          p: [{ ownerId: p.ownerId, attemptId: p.attemptId, data: json({ deadline_at: deadlineAt === null ? null : new Date(deadlineAt).toISOString() }), at: now }],
        },
      ]);
      return Boolean(marked);
    },
    jobInsert: async (r: JobInsertRow) => {
      const [job] = await script([{ k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'queued')] }]);
      return job ? toJob(job as Row) : null;
    },
    jobInsertKeyless: async (r) => {
      const [job] = await script([{ k: 'get', s: J.JOB_INSERT_KEYLESS, p: [{ ...jobInsertParams(r, 'queued'), keylessFingerprint: r.keylessFingerprint }] }]);
      return job ? toJob(job as Row) : null;
    },
    jobInsertLeased: async (r: JobInsertRow, a: FirstAttemptRow) => {
      const now = (a.now ?? new Date()).getTime();
      const [job, attempt] = await script([
        { k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'running')] },
        {
          k: 'get', s: A.ATTEMPT_INSERT_RETURNING, if: 0,
          p: [{
            ownerId: r.ownerId, id: a.id, jobId: r.id, number: 1, provider: a.provider, kind: 'first', state: 'starting', baseVersion: 0,
            startedAt: now, deadlineAt: null, leaseOwner: a.leaseOwner, leaseToken: a.leaseToken, leaseExpiresAt: now + a.leaseMs,
          }],
        },
        {
          k: 'run', s: E.EVENT_INSERT, if: 1,
          p: [{ ownerId: r.ownerId, jobId: r.id, attemptId: a.id, type: 'attempt.started', data: json({ number: 1, provider: a.provider, kind: 'first', lease_owner: a.leaseOwner }), at: now }],
        },
      ]);
      return job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null;
    },
    attemptSettleWon: async (p: SettleWonParams) => {
      const now = (p.now ?? new Date()).getTime();
      const withUsage = p.usage !== undefined;
      const event = (type: string) => [{ ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, type, data: json({ actor: p.actor }), at: now }];
      const [attempt, job] = await script([
        {
          k: 'get', s: A.ATTEMPT_SETTLE_WON,
          p: [{
            ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now,
            withUsage: withUsage ? 1 : 0, promptTokens: p.usage?.promptTokens ?? null, completionTokens: p.usage?.completionTokens ?? null,
            totalTokens: p.usage?.totalTokens ?? null, costMicros: withUsage ? (p.costMicros ?? null) : null,
            providerRequestId: p.providerRequestId ?? null,
          }],
        },
        { k: 'get', s: J.JOB_SETTLE_WON, if: 0, p: [{ ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, result: json(p.result), now }] },
        { k: 'each', s: E.EVENT_INSERT, if: 1, p: [event('attempt.succeeded'), event('job.succeeded')] },
      ]);
      return job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null;
    },
  };
}

export function jobInsertParams(r: JobInsertRow, state: 'queued' | 'running'): Record<string, unknown> {
  return {
    ownerId: r.ownerId, id: r.id, idempotencyKey: r.idempotencyKey, fingerprint: r.fingerprint, route: r.route,
    input: json(r.input), metadata: r.metadata === null ? null : json(r.metadata), providers: json(r.providers), createdAt: r.createdAt.getTime(),
    traceContext: r.traceContext ?? null, state, attemptCount: state === 'running' ? 1 : 0,
  };
}
