/**
 * The parity check run after each onejob bench series (issue 11): every job
 * row belongs to a request that was answered 2xx, and every job was executed
 * by the provider exactly once.
 *
 * A timed autocannon run stops with up to `connections` requests in flight:
 * autocannon drops them unanswered, while the server may already have
 * committed their jobs. Those requests (`sent - responses`) are the only
 * slack allowed: `answered2xx ≤ rows ≤ answered2xx + cutOff`. Runs that
 * finish every request (the one-connection probes) have no slack. Provider
 * calls are compared exactly, once every job of the series has settled.
 */
import { createRequire } from 'node:module';
import { adminQuery } from './pg-admin.ts';

/** What one series did, as measured by its load generator and counted afterwards. */
export interface ParityInput {
  readonly series: string;
  /** Requests answered 2xx. */
  readonly answered2xx: number;
  /** Requests sent but not answered when the run stopped. */
  readonly cutOff: number;
  /** Job rows the series created (count after − count before). */
  readonly rows: number;
  /** Provider executions during the series (null: no provider in this series). */
  readonly providerCalls: number | null;
}

/** The verdict on one series. */
export interface ParityCheck extends ParityInput {
  readonly ok: boolean;
  readonly problems: readonly string[];
}

/** Checks one series. */
export function checkParity(p: ParityInput): ParityCheck {
  const problems: string[] = [];
  if (p.rows < p.answered2xx) problems.push(`${p.answered2xx} requests answered 2xx but only ${p.rows} job rows`);
  if (p.rows > p.answered2xx + p.cutOff) problems.push(`${p.rows} job rows for ${p.answered2xx} answers 2xx (+${p.cutOff} cut off in flight)`);
  if (p.providerCalls !== null && p.providerCalls !== p.rows) problems.push(`${p.providerCalls} provider calls for ${p.rows} jobs`);
  return { ...p, ok: problems.length === 0, problems };
}

const require = createRequire(import.meta.url);

/** A database the bench counts jobs in: a PostgreSQL URL or `sqlite:<path>`. */
export async function countJobs(db: string, where = '1 = 1'): Promise<number> {
  if (db.startsWith('sqlite:')) {
    const Database = require('better-sqlite3') as new (path: string, o: object) => {
      prepare(sql: string): { get(): { n: number } };
      close(): void;
    };
    const conn = new Database(db.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    try {
      return Number(conn.prepare(`SELECT count(*) AS n FROM jobs WHERE ${where}`).get().n);
    } finally {
      conn.close();
    }
  }
  return Number((await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM jobs WHERE ${where}`, db))[0]?.n ?? 0);
}

/** Waits until no job of `db` is queued or running (at most `timeoutMs`); returns how many still are. */
export async function settled(db: string, timeoutMs = 20_000): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const open = await countJobs(db, "state IN ('queued', 'running')");
    if (open === 0 || Date.now() > until) return open;
    await new Promise((r) => setTimeout(r, 100));
  }
}
