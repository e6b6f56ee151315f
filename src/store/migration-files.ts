/**
 * Reads the numbered, forward-only SQL migrations of one dialect from
 * `migrations/<dialect>/NNNN_<name>.sql`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One migration file. */
export interface MigrationFile {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * The folder holding `postgres/` and `sqlite/` migrations: `migrations/` at the
 * package root, two folders up from this file both as `src/store/*.ts` and as
 * the build's `dist/store/*.js` (dist mirrors src; see docs/packaging.md).
 */
export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

/**
 * The migrations of `dialect`, ordered by version.
 *
 * @throws Error when a file name does not match `NNNN_name.sql` or two share a version.
 * @example loadMigrations('sqlite') // [{ version: 1, name: 'init', sql: '…' }]
 */
export function loadMigrations(dialect: 'postgres' | 'sqlite', dir: string = MIGRATIONS_DIR): MigrationFile[] {
  const folder = join(dir, dialect);
  const files = readdirSync(folder).filter((f) => f.endsWith('.sql')).sort();
  const out: MigrationFile[] = [];
  for (const file of files) {
    const m = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!m) throw new Error(`migration file name must look like 0001_name.sql: ${join(folder, file)}`);
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) throw new Error(`two migrations share version ${version} in ${folder}`);
    out.push({ version, name: m[2]!, sql: readFileSync(join(folder, file), 'utf8') });
  }
  return out;
}
