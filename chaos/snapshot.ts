/**
 * Reads a run's records: the database (jobs, attempts, the whole event log,
 * over plain SQL) and the files a run leaves (history.jsonl, faults.jsonl,
 * calls-before.json, calls-after.json, db.json), so a run directory can be
 * checked again without the cluster.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { DoubtInput } from './doubt-checker.ts';
import type { CheckInput, DbSnapshot, LivenessInput, ProviderCall } from './records.ts';

/** Reads jobs, attempts and events from a onejob PostgreSQL database. */
export async function readDatabase(url: string): Promise<DbSnapshot> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    // One snapshot of all three tables.
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const iso = (col: string): string => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ${col}`;
    const now = await c.query<{ taken_at: string }>(`SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS taken_at`);
    const jobs = await c.query(`SELECT owner_id, id, idempotency_key, route, input, metadata, state, version::int AS version, completed_by, result, error, ${iso('created_at')}, stream_attempt_id FROM jobs`);
    const attempts = await c.query(`SELECT owner_id, id, job_id, number, provider, kind, state, error, ${iso('started_at')}, lease_owner, ${iso('lease_expires_at')}, ${iso('unknown_at')}, ${iso('finished_at')}, provider_request_id, resolved_by FROM attempts`);
    const events = await c.query(`SELECT id::int AS id, owner_id, job_id, attempt_id, type, data, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at FROM job_events ORDER BY id`);
    await c.query('COMMIT');
    return { takenAt: now.rows[0]!.taken_at, jobs: jobs.rows, attempts: attempts.rows, events: events.rows };
  } finally {
    await c.end();
  }
}

function jsonLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as T);
}

/** The database's clock now (ISO), e.g. when the faults stopped. */
export async function readDatabaseNow(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    const r = await c.query<{ now: string }>(`SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS now`);
    return r.rows[0]!.now;
  } finally {
    await c.end();
  }
}

/** Writes the snapshots of a run next to its histories. */
export function saveSnapshots(dir: string, s: { db: DbSnapshot; callsBefore: readonly ProviderCall[]; callsAfter: readonly ProviderCall[]; hedgedRoutes: readonly string[]; contractRoutes?: readonly string[]; liveness?: LivenessInput; doubt?: DoubtInput }): void {
  writeFileSync(join(dir, 'db.json'), JSON.stringify(s.db));
  writeFileSync(join(dir, 'calls-before.json'), JSON.stringify(s.callsBefore));
  writeFileSync(join(dir, 'calls-after.json'), JSON.stringify(s.callsAfter));
  writeFileSync(join(dir, 'routes.json'), JSON.stringify({ hedgedRoutes: s.hedgedRoutes, contractRoutes: s.contractRoutes ?? [] }));
  if (s.liveness) writeFileSync(join(dir, 'liveness.json'), JSON.stringify(s.liveness));
  if (s.doubt) writeFileSync(join(dir, 'doubt.json'), JSON.stringify(s.doubt));
}

/** Loads everything the checker needs from a run directory. */
export function loadRun(dir: string): CheckInput {
  const read = <T>(name: string): T => JSON.parse(readFileSync(join(dir, name), 'utf8')) as T;
  return {
    history: jsonLines(join(dir, 'history.jsonl')),
    faults: jsonLines(join(dir, 'faults.jsonl')),
    db: read('db.json'),
    callsBefore: read('calls-before.json'),
    callsAfter: read('calls-after.json'),
    hedgedRoutes: read<{ hedgedRoutes: string[] }>('routes.json').hedgedRoutes,
    contractRoutes: read<{ contractRoutes?: string[] }>('routes.json').contractRoutes,
    liveness: existsSync(join(dir, 'liveness.json')) ? read<LivenessInput>('liveness.json') : undefined,
    doubt: existsSync(join(dir, 'doubt.json')) ? read<DoubtInput>('doubt.json') : undefined,
  };
}
