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
    const old = await c.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE 'onejob\\_t\\_%' OR datname LIKE 'onejob\\_http\\_%' OR datname LIKE 'onejob\\_e\\_%'`,
    );
    for (const { datname } of old.rows) await c.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
  } finally {
    await c.end();
  }
}
