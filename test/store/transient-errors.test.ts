/**
 * The one classification of database errors (src/store/transient-errors.ts):
 * what is worth trying again, for both engines, through wrappers.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { OnejobError } from '../../src/core/errors.ts';
import { classifyDatabaseError, isConnectionFailure } from '../../src/store/transient-errors.ts';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code, severity: 'ERROR' });
const errno = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -1, syscall: 'connect' });

describe('classifyDatabaseError', () => {
  it.each([
    ['serialization failure', pgError('40001')],
    ['deadlock', pgError('40P01')],
    ['statement timeout', pgError('57014', 'canceling statement due to statement timeout')],
    ['lock timeout', pgError('55P03')],
    ['admin shutdown (server restarting)', pgError('57P01', 'terminating connection due to administrator command')],
    ['cannot connect now', pgError('57P03', 'the database system is starting up')],
    ['too many connections', pgError('53300')],
    ['connection exception class 08', pgError('08006')],
    ['refused', errno('ECONNREFUSED')],
    ['reset', errno('ECONNRESET')],
    ['pg connection terminated', new Error('Connection terminated unexpectedly')],
    ['pg connect timeout', new Error('timeout exceeded when trying to connect')],
    ['pg read timeout', new Error('Query read timeout')],
    ['SQLITE_BUSY', new Database.SqliteError('database is locked', 'SQLITE_BUSY')],
    ['SQLITE_BUSY_SNAPSHOT', new Database.SqliteError('database is locked', 'SQLITE_BUSY_SNAPSHOT')],
    ['database_unavailable', new OnejobError('database_unavailable', 'down')],
    ['a full queue', new OnejobError('unavailable', 'full')],
    ['a wrapped deadlock', new OnejobError('internal', 'tx failed', { cause: pgError('40P01') })],
    ['an AggregateError of refusals', new AggregateError([errno('ECONNREFUSED'), errno('ECONNREFUSED')], '')],
  ])('%s is transient', (_name, e) => {
    expect(classifyDatabaseError(e)).toBe('transient');
  });

  it.each([
    ['unique violation', pgError('23505')],
    ['check violation', pgError('23514')],
    ['syntax error', pgError('42601')],
    ['SQLITE_CONSTRAINT', new Database.SqliteError('CHECK constraint failed', 'SQLITE_CONSTRAINT_CHECK')],
    ['a lost lease, whatever its cause', new OnejobError('lease_lost', 'fenced', { cause: errno('ECONNRESET') })],
    ['an attempt already settled', new OnejobError('attempt_finished', 'done')],
    ['a plain error', new Error('something else')],
    ['not an error at all', 'oops'],
    ['null', null],
  ])('%s is permanent', (_name, e) => {
    expect(classifyDatabaseError(e)).toBe('permanent');
  });

  it('tells a broken connection from a busy statement', () => {
    expect(isConnectionFailure(errno('ECONNREFUSED'))).toBe(true);
    expect(isConnectionFailure(new OnejobError('database_unavailable', 'x', { cause: pgError('57P01') }))).toBe(true);
    expect(isConnectionFailure(pgError('40P01'))).toBe(false);
    expect(isConnectionFailure(pgError('57014'))).toBe(false);
  });
});
