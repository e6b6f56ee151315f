/**
 * PostgreSQL for tests: the server at ONEJOB_TEST_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/test), and a fresh database per suite.
 *
 * Postgres tests never skip silently: if the server is unreachable they fail,
 * unless ONEJOB_TEST_SKIP_POSTGRES=1 is set on purpose (never in CI).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The admin URL tests create their databases through. */
export const ADMIN_URL = process.env.ONEJOB_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Whether the Postgres tests were switched off on purpose (and why). */
export function postgresSkipReason(): string | null {
  if (process.env.ONEJOB_TEST_SKIP_POSTGRES === '1') {
    if (process.env.CI) throw new Error('ONEJOB_TEST_SKIP_POSTGRES=1 is not allowed in CI: Postgres tests must run');
    return 'ONEJOB_TEST_SKIP_POSTGRES=1';
  }
  return null;
}

/** A fresh, empty database; `drop()` removes it. */
export async function createPostgresDatabase(prefix = 'onejob_t'): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  // The creation time is in the name, so cleanup can leave recent databases of concurrent runs alone.
  const name = `${prefix}_${Math.floor(Date.now() / 1000)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
