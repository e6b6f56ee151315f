/**
 * CPU time per request (issue 26): what a side's processes spent on the CPU
 * during one run, read from `/proc/<pid>/stat` (utime + stime, in clock
 * ticks of 10 ms on Linux), divided by the requests it answered. A figure
 * that holds on a busy machine where wall-clock rates do not.
 *
 * For onejob on PostgreSQL the database's share is counted too: the backends
 * connected to the series' database (`pg_stat_activity.datname`), read the
 * same way. A backend that appears during the run counts from zero (its
 * whole life is inside the run); one that exits during the run is lost (the
 * pools keep their connections for the run, so none does; the count is
 * reported). The WAL writer, checkpointer and autovacuum are not counted on
 * any side.
 */
import { readFileSync } from 'node:fs';
import { adminQuery } from './pg-admin.ts';

const TICK_MS = 10; // getconf CLK_TCK = 100 on Linux

/** utime + stime of `pid` in ms, or null when it is gone. */
export function processCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at field 3; utime, stime are fields 14, 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) * TICK_MS;
  } catch {
    return null;
  }
}

/** The PostgreSQL backends connected to database `dbName`. */
async function backendPids(dbName: string): Promise<number[]> {
  const rows = await adminQuery<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = '${dbName.replace(/'/g, "''")}' AND backend_type = 'client backend'`);
  return rows.map((r) => Number(r.pid));
}

/** What one run cost on the CPU. */
export interface CpuUse {
  /** The side's own processes (the server: onejob, Portkey, the fake provider direct). */
  readonly processMs: number;
  /** The database backends of the series (0 without a database). */
  readonly databaseMs: number;
  /** Backends seen; backends that exited during the run (their time is lost). */
  readonly backends: number;
  readonly backendsLost: number;
}

/** Starts measuring `pids` (and the backends of `dbName`); `stop()` returns the CPU spent since. */
export async function cpuMeter(pids: readonly number[], dbName?: string): Promise<{ stop(): Promise<CpuUse> }> {
  const read = async (): Promise<{ proc: number; db: Map<number, number> }> => {
    const db = new Map<number, number>();
    if (dbName) for (const pid of await backendPids(dbName)) db.set(pid, processCpuMs(pid) ?? 0);
    return { proc: pids.reduce((a, pid) => a + (processCpuMs(pid) ?? 0), 0), db };
  };
  const before = await read();
  return {
    async stop(): Promise<CpuUse> {
      const after = await read();
      let databaseMs = 0;
      for (const [pid, ms] of after.db) databaseMs += ms - (before.db.get(pid) ?? 0);
      const backendsLost = [...before.db.keys()].filter((pid) => !after.db.has(pid)).length;
      return { processMs: after.proc - before.proc, databaseMs, backends: after.db.size, backendsLost };
    },
  };
}

/** CPU ms per request of a run (null when nothing was answered). */
export function perRequest(use: CpuUse, requests: number): { processMs: number; databaseMs: number; totalMs: number } | null {
  if (requests <= 0) return null;
  const r = (x: number): number => Math.round((x / requests) * 10_000) / 10_000;
  return { processMs: r(use.processMs), databaseMs: r(use.databaseMs), totalMs: r(use.processMs + use.databaseMs) };
}
