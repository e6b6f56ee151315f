/**
 * Database faults of `npm run chaos -- --ha`, against the Patroni cluster
 * (chaos/patroni-cluster.ts), one at a time beside the usual fault scheduler:
 *
 * | kind | what happens to the leader |
 * | --- | --- |
 * | `ha-kill9-postgres` | `kill -9` of its whole PostgreSQL (postmaster and backends); Patroni fails over at once (`master_start_timeout 0`) and rejoins the old node with pg_rewind |
 * | `ha-kill-patroni` | `kill -9` of its Patroni; PostgreSQL keeps running, HAProxy's `/primary` check fails, the leader key expires after the ttl, the synchronous standby takes over; Patroni is started again after ttl + 6 s and demotes/rewinds its node |
 * | `ha-switchover` | a planned switchover (`POST /switchover` on Patroni's REST API) |
 * | `ha-stall` | every byte to its PostgreSQL and between its Patroni and etcd held for longer than the ttl: its Patroni demotes it, another node is promoted; then the network heals |
 *
 * The kinds come in that order, round robin. After each fault the loop waits
 * until the cluster is healthy again (a leader, two replicas, a synchronous
 * standby) and then some steady seconds before the next one.
 * {@link failoverTimes} then reads the clients' histories: how long after
 * each fault creates succeeded again.
 */
import { appendFileSync } from 'node:fs';
import { sleep } from './cluster.ts';
import { PATRONI_TIMING, type PatroniCluster } from './patroni-cluster.ts';
import type { FaultRecord, HistoryEntry } from './records.ts';

/** The kinds, in the order they are injected. */
export const HA_FAULT_KINDS = ['ha-kill9-postgres', 'ha-kill-patroni', 'ha-switchover', 'ha-stall'] as const;

/** A fault and when the cluster was healthy again (ms on the run's clock). */
export interface HaFaultRecord extends FaultRecord {
  detail: string;
  /** When the cluster was healthy again, or null when it was not within the heal timeout. */
  healedAt: number | null;
  /** The leader after the fault. */
  newLeader: string | null;
  /** ms of the fault window during which an API process's `/readyz` answered other than 200 (sampled every 250 ms). */
  readyzDownMs: number;
}

/** Options of {@link HaFaultLoop}. */
export interface HaFaultOptions {
  readonly ha: PatroniCluster;
  readonly clock: () => number;
  /** faults.jsonl: HA faults are written there too. */
  readonly file: string;
  readonly log: (line: string) => void;
  /** Steady time between a heal and the next fault. */
  readonly steadyMs: number;
  /** Epoch ms: no fault starts unless it can heal before then. */
  readonly until: number;
  /** How long a fault may take to heal. Default 120 s. */
  readonly healTimeoutMs?: number;
  /** An API process whose `/readyz` is sampled during each fault. */
  readonly readyzUrl?: string;
}

/** Injects the HA faults until stopped or out of time. */
export class HaFaultLoop {
  readonly records: HaFaultRecord[] = [];
  #stopped = false;
  #loop: Promise<void> | null = null;

  constructor(private readonly o: HaFaultOptions) {}

  start(): void {
    this.#loop = (async () => {
      // The longest fault (kill-patroni) takes about ttl + 6 s, its heal another 10–20 s.
      const budgetMs = (PATRONI_TIMING.ttl + 6) * 1000 + 25_000;
      for (let i = 0; !this.#stopped; i++) {
        await this.#pause(this.o.steadyMs);
        if (this.#stopped || Date.now() + budgetMs > this.o.until) break;
        const kind = HA_FAULT_KINDS[i % HA_FAULT_KINDS.length]!;
        try {
          await this.#one(kind);
        } catch (e) {
          this.o.log(`HA fault ${kind} failed: ${String(e)}`);
        }
      }
    })();
  }

  async #pause(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (!this.#stopped && Date.now() < end) await sleep(Math.min(250, end - Date.now()));
  }

  async #one(kind: (typeof HA_FAULT_KINDS)[number]): Promise<void> {
    const { ha, log } = this.o;
    const leader = await ha.leader();
    if (leader === null) {
      log(`HA fault ${kind}: no leader right now, skipped`);
      return;
    }
    const record = (detail: string): HaFaultRecord => {
      const r: HaFaultRecord = { at: Math.round(this.o.clock()), kind, target: leader.name, detail, healedAt: null, newLeader: null, readyzDownMs: 0 };
      this.records.push(r);
      return r;
    };
    let sampling = true;
    let readyzDownMs = 0;
    const sampler = (async () => {
      if (this.o.readyzUrl === undefined) return;
      while (sampling) {
        const t = Date.now();
        const ok = await fetch(`${this.o.readyzUrl}/readyz`, { signal: AbortSignal.timeout(2000) }).then((res) => res.body?.cancel().then(() => res.ok) ?? res.ok, () => false);
        await sleep(Math.max(0, 250 - (Date.now() - t)));
        if (!ok) readyzDownMs += Date.now() - t;
      }
    })();
    let r: HaFaultRecord;
    const ttlMs = PATRONI_TIMING.ttl * 1000;
    switch (kind) {
      case 'ha-kill9-postgres': {
        r = record('kill -9 of the leader PostgreSQL');
        const pid = ha.killPostgres(leader);
        r.detail = `kill -9 of the leader PostgreSQL (postmaster ${pid ?? 'not found'})`;
        break;
      }
      case 'ha-kill-patroni': {
        r = record(`kill -9 of the leader's Patroni; started again after ${ttlMs + 6000} ms`);
        await leader.patroni.kill9();
        await sleep(ttlMs + 6000);
        leader.patroni.start();
        break;
      }
      case 'ha-switchover': {
        r = record('switchover through the REST API');
        const answer = await ha.switchover(leader);
        r.detail = `switchover through the REST API: ${answer.slice(0, 120)}`;
        break;
      }
      case 'ha-stall': {
        const stallMs = ttlMs + 5000;
        r = record(`network stall of the leader (PostgreSQL and etcd links) for ${stallMs} ms`);
        await ha.stall(leader, true);
        await sleep(stallMs);
        await ha.stall(leader, false);
        break;
      }
    }
    log(`HA fault ${kind} on ${leader.name}: ${r.detail}`);
    try {
      await ha.waitHealthy(this.o.healTimeoutMs ?? 120_000);
      r.healedAt = Math.round(this.o.clock());
      r.newLeader = (await ha.leader())?.name ?? null;
      log(`HA cluster healthy again ${((r.healedAt - r.at) / 1000).toFixed(1)} s after ${kind}; leader ${r.newLeader}`);
    } catch (e) {
      log(`HA cluster not healthy after ${kind}: ${String(e)}; members ${JSON.stringify(await ha.members().catch(() => []))}`);
    }
    sampling = false;
    await sampler;
    r.readyzDownMs = readyzDownMs;
    appendFileSync(this.o.file, `${JSON.stringify(r)}\n`);
  }

  /** Stops injecting; waits for the fault in progress to heal; un-stalls and restarts anything left down. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    for (const n of this.o.ha.nodes) {
      if (this.o.ha.stalled(n)) await this.o.ha.stall(n, false);
      if (!n.patroni.running) n.patroni.start();
    }
    await this.o.ha.waitHealthy(this.o.healTimeoutMs ?? 120_000).catch((e: unknown) => this.o.log(`HA cluster not healthy at the end: ${String(e)}`));
  }
}

/** What the clients saw around one fault. */
export interface FailoverTime {
  readonly kind: string;
  readonly from: string;
  readonly to: string | null;
  /** ms from the fault to the first create answered 200/201 that was sent after it. */
  readonly firstOkMs: number | null;
  /**
   * ms from the fault to the first create answered 200/201 that was sent
   * after the last failed one (5xx, connection error, a timeout ≥ 5 s) of the
   * window from the fault to the heal: the write outage as clients saw it.
   */
  readonly recoveredMs: number | null;
  /** Creates that failed in that window, by status (or `network`/`timeout`). */
  readonly failed: Readonly<Record<string, number>>;
  readonly healedMs: number | null;
  /** How long `/readyz` of one API process said not ready during the fault window. */
  readonly readyzDownMs: number;
}

const okCreate = (h: HistoryEntry): boolean => h.op === 'create' && (h.status === 201 || h.status === 200);
const failedCreate = (h: HistoryEntry): boolean =>
  h.op === 'create' && ((h.status !== null && h.status >= 500) || h.outcome === 'network' || (h.outcome === 'timeout' && h.recvAt - h.sentAt >= 5000));

/** Per HA fault: the times of {@link FailoverTime}, from the histories. */
export function failoverTimes(history: readonly HistoryEntry[], faults: readonly HaFaultRecord[]): FailoverTime[] {
  const creates = history.filter((h) => h.op === 'create').sort((a, b) => a.sentAt - b.sentAt);
  return faults.map((f, i) => {
    const windowEnd = f.healedAt ?? faults[i + 1]?.at ?? Number.POSITIVE_INFINITY;
    const after = creates.filter((h) => h.sentAt >= f.at);
    const firstOk = after.find(okCreate);
    const failures = after.filter((h) => h.sentAt <= windowEnd && failedCreate(h));
    const lastFailSent = failures.reduce((m, h) => Math.max(m, h.sentAt), f.at);
    const recovered = after.filter((h) => h.sentAt >= lastFailSent && okCreate(h)).sort((a, b) => a.recvAt - b.recvAt)[0];
    const failed: Record<string, number> = {};
    for (const h of failures) {
      const code = (h.response as { code?: unknown } | undefined)?.code;
      const k = h.status === null ? h.outcome : typeof code === 'string' ? `${h.status} ${code}` : String(h.status);
      failed[k] = (failed[k] ?? 0) + 1;
    }
    return {
      kind: f.kind, from: f.target, to: f.newLeader,
      firstOkMs: firstOk === undefined ? null : Math.round(firstOk.recvAt - f.at),
      recoveredMs: recovered === undefined ? null : Math.round(recovered.recvAt - f.at),
      failed,
      healedMs: f.healedAt === null ? null : f.healedAt - f.at,
      readyzDownMs: f.readyzDownMs,
    };
  });
}

/** One line per failover, for the report. */
export function formatFailoverTimes(times: readonly FailoverTime[]): string[] {
  const s = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)} s`);
  return times.map((t) =>
    `failover ${t.kind} ${t.from}→${t.to ?? '?'}: creates ok again after ${s(t.recoveredMs)} (first ok ${s(t.firstOkMs)}; cluster healthy after ${s(t.healedMs)}; readyz not ready ${s(t.readyzDownMs)}; failed creates ${JSON.stringify(t.failed)})`);
}
