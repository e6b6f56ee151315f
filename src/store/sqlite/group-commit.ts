/**
 * Scripts on SQLite: in order inside a transaction, and the SQLite lane of
 * the group commit above the drivers (`../batched-queries.ts`).
 *
 * A script is a few statements, each run only when an earlier one applied
 * ({@link ScriptStep}). The writes that stand alone (a job insert, the fast
 * path's create and settle, a stream claim, marking an attempt running) are
 * scripts (`scripted-writes.ts`), so they run two ways: inside a
 * transaction, one statement after another ({@link runScriptInOrder}); or
 * autocommit, group-committed ({@link sqliteLane}).
 */
import { ItemFailed } from '../batcher.ts';
import type { BatchedCall, BatchLane } from '../batched-queries.ts';
import { SCRIPT_PLANS, type ScriptedMethod, type ScriptPlan } from './scripted-writes.ts';
import { toError, type BatchEntry, type Kind, type ScriptStep, type SqliteConnection } from './sqlite-connection.ts';

/** Group-commit batches of autocommit scripts on their way at once (more: smaller batches, more syncs). */
const SCRIPT_PIPELINES = 1;

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

/** Sends scripts as ONE worker message: one `BEGIN IMMEDIATE … COMMIT`, a savepoint per script (a failing one fails alone). */
function sendScripts(conn: SqliteConnection, scripts: ScriptStep[][]): Promise<BatchEntry[]> {
  return conn.send<BatchEntry[]>({ t: 'sb', scripts });
}

/** One autocommit script alone (a batch of one). */
export async function scriptAlone(conn: SqliteConnection, steps: ScriptStep[]): Promise<unknown[]> {
  const [entry] = await sendScripts(conn, [steps]);
  if (!entry) throw new Error('the SQLite worker answered no script');
  if (entry.e) throw toError(entry.e);
  return entry.v;
}

/**
 * The SQLite lane: the scripted writes, mixed, in one worker message, one
 * WAL sync for all of them (`synchronous = FULL` kept); every caller is
 * answered after the COMMIT. One batch on its way at a time, taken only when
 * the transaction gate is free, so the calls that arrive while a transaction
 * holds it leave together after it.
 */
export function sqliteLane(conn: SqliteConnection): BatchLane {
  return {
    methods: Object.keys(SCRIPT_PLANS) as ScriptedMethod[],
    maxInFlight: SCRIPT_PIPELINES,
    whenReady: (go) => conn.whenFree(() => (go(), false)),
    // The script is written when the call is made (while the batch before it is in the worker), not when its batch leaves.
    prepare: (c) => (SCRIPT_PLANS[c.method as ScriptedMethod] as (...a: unknown[]) => ScriptPlan<unknown>)(...c.args),
    // The results are read into jobs and attempts by each caller, after the next batch has left.
    answer: (c, results) => (c.prepared as ScriptPlan<unknown>).read(results as unknown[]),
    one: async (c) => {
      const plan = c.prepared as ScriptPlan<unknown>;
      return plan.read(await scriptAlone(conn, plan.steps));
    },
    many: async (calls: readonly BatchedCall[]) => {
      const entries = await sendScripts(conn, calls.map((c) => (c.prepared as ScriptPlan<unknown>).steps));
      return calls.map((_, i) => {
        const r = entries[i];
        if (!r) return new ItemFailed(new Error('the SQLite worker answered fewer scripts than sent'));
        return r.e ? new ItemFailed(toError(r.e)) : r.v;
      });
    },
  };
}
