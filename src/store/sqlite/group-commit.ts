/**
 * Scripts and their group commit on SQLite.
 *
 * A script is a few statements, each run only when an earlier one applied
 * ({@link ScriptStep}). The writes that stand alone (a job insert, the fast
 * path's create and settle, a stream claim, marking an attempt running) are
 * scripts, so they can run two ways: inside a transaction, one statement
 * after another ({@link runScriptInOrder}); or autocommit, group-committed
 * ({@link ScriptGroupCommit}).
 */
import { OnejobError } from '../../core/errors.ts';
import { toError, type BatchEntry, type Kind, type ScriptStep, type SqliteConnection } from './sqlite-connection.ts';

/** Group-commit batches of autocommit scripts on their way at once (more: smaller batches, more syncs). */
const INSERT_PIPELINES = 1;

/** Whether a script step applied (the worker's `applied`, on this side). */
function stepApplied(result: unknown): boolean {
  if (result === null || result === undefined) return false;
  if (typeof result === 'number') return result > 0;
  if (Array.isArray(result)) return result.length > 0;
  return true;
}

/** Runs a script's steps as plain statements over `exec`, one after another (inside a transaction). */
export async function runScriptInOrder(exec: (k: Kind, sql: string, args: unknown[]) => Promise<unknown>, steps: ScriptStep[]): Promise<unknown[]> {
  const results: unknown[] = [];
  for (const step of steps) results.push(step.if !== undefined && !stepApplied(results[step.if]) ? null : ((await exec(step.k, step.s, step.p)) ?? null));
  return results;
}

/**
 * Group commit of autocommit scripts: calls that arrive while a batch is on
 * its way (or while a transaction holds the gate) wait together and go as
 * ONE message, written by the worker in one `BEGIN IMMEDIATE … COMMIT` (one
 * WAL sync for all of them, `synchronous = FULL` kept). Each script runs in
 * its own savepoint, so a failing one (a CHECK, say) fails only its caller;
 * every caller is answered after the COMMIT. At most the connection's
 * `maxQueued` scripts wait; one more is refused at once with `unavailable`.
 */
export class ScriptGroupCommit {
  readonly #conn: SqliteConnection;
  #queue: { readonly steps: ScriptStep[]; readonly resolve: (results: unknown[]) => void; readonly reject: (e: unknown) => void }[] = [];
  #batchesOut = 0;
  #batchWaiting = false;

  constructor(conn: SqliteConnection) {
    this.#conn = conn;
  }

  /** Runs `steps` in the next batch; resolves with one result per step once it is committed. */
  readonly run = (steps: ScriptStep[]): Promise<unknown[]> =>
    this.#conn.whileBusy(() => new Promise((resolve, reject) => {
      if (this.#queue.length >= this.#conn.maxQueued) {
        reject(new OnejobError('unavailable', `${this.#queue.length} writes are already waiting for the SQLite database ${this.#conn.path}`));
        return;
      }
      this.#queue.push({ steps, resolve, reject });
      this.#pump();
    }));

  #pump(): void {
    if (this.#batchWaiting || this.#batchesOut >= INSERT_PIPELINES || this.#queue.length === 0) return;
    this.#batchWaiting = true;
    this.#batchesOut++;
    this.#conn.whenFree(() => {
      this.#batchWaiting = false;
      const batch = this.#queue;
      this.#queue = [];
      this.#conn.send<BatchEntry[]>({ t: 'sb', scripts: batch.map((p) => p.steps) })
        .then(
          (entries) => {
            batch.forEach((p, i) => {
              const r = entries[i];
              if (!r) p.reject(new Error('the SQLite worker answered fewer scripts than sent'));
              else if (r.e) p.reject(toError(r.e));
              else p.resolve(r.v);
            });
          },
          (e: unknown) => {
            for (const p of batch) p.reject(e);
          },
        )
        .finally(() => {
          this.#batchesOut--;
          this.#pump();
        });
      return false;
    });
  }
}
