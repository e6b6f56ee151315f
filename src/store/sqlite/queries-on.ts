/**
 * The SQLite driver's {@link DriverQueries}: the named statements of the
 * `*-queries.ts` files over one way of running a statement (`exec`:
 * autocommit, or one transaction's) and one way of running a script
 * (`script`: one autocommit script alone, or a transaction's statements in
 * order; the group commit of the autocommit ones sits above, `../batched-queries.ts`).
 */
import { reserveParams } from './scripted-writes.ts';
import type { JobState } from '../../core/states.ts';
import type {
  AttemptClaimParams, AttemptInsertRow, AttemptUpdateParams, DriverQueries, EventInsertRow,
  JobFinishParams, JobListParams, JobProgressParams, LeaseExtendParams, LookupClaimParams, LookupDeferParams,
} from '../driver.ts';
import * as AD from './admin-queries.ts';
import * as A from './attempt-queries.ts';
import { sqliteBatchQueries } from './batch-queries.ts';
import * as C from './certification-queries.ts';
import * as CS from './callback-signature-queries.ts';
import * as E from './event-queries.ts';
import * as J from './job-queries.ts';
import * as L from './lookup-queries.ts';
import { OWNER_USE } from './limit-queries.ts';
import * as R from './retention-queries.ts';
import { date, json, mapOne, ms, toAttempt, toEvent, toJob, type Row } from './row-mappers.ts';
import { scriptedWrites } from './scripted-writes.ts';
import type { Kind, ScriptStep } from './sqlite-connection.ts';
import * as S from './stream-queries.ts';

/** The named queries over `exec` (autocommit, or one transaction's), the writes that are scripts over `script`. */
export function queriesOn(exec: (k: Kind, sql: string, args: unknown[]) => Promise<unknown>, script: (steps: ScriptStep[]) => Promise<unknown[]>): DriverQueries {
  const get = (sql: string, ...args: unknown[]) => exec('get', sql, args) as Promise<Row | undefined>;
  const all = (sql: string, ...args: unknown[]) => exec('all', sql, args) as Promise<Row[]>;
  const run = (sql: string, ...args: unknown[]) => exec('run', sql, args) as Promise<number>;
  return {
    ...sqliteBatchQueries(get, all, run),
    dbNow: async () => new Date(Number((await get(J.DB_NOW))!.now)),
    ...scriptedWrites(script),
    jobStates: async (refs) =>
      refs.length === 0 ? [] : (await all(J.JOB_STATES, { refs: json(refs.map((r) => [r.ownerId, r.jobId])) })).map((r) => ({ id: String(r.id), state: r.state as JobState })),
    jobGetByKey: async (ownerId, key) => mapOne(await get(J.JOB_GET_BY_KEY, ownerId, key), toJob),
    jobGetByKeylessFingerprint: async (p) =>
      mapOne(await get(J.JOB_GET_BY_KEYLESS_FINGERPRINT, { ownerId: p.ownerId, fingerprint: p.fingerprint, windowMs: p.windowMs, now: ms(p.now) }), toJob),
    jobGet: async (ownerId, id) => mapOne(await get(J.JOB_GET, ownerId, id), toJob),
    jobList: async (p: JobListParams) =>
      (await all(J.JOB_LIST, {
        ownerId: p.ownerId, state: p.state ?? null, limit: p.limit,
        afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null,
      })).map(toJob),
    jobUpdateProgress: async (p: JobProgressParams) =>
      (await run(J.JOB_UPDATE_PROGRESS, { ownerId: p.ownerId, id: p.id, state: p.state, attemptCount: p.attemptCount, skipped: json(p.skipped), updatedAt: p.updatedAt.getTime() })) === 1,
    jobFinish: async (p: JobFinishParams) =>
      (await run(J.JOB_FINISH, {
        ownerId: p.ownerId, id: p.id, expectedVersion: p.expectedVersion, state: p.state, completedBy: p.completedBy,
        result: json(p.result), error: p.error === null ? null : json(p.error), skipped: json(p.skipped), now: p.now.getTime(),
      })) === 1,
    jobStreamOwner: async (ownerId, id) => ((await get(J.JOB_STREAM_OWNER, ownerId, id))?.stream_attempt_id as string | null | undefined) ?? null,
    streamBatchInsert: async (r) => void (await run(S.STREAM_BATCH_INSERT, { ownerId: r.ownerId, jobId: r.jobId, attemptNumber: r.attemptNumber, seq: r.seq, events: r.events })),
    streamBatchList: async (ownerId, jobId, attemptNumber, afterSeq) =>
      (await all(S.STREAM_BATCH_LIST, { ownerId, jobId, attemptNumber, afterSeq })).map((r) => ({
        ownerId: String(r.owner_id), jobId: String(r.job_id), attemptNumber: Number(r.attempt_number), seq: Number(r.seq), events: String(r.events),
      })),
    jobListQueuedForUpdate: async (limit) => (await all(J.JOB_LIST_QUEUED, limit)).map(toJob),

    attemptInsert: async (r: AttemptInsertRow) => {
      await run(A.ATTEMPT_INSERT, {
        ownerId: r.ownerId, id: r.id, jobId: r.jobId, number: r.number, provider: r.provider, kind: r.kind, state: r.state,
        baseVersion: r.baseVersion, startedAt: r.startedAt.getTime(), deadlineAt: ms(r.deadlineAt),
        leaseOwner: r.leaseOwner, leaseToken: r.leaseToken, leaseExpiresAt: ms(r.leaseExpiresAt), ...reserveParams(r.reserve),
      });
    },
    ownerUse: async (p) => {
      const r = (await get(OWNER_USE, { ownerId: p.ownerId, day: p.day, month: p.month, createdSince: p.createdSince.getTime() }))!;
      const n = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
      return {
        day: { spentMicros: n(r.day_spent), reservedMicros: n(r.day_reserved) },
        month: { spentMicros: n(r.month_spent), reservedMicros: n(r.month_reserved) },
        inFlight: n(r.in_flight), createdSince: n(r.created_since),
        oldestCreatedAt: r.oldest_created === null || r.oldest_created === undefined ? null : new Date(Number(r.oldest_created)),
      };
    },
    attemptListByJob: async (ownerId, jobId) => (await all(A.ATTEMPT_LIST_BY_JOB, ownerId, jobId)).map(toAttempt),
    attemptListByJobs: async (ownerId, jobIds) => (await all(A.ATTEMPT_LIST_BY_JOBS, ownerId, json(jobIds))).map(toAttempt),
    attemptGet: async (ownerId, id) => mapOne(await get(A.ATTEMPT_GET, ownerId, id), toAttempt),
    attemptUpdate: async (p: AttemptUpdateParams) => {
      const { sql, params } = attemptUpdateSql(p);
      return (await run(sql, params)) === 1;
    },
    attemptClaim: async (p: AttemptClaimParams) =>
      (await all(A.ATTEMPT_CLAIM, { leaseOwner: p.leaseOwner, leaseExpiresAt: p.leaseExpiresAt.getTime(), limit: p.limit, now: p.now.getTime() }))
        .map(toAttempt).sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime()),
    attemptExtendLeases: async (p: LeaseExtendParams) =>
      (await all(A.ATTEMPT_EXTEND_LEASES, { leaseOwner: p.leaseOwner, tokens: json(p.leaseTokens), leaseExpiresAt: p.leaseExpiresAt.getTime(), now: p.now.getTime() }))
        .map((r) => String(r.lease_token)),
    attemptListLeaseExpired: async (now, limit) => (await all(A.ATTEMPT_LIST_LEASE_EXPIRED, { now: now.getTime(), limit })).map(toAttempt),

    eventInsert: async (rows: readonly EventInsertRow[]) => {
      if (rows.length === 0) return;
      // One message for all rows; the worker runs them in order and stops at the first failure.
      await exec('each', E.EVENT_INSERT, rows.map((e) => [{ ownerId: e.ownerId, jobId: e.jobId, attemptId: e.attemptId, type: e.type, data: json(e.data), at: e.at.getTime() }]));
    },
    eventList: async (ownerId, jobId) => (await all(E.EVENT_LIST, ownerId, jobId)).map(toEvent),
    eventListAll: async (afterId, limit) => (await all(E.EVENT_LIST_ALL, afterId, limit)).map(toEvent),
    certificationUpsert: async (row) => void (await run(C.CERTIFICATION_UPSERT, C.certificationParams(row))),
    certificationList: async () => (await all(C.CERTIFICATION_LIST)).map(C.toCertification),
    certificationVerdicts: async (providers) => (providers.length === 0 ? [] : (await all(C.CERTIFICATION_VERDICTS, json(providers))).map(C.toVerdict)),

    attemptClaimLookups: async (p: LookupClaimParams) =>
      p.providers.length === 0 || p.limit <= 0
        ? []
        : (await all(L.LOOKUP_CLAIM, {
            holder: p.holder, providers: json(p.providers), limit: p.limit, leaseMs: p.leaseMs, firstCheckMs: p.firstCheckMs, now: ms(p.now),
          })).map(toAttempt),
    attemptDeferLookup: async (p: LookupDeferParams) =>
      (await run(L.LOOKUP_DEFER, {
        ownerId: p.ownerId, id: p.id, holder: p.holder, backoffBaseMs: p.backoffBaseMs, backoffMaxMs: p.backoffMaxMs, now: ms(p.now),
      })) === 1,
    attemptOldestUnknownAt: async () => date((await get(L.LOOKUP_OLDEST_UNKNOWN))?.at),
    attemptCountInDoubt: async () => Number((await get(AD.ATTEMPT_COUNT_IN_DOUBT))?.n ?? 0),
    jobListAll: async (p) =>
      (await all(AD.JOB_LIST_ALL, {
        state: p.state ?? null, limit: p.limit, afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null,
      })).map(toJob),
    jobGetAnyOwner: async (id) => mapOne(await get(AD.JOB_GET_ANY_OWNER, id), toJob),
    attemptGetAnyOwner: async (id) => mapOne(await get(AD.ATTEMPT_GET_ANY_OWNER, id), toAttempt),

    maintenanceLeaseAcquire: async (p) => (await get(R.MAINTENANCE_LEASE_ACQUIRE, { name: p.name, holder: p.holder, ttlMs: p.ttlMs })) !== undefined,
    maintenanceLeaseRelease: async (p) => void (await run(R.MAINTENANCE_LEASE_RELEASE, p.name, p.holder)),
    callbackSignatureUse: async (p) => {
      await run(CS.CALLBACK_SIGNATURES_DELETE_EXPIRED, { now: ms(p.now) });
      return (await get(CS.CALLBACK_SIGNATURE_INSERT, { signature: p.signature, attemptId: p.attemptId, expiresAt: p.expiresAt.getTime() })) !== undefined;
    },
    retentionDeleteBatch: async (p) => {
      const cutoff = Number((await get(R.RETENTION_CUTOFF, { olderThanMs: p.olderThanMs }))!.cutoff);
      const args = { cutoff, limit: p.limit };
      const jobsByState: Record<string, number> = {};
      for (const r of await all(R.RETENTION_COUNT, args)) jobsByState[String(r.state)] = Number(r.n);
      const events = await run(R.RETENTION_DELETE_EVENTS, args);
      await run(R.RETENTION_DELETE_STREAM, args);
      const attempts = await run(R.RETENTION_DELETE_ATTEMPTS, args);
      const jobs = await run(R.RETENTION_DELETE_JOBS, args);
      return { jobsByState, jobs, attempts, events };
    },
  };
}

/** Builds the guarded UPDATE of {@link DriverQueries.attemptUpdate}. */
function attemptUpdateSql(p: AttemptUpdateParams): { sql: string; params: Record<string, unknown> } {
  const sets: string[] = [];
  const params: Record<string, unknown> = { ownerId: p.ownerId, id: p.id, fromStates: json(p.fromStates) };
  const s = p.set;
  if (s.state !== undefined) (sets.push('state = @state'), (params.state = s.state));
  if (s.startedAt !== undefined) (sets.push('started_at = @startedAt'), (params.startedAt = s.startedAt.getTime()));
  if (s.deadlineAt !== undefined) (sets.push('deadline_at = @deadlineAt'), (params.deadlineAt = ms(s.deadlineAt)));
  if (s.finishedAt !== undefined) (sets.push('finished_at = @finishedAt'), (params.finishedAt = ms(s.finishedAt)));
  if (s.error !== undefined) (sets.push('error = @error'), (params.error = s.error === null ? null : json(s.error)));
  if (s.leaseExpiresAt !== undefined) (sets.push('lease_expires_at = @leaseExpiresAt'), (params.leaseExpiresAt = s.leaseExpiresAt.getTime()));
  if (s.releaseLease) sets.push('lease_owner = NULL', 'lease_expires_at = NULL');
  if (s.usage !== undefined) {
    sets.push('prompt_tokens = @promptTokens', 'completion_tokens = @completionTokens', 'total_tokens = @totalTokens');
    Object.assign(params, { promptTokens: s.usage?.promptTokens ?? null, completionTokens: s.usage?.completionTokens ?? null, totalTokens: s.usage?.totalTokens ?? null });
  }
  if (s.costMicros !== undefined) (sets.push('cost_micros = @costMicros'), (params.costMicros = s.costMicros));
  if (s.providerRequestId !== undefined) (sets.push('provider_request_id = @providerRequestId'), (params.providerRequestId = s.providerRequestId));
  if (s.resolvedBy !== undefined) (sets.push('resolved_by = @resolvedBy'), (params.resolvedBy = s.resolvedBy));
  if (s.unknownAt !== undefined) (sets.push('unknown_at = @unknownAt'), (params.unknownAt = ms(s.unknownAt)));
  if (s.lookupNextAt !== undefined) (sets.push('lookup_next_at = @lookupNextAt'), (params.lookupNextAt = ms(s.lookupNextAt)));
  if (sets.length === 0) throw new Error('attemptUpdate with nothing to set');
  let where = 'owner_id = @ownerId AND id = @id AND state IN (SELECT value FROM json_each(@fromStates))';
  if (p.fence && p.fence.now === null) {
    // The token alone (an answer whose lease ran out while nobody else took the attempt).
    where += ' AND (lease_owner = @leaseOwner OR lease_owner IS NULL) AND lease_token = @leaseToken';
    params.leaseOwner = p.fence.leaseOwner;
    params.leaseToken = p.fence.leaseToken;
  } else if (p.fence && p.fence.now !== null) {
    where += ' AND lease_owner = @leaseOwner AND lease_token = @leaseToken AND lease_expires_at > @now';
    params.leaseOwner = p.fence.leaseOwner;
    params.leaseToken = p.fence.leaseToken;
    params.now = p.fence.now.getTime();
  }
  if (p.noLookupHeldAt !== undefined) {
    where += ' AND (lookup_holder IS NULL OR lookup_lease_expires_at <= @noLookupHeldAt)';
    params.noLookupHeldAt = p.noLookupHeldAt.getTime();
  }
  return { sql: `UPDATE attempts SET ${sets.join(', ')} WHERE ${where}`, params };
}
