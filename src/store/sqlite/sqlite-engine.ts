/**
 * Which SQLite library a driver runs on, and why (docs/store.md, "Two
 * SQLite engines").
 *
 * better-sqlite3 is the default wherever it loads. When it cannot be loaded
 * (not installed, or its native module was built for another Node ABI: "was
 * compiled against a different Node.js version") and this Node has
 * `node:sqlite` (22.13+, 23.4+, 24, 26), the driver falls back to it, and
 * says so with the whole cause and the fix. Where neither loads, opening
 * fails with the whole cause and what to do (`npm rebuild better-sqlite3`).
 */
import { OnejobError } from '../../core/errors.ts';

/** The libraries a SQLite driver can run on. */
export type SqliteEngine = 'better-sqlite3' | 'node:sqlite';

/** What a `sqlite:` store is asked to run on: one engine, or `auto` (better-sqlite3, else node:sqlite). */
export type SqliteEngineChoice = SqliteEngine | 'auto';

/** The environment variable the CLI reads the choice from (`auto` when unset). */
export const SQLITE_ENGINE_ENV = 'ONEJOB_SQLITE_ENGINE';

/** The engine a driver runs on, and why it is not better-sqlite3 when it fell back (null when it did not). */
export interface SqliteEngineInUse {
  readonly name: SqliteEngine;
  readonly fallbackReason: string | null;
}

/** The fix for a better-sqlite3 that cannot be loaded, as the messages say it. */
export const BETTER_SQLITE3_FIX = 'npm rebuild better-sqlite3';

/** The library of an engine could not be loaded in the worker (not a failure to open the file). */
export class SqliteEngineLoadError extends Error {
  override readonly name = 'SqliteEngineLoadError';
  constructor(
    readonly engine: SqliteEngine,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Parses the choice (from {@link SQLITE_ENGINE_ENV} or an option).
 *
 * @throws OnejobError `config_invalid` for anything but the three names.
 */
export function parseSqliteEngineChoice(value: string | undefined): SqliteEngineChoice {
  if (value === undefined || value === '' || value === 'auto') return 'auto';
  if (value === 'better-sqlite3' || value === 'node:sqlite') return value;
  throw new OnejobError('config_invalid', `${SQLITE_ENGINE_ENV}=${JSON.stringify(value)} is not an engine: use better-sqlite3, node:sqlite or auto (the default: better-sqlite3, else node:sqlite)`);
}

/**
 * Whether this Node has `node:sqlite` without a flag: 22.13+, 23.4+, 24 and
 * later. Where it says true, node:sqlite failing to load is a defect, not a
 * missing feature (the conformance suite fails on it).
 */
export function nodeSqliteExpected(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
}

/** The message when better-sqlite3 cannot be loaded and nothing can stand in: the whole cause and what to do. */
export function engineUnavailableMessage(path: string, betterSqlite3Cause: string, nodeSqliteCause: string | null): string {
  const node = `Node ${process.version}`;
  const sentence = (text: string): string => text.trim().replace(/\.$/, '');
  const fallback = nodeSqliteCause === null
    ? ''
    : nodeSqliteExpected()
      ? ` node:sqlite, the fallback, could not be loaded either: ${sentence(nodeSqliteCause)}.`
      : ` ${node} has no node:sqlite to fall back to (Node 22.13+, 24 and 26 have it).`;
  return (
    `cannot open SQLite database ${path}: better-sqlite3 could not be loaded by ${node}: ${sentence(betterSqlite3Cause)}.${fallback} ` +
    `To fix it: run \`${BETTER_SQLITE3_FIX}\` with this Node, in the folder onejob is installed in (it builds the module for this Node), ` +
    'or run onejob on Node 22.13 or later, where it falls back to node:sqlite, or use a postgres:// URL'
  );
}

/** The message when node:sqlite was asked for ({@link SQLITE_ENGINE_ENV}) and this Node cannot load it. */
export function nodeSqliteUnavailableMessage(path: string, cause: string): string {
  return `cannot open SQLite database ${path} on node:sqlite: Node ${process.version} cannot load it (${cause}); it is in Node 22.13+, 24 and 26. Use ${SQLITE_ENGINE_ENV}=better-sqlite3 or auto`;
}

/** What the banner and the startup log say of a fallback. */
export function fallbackReasonOf(betterSqlite3Cause: string): string {
  return `better-sqlite3 could not be loaded by Node ${process.version} (${betterSqlite3Cause}); \`${BETTER_SQLITE3_FIX}\` makes it the engine again`;
}
