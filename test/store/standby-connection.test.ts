/**
 * After a failover, a connection can land on a node that is (now) a standby:
 * HAProxy keeps routing to the old primary for the second or two it takes to
 * see Patroni's `/primary` check fail, and a switchover demotes a node under
 * its open sessions. PostgreSQL then refuses every write with SQLSTATE 25006
 * (`read_only_sql_transaction`). That is the database being unavailable for
 * writes — the statement did not run, nothing was written — so the store must
 * say `database_unavailable` (HTTP 503, retry later), not let a raw
 * `DatabaseError` through as a 500 `internal`.
 *
 * A database with `default_transaction_read_only = on` refuses writes with the
 * same SQLSTATE as a hot standby, without needing a replica.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isOnejobError } from '../../src/core/errors.ts';
import type { JobStore } from '../../src/store/job-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { ADMIN_URL, createPostgresDatabase, postgresSkipReason } from '../support/postgres.ts';

const skip = postgresSkipReason();

describe.skipIf(skip !== null)('a connection to a standby (read-only) PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let store: JobStore;
  let jobId: string;

  beforeAll(async () => {
    db = await createPostgresDatabase('onejob_standby');
    const writable = await openStore(db.url);
    await writable.migrate();
    jobId = (await writable.createJob({ ownerId: 'alice', idempotencyKey: 'k-before', route: 'r', input: { n: 1 }, providers: ['p1'] })).job.id;
    await writable.close();
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${db.name} SET default_transaction_read_only = on`);
    } finally {
      await admin.end();
    }
    // Opened after the ALTER: every connection of this store is read-only, like one to a standby.
    store = await openStore(db.url);
  });

  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('answers reads', async () => {
    expect((await store.getJob('alice', jobId))?.id).toBe(jobId);
  });

  it('turns a refused create (autocommit insert) into database_unavailable', async () => {
    const e = await store.createJob({ ownerId: 'alice', idempotencyKey: 'k-after', route: 'r', input: { n: 2 }, providers: ['p1'] }).then(() => null, (err: unknown) => err);
    expect(isOnejobError(e, 'database_unavailable'), String(e)).toBe(true);
  });

  it('turns concurrent refused creates (one batched insert) into database_unavailable for each', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      store.createJob({ ownerId: 'bob', idempotencyKey: `k-${i}`, route: 'r', input: { i }, providers: ['p1'] }).then(() => null, (err: unknown) => err)));
    for (const e of results) expect(isOnejobError(e, 'database_unavailable'), String(e)).toBe(true);
  });

  it('turns a refused transaction (cancel) into database_unavailable, and changes nothing', async () => {
    const e = await store.cancelJob('alice', jobId).then(() => null, (err: unknown) => err);
    expect(isOnejobError(e, 'database_unavailable'), String(e)).toBe(true);
    expect((await store.getJob('alice', jobId))?.state).toBe('queued');
  });
});
