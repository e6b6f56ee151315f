/**
 * How the PostgreSQL driver words and classifies database errors (see
 * docs/postgres-driver.md, "Errors"; which errors are transient is decided
 * in `../transient-errors.ts`).
 */
import { OnejobError } from '../../core/errors.ts';
import { isConnectionFailure, isTransientDatabaseError } from '../transient-errors.ts';

/** Whether `e` says the database could not be reached or the connection broke (see `transient-errors.ts`). */
export function isConnectionError(e: unknown): boolean {
  return isConnectionFailure(e);
}

/** SQLSTATEs after which re-running the whole transaction at once may succeed: serialization failure, deadlock, lock timeout. */
export const RETRYABLE_TX_SQLSTATES = new Set(['40001', '40P01', '55P03']);

/** Whether re-running the whole transaction may succeed (a deadlock, a serialization failure, a lock timeout). */
export function isRetryableTransactionError(e: unknown): boolean {
  // Statements inside a transaction come back already mapped: look at what is underneath.
  const raw = e instanceof OnejobError ? e.cause : e;
  return raw instanceof Error && RETRYABLE_TX_SQLSTATES.has((raw as { code?: string }).code ?? '');
}

/** `host:port/database` of a connection string, never its password. */
export function describeTarget(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    return `${url.hostname || 'localhost'}:${url.port || '5432'}${url.pathname || ''}`;
  } catch {
    return 'the configured database';
  }
}

/** The first line worth showing of a database error (an AggregateError's first error). */
export function errorMessage(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return errorMessage(e.errors[0]);
  if (e instanceof Error) return e.message || (e as { code?: string }).code || e.name;
  return String(e);
}

/**
 * A `database_unavailable` error for a connection failure `cause`, worded by what the server said:
 * a login it refused (SQLSTATE class 28: no such role, a wrong password, pg_hba) or a database it
 * does not have (3D000) is not an unreachable server, and the remedy is in DATABASE_URL.
 */
export function unavailableError(target: string, cause: unknown): OnejobError {
  const code = (cause as { code?: unknown } | null)?.code;
  const why = typeof code === 'string' && code.startsWith('28')
    ? 'refused the login (check the user and password in DATABASE_URL)'
    : code === '3D000' ? 'has no such database (check the database name in DATABASE_URL)' : 'is unreachable';
  return new OnejobError('database_unavailable', `PostgreSQL at ${target} ${why}: ${errorMessage(cause)}`, { cause });
}

/**
 * Transient failures (a lost connection, a timeout, a serialization failure
 * that outlived the retries) → `database_unavailable`, the cause kept;
 * anything else (a constraint, a syntax error) unchanged.
 */
export function mapDatabaseError(target: string, e: unknown): unknown {
  if (e instanceof OnejobError) return e;
  if (isConnectionFailure(e)) return unavailableError(target, e);
  if (isTransientDatabaseError(e)) {
    return new OnejobError('database_unavailable', `PostgreSQL at ${target} could not complete the statement now: ${errorMessage(e)}`, { cause: e });
  }
  return e;
}
