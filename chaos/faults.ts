/**
 * The fault scheduler: every few seconds, one fault from a weighted menu,
 * each bounded in time and recorded (one JSON line in `faults.jsonl`).
 * {@link FaultScheduler.stop} waits for the faults in progress to end and
 * heals everything (SIGCONT, restarts, proxies calm, fakes calm, gates open).
 */
import { appendFileSync } from 'node:fs';
import { sleep, type Cluster, type ManagedProcess } from './cluster.ts';
import { databaseOutage, type DatabaseOutagePlan } from './database-outage.ts';
import type { FakeDirector } from './fake-director.ts';
import type { FaultRecord } from './records.ts';
import type { CutPoint } from './tcp-proxy.ts';
import { pickWeighted } from './pick.ts';

/** Options of {@link FaultScheduler}. */
export interface FaultOptions {
  readonly cluster: Cluster;
  readonly director: FakeDirector;
  readonly random: () => number;
  readonly clock: () => number;
  readonly file: string;
  /** Mean pause between faults. */
  readonly everyMs: number;
  readonly leaseMs: number;
  /**
   * Epoch ms when the workload ends. An API process with an executor inside is
   * not killed later than a lease and the rescue before it, so its attempts are
   * rescued before the liveness check's clock starts.
   */
  readonly until?: number | undefined;
  /** Restart PostgreSQL (disturbs other users of the server: long mode only). */
  readonly postgresRestart: boolean;
  /** At most one PostgreSQL restart per this many ms. */
  readonly postgresEveryMs: number;
  /** One database outage for onejob's processes (chaos/database-outage.ts), beside the other faults; none when absent. */
  readonly databaseOutage?: DatabaseOutagePlan | undefined;
  readonly log: (line: string) => void;
}

/** Injects faults until stopped. */
export class FaultScheduler {
  readonly records: FaultRecord[] = [];
  readonly #tasks = new Set<Promise<void>>();
  #stopped = false;
  #loop: Promise<void> | null = null;
  #lastPostgres: number;
  #postgresBusy = false;

  constructor(private readonly o: FaultOptions) {
    this.#lastPostgres = o.clock() - o.postgresEveryMs / 2;
  }

  #record(kind: string, target: string, detail?: string): void {
    const r: FaultRecord = { at: Math.round(this.o.clock()), kind, target, ...(detail === undefined ? {} : { detail }) };
    this.records.push(r);
    appendFileSync(this.o.file, `${JSON.stringify(r)}\n`);
  }

  #pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.o.random() * xs.length)]!;
  }

  #between(lo: number, hi: number): number {
    return lo + Math.floor(this.o.random() * (hi - lo));
  }

  start(): void {
    if (this.o.databaseOutage !== undefined) {
      const outage = databaseOutage({ ...this.o.databaseOutage, proxy: this.o.cluster.databaseProxy, record: (k, t, d) => this.#record(k, t, d), log: this.o.log, stopped: () => this.#stopped })
        .catch((e: unknown) => this.o.log(`fault failed: ${String(e)}`));
      this.#tasks.add(outage);
      void outage.finally(() => this.#tasks.delete(outage));
    }
    this.#loop = (async () => {
      while (!this.#stopped) {
        await sleep(this.#between(this.o.everyMs / 2, (this.o.everyMs * 3) / 2));
        if (this.#stopped) break;
        if (this.#tasks.size >= 3) continue;
        const task = this.#one().catch((e: unknown) => this.o.log(`fault failed: ${String(e)}`));
        this.#tasks.add(task);
        void task.finally(() => this.#tasks.delete(task));
      }
    })();
  }

  /** Another process of the same kind is up (never take every API or executor down at once). */
  #othersUp(all: readonly ManagedProcess[], p: ManagedProcess): boolean {
    return all.some((x) => x !== p && x.running);
  }

  async #one(): Promise<void> {
    const { cluster, director } = this.o;
    const menu: [number, () => Promise<void>][] = [
      [3, async () => {
        const p = this.#pick(cluster.apis);
        if (!p.running || !this.#othersUp(cluster.apis, p)) return;
        if (p.executor === true && this.o.until !== undefined && Date.now() > this.o.until - this.o.leaseMs - 10_000) return;
        this.#record('kill9', p.name);
        await p.kill9();
        await sleep(this.#between(300, 1500));
        await cluster.restart(p);
      }],
      [3, async () => {
        const p = this.#pick(cluster.executors);
        if (!p.running || !this.#othersUp(cluster.executors, p)) return;
        this.#record('kill9', p.name);
        await p.kill9();
        await sleep(this.#between(300, 2000));
        await cluster.restart(p);
      }],
      [2, async () => {
        const p = this.#pick(cluster.executors);
        if (!p.running || !this.#othersUp(cluster.executors, p)) return;
        const pauseMs = this.o.leaseMs + this.#between(500, 2500);
        this.#record('sigstop', p.name, `${pauseMs} ms (lease ${this.o.leaseMs} ms)`);
        p.signal('SIGSTOP');
        await sleep(pauseMs);
        p.signal('SIGCONT');
      }],
      [2, async () => {
        const f = this.#pick(cluster.fakes);
        const delayMs = this.#between(100, 1500);
        this.#record('proxy-delay', f.name, `${delayMs} ms`);
        f.proxy.setMode({ delayMs });
        await sleep(this.#between(2000, 6000));
        f.proxy.setMode({});
      }],
      [2, async () => {
        const f = this.#pick(cluster.fakes);
        const cut = this.#pick<CutPoint>(['on-connect', 'after-request', 'mid-response']);
        const cutRate = 0.3 + this.o.random() * 0.7;
        this.#record('proxy-cut', f.name, `${cut} ${(cutRate * 100).toFixed(0)}%`);
        f.proxy.setMode({ cut, cutRate });
        await sleep(this.#between(1500, 4000));
        f.proxy.setMode({});
      }],
      [2, async () => {
        const f = this.#pick(cluster.fakes);
        const times = this.#between(5, 25);
        this.#record('provider-503', f.name, `next ${times} calls`);
        await director.storm(f, { status: 503 }, times);
      }],
      [1, async () => {
        const f = this.#pick(cluster.fakes);
        const times = this.#between(2, 6);
        this.#record('provider-hang', f.name, `next ${times} calls`);
        await director.storm(f, { hang: true }, times);
      }],
      [2, async () => {
        const f = this.#pick(cluster.fakes);
        const times = this.#between(3, 12);
        this.#record('provider-late', f.name, `next ${times} calls answer after the deadline`);
        await director.storm(f, { delayMs: 2500 + this.#between(200, 3000), reply: director.reply(f) }, times);
      }],
      [2, async () => {
        // Streams cut mid-way or ended by an error event (CONTRACT §7); a calls not streamed get the reply.
        const f = this.#pick(cluster.fakes);
        const times = this.#between(3, 12);
        const cut = this.o.random() < 0.5;
        const afterChunks = this.#between(cut ? 1 : 0, 4);
        this.#record('provider-stream-break', f.name, `next ${times} calls: ${cut ? 'connection cut' : 'error event'} after ${afterChunks} content events when streamed`);
        await director.storm(f, { reply: director.reply(f), chunkDelayMs: 60, ...(cut ? { streamCut: { afterChunks } } : { streamError: { afterChunks } }) }, times);
      }],
      [2, async () => {
        const f = this.#pick(cluster.fakes);
        const count = this.#between(3, 10);
        this.#record('provider-out-of-order', f.name, `next ${count} calls answered in reverse order`);
        await director.outOfOrder(f, count, this.#between(1000, 5000));
      }],
    ];
    if (this.o.postgresRestart && !this.#postgresBusy && this.o.clock() - this.#lastPostgres >= this.o.postgresEveryMs) {
      this.#postgresBusy = true;
      this.#lastPostgres = this.o.clock();
      this.#record('postgres-restart', 'postgresql');
      const started = Date.now();
      try {
        await cluster.restartPostgres();
        this.o.log(`postgres restarted in ${Date.now() - started} ms`);
      } finally {
        this.#postgresBusy = false;
      }
      return;
    }
    return pickWeighted(menu, this.o.random);
  }

  /** Stops injecting, waits for the faults in progress, and heals the cluster. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    await Promise.all([...this.#tasks]);
    const { cluster, director } = this.o;
    for (const p of cluster.executors) p.signal('SIGCONT');
    for (const f of cluster.fakes) f.proxy.setMode({});
    cluster.databaseProxy.setDown(false);
    for (const p of [...cluster.apis, ...cluster.executors]) if (!p.running) await cluster.restart(p);
    await director.heal();
  }
}
