/**
 * The named queries of the query files, bound to one connection (the pool,
 * or a transaction's client): the PostgreSQL driver's {@link DriverQueries}.
 */
import type { DriverQueries } from '../driver.ts';
import * as admin from './admin-queries.ts';
import * as attempts from './attempt-queries.ts';
import * as callbackSignatures from './callback-signature-queries.ts';
import { batchQueriesOn } from './batch-queries.ts';
import * as certifications from './certification-queries.ts';
import * as events from './event-queries.ts';
import * as fast from './fast-path-queries.ts';
import * as jobs from './job-queries.ts';
import * as limits from './limit-queries.ts';
import * as lookups from './lookup-queries.ts';
import type { Queryable } from './queryable.ts';
import * as retention from './retention-queries.ts';
import * as streams from './stream-queries.ts';

/** The named queries over `db`. */
export function queriesOn(db: Queryable): DriverQueries {
  return {
    ...batchQueriesOn(db),
    dbNow: () => jobs.dbNow(db),
    jobInsert: (row) => jobs.jobInsert(db, row),
    jobInsertLeased: (row, attempt) => fast.jobInsertLeased(db, row, attempt),
    attemptSettleWon: (params) => fast.attemptSettleWon(db, params),
    jobStates: (refs) => jobs.jobStates(db, refs),
    jobGetByKey: (ownerId, key) => jobs.jobGetByKey(db, ownerId, key),
    jobInsertKeyless: (row) => jobs.jobInsertKeyless(db, row),
    jobGetByKeylessFingerprint: (params) => jobs.jobGetByKeylessFingerprint(db, params),
    jobGet: (ownerId, id, forUpdate) => jobs.jobGet(db, ownerId, id, forUpdate),
    jobList: (params) => jobs.jobList(db, params),
    jobUpdateProgress: (params) => jobs.jobUpdateProgress(db, params),
    jobFinish: (params) => jobs.jobFinish(db, params),
    jobStreamClaim: (params) => jobs.jobStreamClaim(db, params),
    jobStreamOwner: (ownerId, id) => jobs.jobStreamOwner(db, ownerId, id),
    streamBatchInsert: (row) => streams.streamBatchInsert(db, row),
    streamBatchList: (ownerId, jobId, attemptNumber, afterSeq) => streams.streamBatchList(db, ownerId, jobId, attemptNumber, afterSeq),
    jobListQueuedForUpdate: (limit) => jobs.jobListQueuedForUpdate(db, limit),
    attemptInsert: (row) => attempts.attemptInsert(db, row),
    attemptListByJob: (ownerId, jobId) => attempts.attemptListByJob(db, ownerId, jobId),
    attemptListByJobs: (ownerId, jobIds) => attempts.attemptListByJobs(db, ownerId, jobIds),
    attemptGet: (ownerId, id) => attempts.attemptGet(db, ownerId, id),
    attemptUpdate: (params) => attempts.attemptUpdate(db, params),
    attemptMarkRunning: (params) => attempts.attemptMarkRunning(db, params),
    attemptClaim: (params) => attempts.attemptClaim(db, params),
    attemptExtendLeases: (params) => attempts.attemptExtendLeases(db, params),
    attemptListLeaseExpired: (now, limit) => attempts.attemptListLeaseExpired(db, now, limit),
    eventInsert: (rows) => events.eventInsert(db, rows),
    eventList: (ownerId, jobId) => events.eventList(db, ownerId, jobId),
    eventListAll: (afterId, limit) => events.eventListAll(db, afterId, limit),
    certificationUpsert: (row) => certifications.certificationUpsert(db, row),
    certificationList: () => certifications.certificationList(db),
    certificationVerdicts: (providers) => certifications.certificationVerdicts(db, providers),
    attemptClaimLookups: (params) => lookups.attemptClaimLookups(db, params),
    attemptDeferLookup: (params) => lookups.attemptDeferLookup(db, params),
    attemptOldestUnknownAt: () => lookups.attemptOldestUnknownAt(db),
    attemptCountInDoubt: () => admin.attemptCountInDoubt(db),
    jobListAll: (params) => admin.jobListAll(db, params),
    jobGetAnyOwner: (id) => admin.jobGetAnyOwner(db, id),
    attemptGetAnyOwner: (id) => admin.attemptGetAnyOwner(db, id),
    maintenanceLeaseAcquire: (params) => retention.maintenanceLeaseAcquire(db, params),
    maintenanceLeaseRelease: (params) => retention.maintenanceLeaseRelease(db, params),
    retentionDeleteBatch: (params) => retention.retentionDeleteBatch(db, params),
    ownerUse: (params) => limits.ownerUse(db, params),
    callbackSignatureUse: (params) => callbackSignatures.callbackSignatureUse(db, params),
  };
}
