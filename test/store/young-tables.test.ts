/**
 * The PostgreSQL driver analyzes its hot tables while they are young
 * (`src/store/postgres/young-tables.ts`, docs/performance.md §15): a
 * prepared statement's generic plan made on an empty table otherwise stays,
 * and a lookup by id may scan every row of the owner.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { JobStore } from '../../src/store/job-store.ts';
import { createPostgresDriver } from '../../src/store/postgres/postgres-driver.ts';
import type { Queryable } from '../../src/store/postgres/queryable.ts';
import { tablesToAnalyze, YOUNG_TABLE_RULES, YoungTableStatistics } from '../../src/store/postgres/young-tables.ts';
import { createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';

describe('tablesToAnalyze', () => {
  const at = (analyzedTuples: number, modifiedSinceAnalyze: number) => tablesToAnalyze([{ table: 'jobs', analyzedTuples, modifiedSinceAnalyze }]);
  it.each([
    // never analyzed (-1): once minRows rows changed
    [-1, YOUNG_TABLE_RULES.minRows - 1, []],
    [-1, YOUNG_TABLE_RULES.minRows, ['jobs']],
    // analyzed empty: the same
    [0, 10, []],
    [0, YOUNG_TABLE_RULES.minRows, ['jobs']],
    // analyzed at 4,000 rows: again once 4,000 more changed (it doubled)
    [4_000, 3_999, []],
    [4_000, 4_000, ['jobs']],
    // grown up: left to autovacuum, however much changed
    [YOUNG_TABLE_RULES.maxTuples, 10 * YOUNG_TABLE_RULES.maxTuples, []],
  ])('analyzed at %d rows, %d changed since: %j', (analyzed, modified, expected) => {
    expect(at(analyzed, modified)).toEqual(expected);
  });

  it('names each table that is due, and only those', () => {
    expect(tablesToAnalyze([
      { table: 'jobs', analyzedTuples: -1, modifiedSinceAnalyze: 900 },
      { table: 'attempts', analyzedTuples: 2_000, modifiedSinceAnalyze: 900 },
      { table: 'job_events', analyzedTuples: 500, modifiedSinceAnalyze: 900 },
    ])).toEqual(['jobs', 'job_events']);
  });
});

describe('YoungTableStatistics', () => {
  /** A connection that answers the counters query with `rows` and records every statement. */
  const fakeDb = (rows: object[]) => {
    const sent: string[] = [];
    const db: Queryable = {
      query: async (config) => {
        sent.push(config.text);
        return { rows: config.text.startsWith('SELECT') ? rows : [] } as never;
      },
    };
    return { db, sent };
  };

  it('looks once per writesBetweenLooks writes and minLookIntervalMs, analyzes what is due, and nothing after stop()', async () => {
    const { db, sent } = fakeDb([{ table: 'jobs', analyzed_tuples: -1, modified: 900 }, { table: 'attempts', analyzed_tuples: 5_000, modified: 900 }]);
    let now = 0;
    const young = new YoungTableStatistics(db, (e) => { throw e; }, () => now);
    const writes = async (n: number) => {
      for (let i = 0; i < n; i++) young.noteWrite();
      await new Promise((r) => setTimeout(r, 10)); // the look runs in the background
    };
    await writes(YOUNG_TABLE_RULES.writesBetweenLooks - 1);
    expect(sent).toEqual([]);
    await writes(1);
    // The counters, then one ANALYZE of what is due (attempts, analyzed at 5,000 rows, changed by 900 only: not yet).
    expect(sent).toHaveLength(2);
    expect(sent[1]).toBe('ANALYZE (SKIP_LOCKED) "jobs"');
    // Enough writes again, but within the interval: no look; after it, one.
    await writes(YOUNG_TABLE_RULES.writesBetweenLooks);
    expect(sent).toHaveLength(2);
    now += YOUNG_TABLE_RULES.minLookIntervalMs;
    await writes(1);
    expect(sent).toHaveLength(4);
    // Stopped (the driver closing): no look whatever is written.
    await young.stop();
    now += 10 * YOUNG_TABLE_RULES.minLookIntervalMs;
    await writes(2 * YOUNG_TABLE_RULES.writesBetweenLooks);
    expect(sent).toHaveLength(4);
  });
});

const skip = postgresSkipReason();

describe.skipIf(skip !== null)('postgres: young tables analyzed by the driver', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** A store on a fresh database, and a way to read when its tables were last analyzed by hand (not by autovacuum). */
  async function setUp(analyzeYoungTables: boolean) {
    const db = await createPostgresDatabase('onejob_young');
    const store = new JobStore(await createPostgresDriver({ connectionString: db.url, analyzeYoungTables }));
    await store.migrate();
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    cleanups.push(() => db.drop(), () => store.close(), () => admin.end());
    const analyzed = async (): Promise<Record<string, boolean>> => {
      const { rows } = await admin.query<{ relname: string; done: boolean }>(
        `SELECT relname, last_analyze IS NOT NULL AS done FROM pg_stat_user_tables WHERE relname IN ('jobs', 'attempts')`);
      return Object.fromEntries(rows.map((r) => [r.relname, r.done]));
    };
    /** Creates and settles jobs on the fast path, as the gateway does, until `until()` or `max` jobs. */
    const work = async (max: number, until: () => Promise<boolean>): Promise<number> => {
      let n = 0;
      while (n < max) {
        for (let i = 0; i < 100; i++, n++) {
          const made = await store.createJob({
            ownerId: 'alice', idempotencyKey: `k-${n}`, route: 'summarize', input: { n }, providers: ['primary'],
            firstAttempt: { leaseOwner: 'exe_a', leaseMs: 60_000 },
          });
          const a = made.claimed!.attempt;
          await store.settleAttempt({ ownerId: 'alice', attemptId: a.id, fence: { leaseOwner: 'exe_a', leaseToken: a.leaseToken! }, outcome: { state: 'succeeded', result: { n } } });
        }
        if (await until()) break;
      }
      return n;
    };
    return { analyzed, work };
  }

  it('analyzes jobs and attempts once some hundreds of rows were written, with no ANALYZE from anyone else', async () => {
    const { analyzed, work } = await setUp(true);
    expect(await analyzed()).toEqual({ jobs: false, attempts: false });
    const n = await work(20_000, async () => Object.values(await analyzed()).every(Boolean));
    expect(await analyzed()).toEqual({ jobs: true, attempts: true });
    // Not at once: only once minRows rows changed (each job changes each table twice: its insert and its settle).
    expect(n).toBeGreaterThanOrEqual(YOUNG_TABLE_RULES.minRows / 2);
  }, 60_000);

  it('with analyzeYoungTables false, the same writes leave the tables unanalyzed (autovacuum only sets last_autoanalyze)', async () => {
    const { analyzed, work } = await setUp(false);
    await work(1_000, async () => false);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await analyzed()).toEqual({ jobs: false, attempts: false });
  }, 60_000);
});
