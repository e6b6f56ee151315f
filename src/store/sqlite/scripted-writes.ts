/**
 * The SQLite writes that are scripts (see `group-commit.ts`): the job
 * inserts, the fast path's create with its first attempt and its winning
 * settle, the stream claim and marking an attempt running.
 *
 * Each is a {@link ScriptPlan}: the steps to run and how to read their
 * results, so the same write runs alone (inside a transaction, or a batch of
 * one) or as one script among many of a group-commit batch.
 */
import type { DriverQueries, FirstAttemptRow, JobInsertRow, JobStreamClaimParams, MarkRunningParams, SettleWonParams } from '../driver.ts';
import * as A from './attempt-queries.ts';
import * as E from './event-queries.ts';
import * as J from './job-queries.ts';
import { json, toAttempt, toJob, type Row } from './row-mappers.ts';
import type { ScriptStep } from './sqlite-connection.ts';
import type { SpendReservation } from '../../core/limits.ts';
import { budgetRefused } from '../spend-refusal.ts';

/** The writes that are scripts. */
export type ScriptedMethod = 'jobInsert' | 'jobInsertKeyless' | 'jobInsertLeased' | 'attemptSettleWon' | 'jobStreamClaim' | 'attemptMarkRunning';

/** A write as a script: its steps, and its answer from their results. */
export interface ScriptPlan<R> {
  readonly steps: ScriptStep[];
  readonly read: (results: unknown[]) => R;
}

type Plans = {
  readonly [M in ScriptedMethod]: (...args: Parameters<DriverQueries[M]>) => ScriptPlan<Awaited<ReturnType<DriverQueries[M]>>>;
};

/** Every scripted write's plan. */
export const SCRIPT_PLANS: Plans = {
  jobStreamClaim: (p: JobStreamClaimParams) => {
    const now = (p.now ?? new Date()).getTime();
    return {
      steps: [
        { k: 'run', s: J.JOB_STREAM_CLAIM, p: [{ ownerId: p.ownerId, id: p.id, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now }] },
        { k: 'run', s: E.EVENT_INSERT, if: 0, p: [{ ownerId: p.ownerId, jobId: p.id, attemptId: p.attemptId, type: 'attempt.stream_claimed', data: '{}', at: now }] },
        { k: 'run', s: A.ATTEMPT_CLEAR_DEADLINE, if: 0, p: [{ ownerId: p.ownerId, attemptId: p.attemptId }] },
      ],
      read: ([claimed]) => claimed === 1,
    };
  },
  attemptMarkRunning: (p: MarkRunningParams) => {
    const now = (p.now ?? new Date()).getTime();
    const deadlineAt = p.timeoutMs === null ? null : now + p.timeoutMs;
    return {
      steps: [
        { k: 'get', s: A.ATTEMPT_MARK_RUNNING, p: [{ ownerId: p.ownerId, attemptId: p.attemptId, leaseOwner: p.leaseOwner, leaseToken: p.leaseToken, now, deadlineAt }] },
        {
          k: 'run', s: A.ATTEMPT_RUNNING_EVENT, if: 0,
          p: [{ ownerId: p.ownerId, attemptId: p.attemptId, data: json({ deadline_at: deadlineAt === null ? null : new Date(deadlineAt).toISOString() }), at: now }],
        },
      ],
      read: ([marked]) => Boolean(marked),
    };
  },
  jobInsert: (r: JobInsertRow) => ({
    steps: [{ k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'queued')] }],
    read: ([job]) => (job ? toJob(job as Row) : null),
  }),
  jobInsertKeyless: (r) => ({
    steps: [{ k: 'get', s: J.JOB_INSERT_KEYLESS, p: [{ ...jobInsertParams(r, 'queued'), keylessFingerprint: r.keylessFingerprint }] }],
    read: ([job]) => (job ? toJob(job as Row) : null),
  }),
  jobInsertLeased: (r: JobInsertRow, a: FirstAttemptRow) => {
    const now = (a.now ?? new Date()).getTime();
    return {
      steps: [
        { k: 'get', s: J.JOB_INSERT, p: [jobInsertParams(r, 'running')] },
        {
          k: 'get', s: A.ATTEMPT_INSERT_RETURNING, if: 0,
          p: [{
            ownerId: r.ownerId, id: a.id, jobId: r.id, number: 1, provider: a.provider, kind: 'first', state: 'starting', baseVersion: 0,
            startedAt: now, deadlineAt: null, leaseOwner: a.leaseOwner, leaseToken: a.leaseToken, leaseExpiresAt: a.leaseMs === null ? null : now + a.leaseMs,
            ...reserveParams(a.reserve),
          }],
        },
        {
          k: 'run', s: E.EVENT_INSERT, if: 1,
          p: [{ ownerId: r.ownerId, jobId: r.id, attemptId: a.id, type: 'attempt.started', data: json({ number: 1, provider: a.provider, kind: 'first', lease_owner: a.leaseOwner }), at: now }],
        },
        // The reservation refused the attempt (CONTRACT §16): the job is taken back in this script, nothing created.
        { k: 'run', s: A.JOB_DELETE_UNRESERVED, if: 0, p: [{ ownerId: r.ownerId, id: r.id }] },
      ],
      read: ([job, attempt]) => {
        if (job && !attempt) throw budgetRefused();
        return job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null;
      },
    };
  },
  attemptSettleWon: (p: SettleWonParams) => {
    const now = (p.now ?? new Date()).getTime();
    const withUsage = p.usage !== undefined;
    const event = (type: string) => [{ ownerId: p.ownerId, jobId: p.jobId, attemptId: p.attemptId, type, data: json({ actor: p.actor }), at: now }];
    return {
      steps: [
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
      ],
      read: ([attempt, job]) => (job && attempt ? { job: toJob(job as Row), attempt: toAttempt(attempt as Row) } : null),
    };
  },
};

/** The scripted writes over `script` (one script alone, or a transaction's statements in order). */
export function scriptedWrites(script: (steps: ScriptStep[]) => Promise<unknown[]>): Pick<DriverQueries, ScriptedMethod> {
  const bind = <M extends ScriptedMethod>(m: M) =>
    (async (...args: unknown[]) => {
      const plan = (SCRIPT_PLANS[m] as (...a: unknown[]) => ScriptPlan<unknown>)(...args);
      return plan.read(await script(plan.steps));
    }) as unknown as DriverQueries[M];
  return {
    jobInsert: bind('jobInsert'),
    jobInsertKeyless: bind('jobInsertKeyless'),
    jobInsertLeased: bind('jobInsertLeased'),
    attemptSettleWon: bind('attemptSettleWon'),
    jobStreamClaim: bind('jobStreamClaim'),
    attemptMarkRunning: bind('attemptMarkRunning'),
  };
}

/** The reservation's columns of an attempt insert (null: nothing reserved). */
export function reserveParams(r: SpendReservation | null | undefined): { reserveMicros: number | null; spendLimitDayMicros: number | null; spendLimitMonthMicros: number | null } {
  return { reserveMicros: r?.micros ?? null, spendLimitDayMicros: r?.dayLimitMicros ?? null, spendLimitMonthMicros: r?.monthLimitMicros ?? null };
}

export function jobInsertParams(r: JobInsertRow, state: 'queued' | 'running'): Record<string, unknown> {
  return {
    ownerId: r.ownerId, id: r.id, idempotencyKey: r.idempotencyKey, fingerprint: r.fingerprint, route: r.route,
    input: json(r.input), metadata: r.metadata === null ? null : json(r.metadata), providers: json(r.providers), createdAt: r.createdAt.getTime(),
    traceContext: r.traceContext ?? null, state, attemptCount: state === 'running' ? 1 : 0,
  };
}
