/**
 * Runs once before the test files: checks that PostgreSQL answers (the
 * Postgres suites must run, never skip silently) and drops databases left by
 * earlier, interrupted runs.
 */
import pg from 'pg';
import { ADMIN_URL, postgresSkipReason } from './postgres.ts';

export default async function setup(): Promise<void> {
  if (postgresSkipReason()) return;
  const c = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 });
  try {
    await c.connect();
  } catch (e) {
    throw new Error(
      `PostgreSQL is not reachable at ${ADMIN_URL} (${(e as Error).message}). Start it (pg_ctlcluster --skip-systemctl-redirect 15 main start) ` +
        'or set ONEJOB_TEST_SKIP_POSTGRES=1 to run only the SQLite suites locally.',
    );
  }
  try {
    // Only databases nobody is connected to: another test run may be using its own right now.
    const old = await c.query<{ datname: string }>(
      `SELECT datname FROM pg_database d WHERE datname LIKE 'onejob\\_t\\_%'
         AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
    );
    for (const { datname } of old.rows) await c.query(`DROP DATABASE IF EXISTS ${datname}`).catch(() => undefined);
  } finally {
    await c.end();
  }
}
