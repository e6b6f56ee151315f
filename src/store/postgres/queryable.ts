/**
 * The one thing the PostgreSQL query files need from a connection: run a
 * (named, parameterized) statement. The driver passes its pool for
 * autocommit queries and a checked-out client inside a transaction.
 */
import type { QueryConfig, QueryResult, QueryResultRow } from 'pg';

/** A pool or a client, as seen by the query files. */
export interface Queryable {
  query<R extends QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>>;
}
