/**
 * Statistics for young tables (docs/performance.md §15, docs/store.md).
 *
 * The hot statements are prepared once per connection, and PostgreSQL
 * switches a prepared statement to a cached generic plan after five
 * executions. Planned while `jobs` and `attempts` are new and almost empty
 * (never analyzed: the planner assumes ten pages and has no statistics),
 * every index that starts with `owner_id` costs the same as the primary key
 * `(owner_id, id)`, and the plan may take one of them for a lookup by id: an
 * index scan over every row of the owner, filtered. The cached plan stays
 * when the table grows; autovacuum's first ANALYZE (which invalidates it)
 * comes only after a naptime (one minute) and a share of the rows changed.
 * Measured under the bench's chat load on a fresh database: the batched
 * settle read 15,050 rows per lookup after half a minute, the database's CPU
 * per request went from 0.33 to 3.9 ms and the rate fell by half.
 *
 * So the driver analyzes its hot tables itself while they are young: after
 * writes, at most once a second, it reads their counters
 * (`pg_stat_user_tables`) and runs `ANALYZE (SKIP_LOCKED)` on each that
 * changed by as many rows as it held when last analyzed (at least
 * {@link YOUNG_TABLE_RULES.minRows}), up to
 * {@link YOUNG_TABLE_RULES.maxTuples} rows, past which autovacuum's own
 * schedule is enough. The ANALYZE invalidates the cached plans of every
 * session; they are planned again with statistics, on the primary key.
 */
import type { Queryable } from './queryable.ts';

/** The tables whose plans the hot path depends on. */
export const HOT_TABLES = ['jobs', 'attempts', 'job_events'] as const;

/** When a table counts as young and changed enough to analyze again. */
export const YOUNG_TABLE_RULES = {
  /** Rows changed since the last ANALYZE before the first (and any) ANALYZE. */
  minRows: 500,
  /** Past this many rows (as last analyzed) the table is left to autovacuum. */
  maxTuples: 1_000_000,
  /** Writes through this driver between two looks at the counters. */
  writesBetweenLooks: 200,
  /** Least time between two looks (ms). */
  minLookIntervalMs: 1_000,
} as const;

/** One table's counters. */
export interface TableCounters {
  readonly table: string;
  /** `pg_class.reltuples`: rows at the last ANALYZE or VACUUM; -1 when never. */
  readonly analyzedTuples: number;
  /** `pg_stat_user_tables.n_mod_since_analyze`. */
  readonly modifiedSinceAnalyze: number;
}

/**
 * The tables to analyze now: young (fewer than `maxTuples` rows as last
 * analyzed) and changed since by at least as many rows as they held then
 * (and `minRows`): so a table growing from empty is analyzed at about 500,
 * 1,000, 2,000, … rows.
 *
 * @example tablesToAnalyze([{ table: 'jobs', analyzedTuples: -1, modifiedSinceAnalyze: 600 }]) // ['jobs']
 */
export function tablesToAnalyze(counters: readonly TableCounters[], rules = YOUNG_TABLE_RULES): string[] {
  return counters
    .filter((c) => c.analyzedTuples < rules.maxTuples && c.modifiedSinceAnalyze >= Math.max(rules.minRows, c.analyzedTuples))
    .map((c) => c.table);
}

const COUNTERS_SQL = `SELECT s.relname AS table, c.reltuples::float8 AS analyzed_tuples, s.n_mod_since_analyze::float8 AS modified
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.relname = ANY ($1::text[])`;

/** Looks at the hot tables after writes and analyzes the young ones that changed enough (see the module comment). */
export class YoungTableStatistics {
  readonly #db: Queryable;
  readonly #onError: (e: Error) => void;
  readonly #now: () => number;
  #writes = 0;
  #lastLook = Number.NEGATIVE_INFINITY;
  #looking: Promise<void> | null = null;
  #off = false;

  constructor(db: Queryable, onError: (e: Error) => void, now: () => number = () => performance.now()) {
    this.#db = db;
    this.#onError = onError;
    this.#now = now;
  }

  /** A write went through the driver: look at the counters when enough did and the last look is old enough. */
  noteWrite(): void {
    if (this.#off || ++this.#writes < YOUNG_TABLE_RULES.writesBetweenLooks || this.#looking) return;
    const now = this.#now();
    if (now - this.#lastLook < YOUNG_TABLE_RULES.minLookIntervalMs) return;
    this.#writes = 0;
    this.#lastLook = now;
    this.#looking = this.#look().finally(() => {
      this.#looking = null;
    });
  }

  /**
   * One look: the counters, then one ANALYZE of the tables that need it. Resolves when done; never rejects. A role
   * that does not own the tables gets PostgreSQL's warning and no ANALYZE (autovacuum does it later), not an error.
   */
  async #look(): Promise<void> {
    try {
      const { rows } = await this.#db.query<{ table: string; analyzed_tuples: number; modified: number }>({
        name: 'onejob_young_table_counters', text: COUNTERS_SQL, values: [HOT_TABLES],
      });
      const due = tablesToAnalyze(rows.map((r) => ({ table: r.table, analyzedTuples: Number(r.analyzed_tuples), modifiedSinceAnalyze: Number(r.modified) })));
      if (due.length === 0) return;
      // SKIP_LOCKED: a table autovacuum (or another process) is analyzing right now is left to it.
      await this.#db.query({ text: `ANALYZE (SKIP_LOCKED) ${due.map((t) => `"${t}"`).join(', ')}` });
    } catch (e) {
      this.#onError(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** No look from now on (the driver is closing); resolves once the one in progress, if any, is done. */
  stop(): Promise<void> {
    this.#off = true;
    return this.#looking ?? Promise.resolve();
  }
}
