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
    // Only databases of runs that ended over an hour ago: another test run may be using its own right now.
    const old = await c.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname ~ '^onejob_t_.*[0-9]{10}_[0-9a-f]{8}$'`);
    const cutoff = Date.now() / 1000 - 3600;
    for (const { datname } of old.rows) {
      const created = Number(/_(\d{10})_[0-9a-f]{8}$/.exec(datname)?.[1]);
      if (created < cutoff) await c.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
  } finally {
    await c.end();
  }
}
