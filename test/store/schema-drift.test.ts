/**
 * The committed schema dumps (migrations/schema/*.sql) equal what the
 * migrations produce: a migration that changes the schema must come with its
 * regenerated dump (`npm run schema:dump`), so reviews see the resulting schema.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dumpPostgresSchema, dumpSqliteSchema, SCHEMA_FILES } from '../../scripts/schema-dump.ts';
import { postgresSkipReason } from '../support/postgres.ts';

describe('schema drift', () => {
  it('sqlite: migrations produce migrations/schema/sqlite.sql', async () => {
    expect(await dumpSqliteSchema()).toBe(readFileSync(SCHEMA_FILES.sqlite, 'utf8'));
  });
  it.skipIf(Boolean(postgresSkipReason()))('postgres: migrations produce migrations/schema/postgres.sql', async () => {
    expect(await dumpPostgresSchema()).toBe(readFileSync(SCHEMA_FILES.postgres, 'utf8'));
  });
});
