/**
 * The database outage fault (issue #20 §2, "the database away longer than a
 * lease"): PostgreSQL unreachable for the cluster's API and executor
 * processes for about a minute while answers are in flight. They reach
 * PostgreSQL through a TCP proxy of their own (`Cluster.databaseProxy`,
 * chaos/cluster.ts); the outage resets every connection open through it and
 * refuses new ones, as a stopped server would, without touching the shared
 * server (its other users, the rig's own reads and the checker go around).
 *
 * What must hold (the checker's rules, nothing special-cased): every answer
 * a provider gave meanwhile is held by its executor and recorded when the
 * database returns, once (no duplicate provider call, no answer lost), and
 * every job ends within the liveness bound after the faults stop.
 */
import { sleep } from './cluster.ts';
import type { TcpProxy } from './tcp-proxy.ts';

/** When the outage starts (after the workload began) and how long it lasts. */
export interface DatabaseOutagePlan {
  readonly afterMs: number;
  readonly durationMs: number;
}

/** Options of {@link databaseOutage}. */
export interface DatabaseOutageOptions extends DatabaseOutagePlan {
  readonly proxy: Pick<TcpProxy, 'setDown'>;
  /** Records the fault (`faults.jsonl`). */
  readonly record: (kind: string, target: string, detail: string) => void;
  readonly log: (line: string) => void;
  /** The scheduler stopped before the outage began: it is skipped. */
  readonly stopped: () => boolean;
}

/** Waits `afterMs`, then takes the database away from onejob for `durationMs`; it always comes back. */
export async function databaseOutage(o: DatabaseOutageOptions): Promise<void> {
  await sleep(o.afterMs);
  if (o.stopped()) return;
  o.record('database-outage', 'postgresql', `${o.durationMs} ms: every connection of the API and executor processes reset, new ones refused`);
  o.log(`database outage: ${Math.round(o.durationMs / 1000)} s`);
  o.proxy.setDown(true);
  try {
    await sleep(o.durationMs);
  } finally {
    o.proxy.setDown(false);
  }
  o.log('database outage over: PostgreSQL reachable again');
}
