/**
 * {@link Insights}: the store's read model for the dashboard and
 * `GET /v1/usage` (CONTRACT §8, §10), over a driver's {@link InsightQueries}.
 *
 * Everything is per owner. Search pages with an opaque keyset cursor that
 * remembers its order; usage totals are sums of integer micro-dollars done
 * by the database; the event tail reads the owner's log by id (live updates).
 */
import { OnejobError } from '../core/errors.ts';
import type { JobState } from '../core/states.ts';
import type { JobEvent, JobWithAttempts } from '../core/types.ts';
import type { TokenUsage } from '../core/usage.ts';
import type { Driver } from './driver.ts';
import type { DoubtRow, UsageTotalRow } from './insight-queries.ts';
import { withAttempts } from './with-attempts.ts';

/** Parameters of {@link Insights.searchJobs}. */
export interface SearchJobsParams {
  readonly ownerId: string;
  readonly state?: JobState | undefined;
  readonly route?: string | undefined;
  /** Jobs with at least one attempt on this provider. */
  readonly provider?: string | undefined;
  /** Created at or after. */
  readonly createdSince?: Date | undefined;
  /** Created strictly before. */
  readonly createdUntil?: Date | undefined;
  /** A job id (exact) or the start of an idempotency key. */
  readonly text?: string | undefined;
  /** `newest` first (default) or `oldest` first (the in-doubt queue). */
  readonly order?: 'newest' | 'oldest' | undefined;
  /** 1 to 200; default 50. */
  readonly limit?: number | undefined;
  /** A previous page's `nextCursor` (of the same order). */
  readonly cursor?: string | undefined;
}

/** One page of {@link Insights.searchJobs}. */
export interface SearchJobsResult {
  readonly jobs: readonly JobWithAttempts[];
  readonly nextCursor: string | null;
}

/** Parameters of {@link Insights.doubtQueue}. */
export interface DoubtQueueParams {
  readonly ownerId: string;
  /** 1 to 200; default 100. */
  readonly limit?: number | undefined;
  /** A previous page's `nextCursor`. */
  readonly cursor?: string | undefined;
}

/** One page of {@link Insights.doubtQueue}. */
export interface DoubtQueueResult {
  readonly rows: readonly DoubtRow[];
  readonly nextCursor: string | null;
}

/** Parameters of {@link Insights.usage}. */
export interface UsageParams {
  readonly ownerId: string;
  /** Attempts started at or after; default: the beginning of time. */
  readonly since?: Date | undefined;
  /** Attempts started strictly before; default: no bound. */
  readonly until?: Date | undefined;
  /** Group by start time in buckets this long (ms, epoch-aligned); default: no buckets. */
  readonly bucketMs?: number | undefined;
}

/** Parameters of {@link Insights.recordLateUsage}. */
export interface RecordLateUsageParams {
  readonly ownerId: string;
  readonly attemptId: string;
  readonly usage: TokenUsage;
  readonly costMicros: number | null;
  /** Who reported it, for the event log. */
  readonly actor?: string | undefined;
}

/** Page sizes of {@link Insights.searchJobs}. */
export const SEARCH_DEFAULT_LIMIT = 50;
export const SEARCH_MAX_LIMIT = 200;
/** The default page of {@link Insights.doubtQueue}. */
export const DOUBT_DEFAULT_LIMIT = 100;

/** A window no kept job is older than (a thousand years, in ms): "whenever it finished". */
const ANY_AGE_MS = 1000 * 366 * 86_400_000;

/** The furthest instant a `Date` can hold: "no upper bound". */
const END_OF_TIME = new Date(8.64e15);

/**
 * The read model.
 *
 * @example
 * const page = await store.insights.searchJobs({ ownerId: 'alice', state: 'unknown', order: 'oldest' });
 * const rows = await store.insights.usage({ ownerId: 'alice', since: new Date(Date.now() - 86_400_000) });
 */
export class Insights {
  readonly #driver: Driver;

  constructor(driver: Driver) {
    this.#driver = driver;
  }

  /**
   * The owner's jobs matching every filter given, with their attempts.
   *
   * @throws OnejobError `invalid_request` for a bad limit or a cursor this server did not issue (or of the other order).
   */
  async searchJobs(p: SearchJobsParams): Promise<SearchJobsResult> {
    const limit = p.limit ?? SEARCH_DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) {
      throw new OnejobError('invalid_request', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}`);
    }
    const order = p.order ?? 'newest';
    const after = p.cursor === undefined ? undefined : decodeSearchCursor(p.cursor, order);
    const text = p.text === undefined || p.text === '' ? undefined : p.text;
    // The page and its attempts in one snapshot (a job never beside attempts of another moment).
    return this.#driver.readSnapshot(async (q, insights) => {
      const rows = await insights.jobSearch({
        ownerId: p.ownerId, state: p.state, route: p.route, provider: p.provider,
        createdSince: p.createdSince, createdUntil: p.createdUntil, text, order, limit: limit + 1, after,
      });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        jobs: await withAttempts(q, p.ownerId, page),
        nextCursor: rows.length > limit && last ? encodeSearchCursor(last.createdAt, last.id, order) : null,
      };
    });
  }

  /**
   * The owner's doubt queue: every `unknown` attempt of a job not yet
   * terminal, with the job it blocks (key, route, state, input), oldest
   * doubt first, read in one statement per page.
   *
   * @throws OnejobError `invalid_request` for a bad limit or a cursor this server did not issue.
   * @example const { rows } = await store.insights.doubtQueue({ ownerId: 'alice' });
   */
  async doubtQueue(p: DoubtQueueParams): Promise<DoubtQueueResult> {
    const limit = p.limit ?? DOUBT_DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) {
      throw new OnejobError('invalid_request', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}`);
    }
    const after = p.cursor === undefined ? undefined : decodeDoubtCursor(p.cursor);
    const rows = await this.#driver.insights.doubtQueue({ ownerId: p.ownerId, limit: limit + 1, after });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1]?.attempt;
    return {
      rows: page,
      nextCursor: rows.length > limit && last ? encodeDoubtCursor(last.unknownAt ?? last.startedAt, last.id) : null,
    };
  }

  /**
   * The owner's attempts started in [since, until), summed by (route,
   * provider, state[, bucket]) in the database: integer tokens and
   * micro-dollars.
   *
   * @throws OnejobError `invalid_request` when `since` is after `until` or the bucket is not a positive integer.
   */
  async usage(p: UsageParams): Promise<UsageTotalRow[]> {
    const since = p.since ?? new Date(0);
    const until = p.until ?? END_OF_TIME;
    if (since.getTime() > until.getTime()) throw new OnejobError('invalid_request', 'since must not be after until');
    if (p.bucketMs !== undefined && (!Number.isSafeInteger(p.bucketMs) || p.bucketMs <= 0)) {
      throw new OnejobError('invalid_request', 'the bucket must be a positive whole number of milliseconds');
    }
    return this.#driver.insights.usageTotals({ ownerId: p.ownerId, since, until, bucketMs: p.bucketMs ?? null });
  }

  /** The owner's events after `afterId`, oldest first (live updates). */
  eventsSince(ownerId: string, afterId: number, limit = 200): Promise<JobEvent[]> {
    return this.#driver.insights.eventListByOwner(ownerId, afterId, limit);
  }

  /**
   * The owner's job a resume follows (CONTRACT §15: a resume never starts
   * work), with its attempts, or null when the owner has none: the job of
   * (owner, key), or for a keyless request the owner's newest job of that
   * fingerprint, however long ago it finished (the `keyless` window bounds
   * replays of a create, not which stream a resume was reading). Reads
   * only; never inserts.
   *
   * @example await store.insights.jobToResume({ ownerId: 'alice', idempotencyKey: 'k1' })
   */
  async jobToResume(p: { readonly ownerId: string; readonly idempotencyKey: string } | { readonly ownerId: string; readonly keylessFingerprint: string }): Promise<JobWithAttempts | null> {
    const q = this.#driver.queries;
    const job = 'idempotencyKey' in p
      ? await q.jobGetByKey(p.ownerId, p.idempotencyKey)
      : await q.jobGetByKeylessFingerprint({ ownerId: p.ownerId, fingerprint: p.keylessFingerprint, windowMs: ANY_AGE_MS, now: null });
    if (job === null) return null;
    const [found] = await withAttempts(q, p.ownerId, [job]);
    return found ?? null;
  }

  /** The owner's latest event id (0 when none): where a live tail starts. */
  lastEventId(ownerId: string): Promise<number> {
    return this.#driver.insights.eventLastId(ownerId);
  }
}

function encodeDoubtCursor(since: Date, id: string): string {
  return Buffer.from(JSON.stringify([since.getTime(), id, 'd'])).toString('base64url');
}

function decodeDoubtCursor(cursor: string): { since: Date; id: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 3 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && /^[!-~]{1,200}$/.test(v[1]) && v[2] === 'd') {
      return { since: new Date(v[0] as number), id: v[1] };
    }
  } catch {
    // fall through
  }
  throw new OnejobError('invalid_request', 'cursor is not one this server issued for the doubt queue');
}

function encodeSearchCursor(createdAt: Date, id: string, order: 'newest' | 'oldest'): string {
  return Buffer.from(JSON.stringify([createdAt.getTime(), id, order === 'newest' ? 'n' : 'o'])).toString('base64url');
}

function decodeSearchCursor(cursor: string, order: 'newest' | 'oldest'): { createdAt: Date; id: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    // A plain list's cursor ([createdAt, id]) is a newest-first position too.
    const tag = Array.isArray(v) && v.length === 2 ? 'n' : Array.isArray(v) ? v[2] : undefined;
    if (Array.isArray(v) && (v.length === 2 || v.length === 3) && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && /^[!-~]{1,200}$/.test(v[1]) && tag === (order === 'newest' ? 'n' : 'o')) {
      return { createdAt: new Date(v[0] as number), id: v[1] };
    }
  } catch {
    // fall through
  }
  throw new OnejobError('invalid_request', 'cursor is not one this server issued for this order');
}
