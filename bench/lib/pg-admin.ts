/**
 * Scratch databases of the benchmark (`onejob_bench_*`) on the local server.
 */
import pg from 'pg';

export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The URL of database `name` on the same server as {@link PG_ADMIN_URL}. */
export function dbUrl(name: string): string {
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Runs `sql` on the admin database (or `url`). */
export async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, url = PG_ADMIN_URL): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end();
  }
}

/** Drops and creates database `name` (must start with `onejob_bench_`). */
export async function recreateDatabase(name: string): Promise<string> {
  if (!/^onejob_bench_[a-z0-9_]+$/.test(name)) throw new Error(`refusing database name ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE ${name}`);
  return dbUrl(name);
}

export async function dropDatabase(name: string): Promise<void> {
  if (!/^onejob_bench_[a-z0-9_]+$/.test(name)) throw new Error(`refusing database name ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
