/**
 * Which database errors are worth trying again: one classification for both
 * engines, used by the drivers (to map failures to `database_unavailable`
 * and to re-run transactions) and by the executor (to keep retrying a
 * settle instead of dropping a provider's answer).
 *
 * - **transient**: the same statement may succeed later, unchanged: the
 *   connection broke or could not be made (node socket errors, pg's own
 *   connection messages, SQLSTATE class 08), the server is shutting down or
 *   starting (57P01–57P03), overloaded (class 53), a serialization failure
 *   or deadlock (40001, 40P01), a statement or lock timeout (57014, 55P03),
 *   SQLite busy or locked (`SQLITE_BUSY*`, `SQLITE_LOCKED*`), and onejob's
 *   own `database_unavailable` / `unavailable`;
 * - **permanent**: everything else (a constraint, a syntax error, a fenced-out
 *   write reported as `lease_lost`): trying again cannot help.
 *
 * A wrapped error is classified by its `cause` chain, so a driver's
 * `OnejobError` around a pg error still says what happened underneath.
 */
import { isOnejobError } from '../core/errors.ts';

/** The verdict on one error. */
export type ErrorClass = 'transient' | 'permanent';

/** Node socket and resolver errnos after which a new connection may work. */
const TRANSIENT_ERRNOS = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH',
  'ENETDOWN', 'EAI_AGAIN', 'ENOTFOUND',
]);

/** SQLSTATEs (outside the transient classes below) that may pass when repeated. */
const TRANSIENT_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '57014', // query_canceled (statement_timeout)
  '55P03', // lock_not_available (lock_timeout)
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down)
  '57P05', // idle_session_timeout
  '25P03', // idle_in_transaction_session_timeout
  '25006', // read_only_sql_transaction: the connection reached a standby after a failover; the write did not run
]);

/** SQLSTATE classes that are transient as a whole: 08 connection exception, 53 insufficient resources. */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08', '53']);

/** pg's messages for connection trouble that carry no code. */
const TRANSIENT_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed|Connection ended|Query read timeout|the database system is (starting up|shutting down)|terminating connection/i;

/** SQLite result codes (better-sqlite3 `code`) that clear when the other writer is done. */
function isTransientSqliteCode(code: string): boolean {
  return code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_') || code === 'SQLITE_LOCKED' || code.startsWith('SQLITE_LOCKED_');
}

function classifyOne(e: unknown): ErrorClass {
  if (isOnejobError(e)) return e.code === 'database_unavailable' || e.code === 'unavailable' ? 'transient' : 'permanent';
  if (typeof e !== 'object' || e === null) return 'permanent';
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (TRANSIENT_ERRNOS.has(code) || TRANSIENT_SQLSTATES.has(code)) return 'transient';
    if (/^[0-9A-Z]{5}$/.test(code) && TRANSIENT_SQLSTATE_CLASSES.has(code.slice(0, 2))) return 'transient';
    if (code.startsWith('SQLITE_')) return isTransientSqliteCode(code) ? 'transient' : 'permanent';
  }
  const message = (e as { message?: unknown }).message;
  if (typeof message === 'string' && TRANSIENT_MESSAGES.test(message)) return 'transient';
  if (e instanceof AggregateError) return e.errors.some((x) => classifyOne(x) === 'transient') ? 'transient' : 'permanent';
  return 'permanent';
}

/**
 * Classifies a database error (or anything thrown by a store call).
 *
 * An error that is transient by itself, or whose `cause` chain holds a
 * transient one, is transient; a fenced-out write (`lease_lost`,
 * `attempt_finished`) is permanent whatever its cause.
 *
 * @example classifyDatabaseError(Object.assign(new Error('deadlock'), { code: '40P01' })) // 'transient'
 */
export function classifyDatabaseError(e: unknown): ErrorClass {
  let current: unknown = e;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if (isOnejobError(current) && current.code !== 'database_unavailable' && current.code !== 'unavailable' && current.code !== 'internal') return 'permanent';
    if (classifyOne(current) === 'transient') return 'transient';
    current = (current as { cause?: unknown }).cause;
  }
  return 'permanent';
}

/** Whether trying the same database call again later may succeed. See {@link classifyDatabaseError}. */
export function isTransientDatabaseError(e: unknown): boolean {
  return classifyDatabaseError(e) === 'transient';
}

/** Whether `e` says the database could not be reached or the connection broke (not a busy or conflicting statement). */
export function isConnectionFailure(e: unknown): boolean {
  let current: unknown = e;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (TRANSIENT_ERRNOS.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300' || code === '25006')) return true;
    const message = (current as { message?: unknown }).message;
    if (typeof message === 'string' && TRANSIENT_MESSAGES.test(message)) return true;
    if (current instanceof AggregateError && current.errors.some((x) => isConnectionFailure(x))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
