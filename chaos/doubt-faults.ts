/**
 * The doubt faults of a chaos run (CONTRACT §11): every few seconds, one
 * fault on the doubt fake (chaos/doubt-cluster.ts), recorded in the run's
 * `faults.jsonl` like the others: a storm of its director (answers lost
 * after the work, work past the deadline, hangs, refusals), its proxy
 * cutting or slowing connections (a create whose answer is lost, a poll or
 * a lookup cut), or the fake itself killed -9 and restarted (it forgets
 * everything it held). The cluster's own faults (chaos/faults.ts: executors
 * killed or paused mid-wait, API processes killed) reach these attempts too.
 * {@link DoubtFaults.stop} waits for the faults in progress and heals.
 */
import { appendFileSync } from 'node:fs';
import type { DoubtDirector } from './doubt-cluster.ts';
import type { FaultRecord } from './records.ts';
import type { CutPoint } from './tcp-proxy.ts';
import { pickWeighted } from './pick.ts';

/** Options of {@link DoubtFaults}. */
export interface DoubtFaultOptions {
  readonly director: DoubtDirector;
  readonly random: () => number;
  readonly clock: () => number;
  readonly file: string;
  /** Mean pause between faults. */
  readonly everyMs: number;
  /** At most one kill of the fake per this many ms. */
  readonly killEveryMs: number;
  readonly log: (line: string) => void;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Injects doubt faults until stopped. */
export class DoubtFaults {
  readonly records: FaultRecord[] = [];
  readonly #tasks = new Set<Promise<void>>();
  #stopped = false;
  #loop: Promise<void> | null = null;
  #lastKill: number;

  constructor(private readonly o: DoubtFaultOptions) {
    this.#lastKill = o.clock() - o.killEveryMs / 2;
  }

  #record(r: Omit<FaultRecord, 'at'>): void {
    const full: FaultRecord = { at: Math.round(this.o.clock()), ...r };
    this.records.push(full);
    appendFileSync(this.o.file, `${JSON.stringify(full)}\n`);
  }

  #between(lo: number, hi: number): number {
    return lo + Math.floor(this.o.random() * (hi - lo));
  }

  start(): void {
    this.#loop = (async () => {
      while (!this.#stopped) {
        await sleep(this.#between(this.o.everyMs / 2, (this.o.everyMs * 3) / 2));
        if (this.#stopped) break;
        if (this.#tasks.size >= 2) continue;
        const task = this.#one().catch((e: unknown) => this.o.log(`doubt fault failed: ${String(e)}`));
        this.#tasks.add(task);
        void task.finally(() => this.#tasks.delete(task));
      }
    })();
  }

  async #one(): Promise<void> {
    const { director } = this.o;
    const proxy = director.endpoint.proxy;
    if (this.o.clock() - this.#lastKill >= this.o.killEveryMs && this.o.random() < 0.5) {
      this.#lastKill = this.o.clock();
      const downMs = this.#between(300, 1500);
      this.#record({ kind: 'doubt-fake-kill9', target: 'fake-doubt', detail: `down ${downMs} ms; it forgets its responses, tasks and stored completions` });
      await director.kill(downMs);
      return;
    }
    const menu: [number, () => Promise<void>][] = [
      ...director.storms().map(([w, storm]): [number, () => Promise<void>] => [w, async () => this.#record(await storm())]),
      [2, async () => {
        const cut = (['after-request', 'mid-response'] as const satisfies readonly CutPoint[])[Math.floor(this.o.random() * 2)]!;
        const cutRate = 0.3 + this.o.random() * 0.6;
        this.#record({ kind: 'doubt-proxy-cut', target: 'fake-doubt', detail: `${cut} ${(cutRate * 100).toFixed(0)}%` });
        proxy.setMode({ cut, cutRate });
        await sleep(this.#between(1500, 4000));
        proxy.setMode({});
      }],
      // Signed callbacks replayed byte for byte: onto their own attempt (a reuse) and onto another's (CONTRACT §15: both 401).
      [2, async () => {
        const round = await director.endpoint.relay.replay(this.#between(1, 4), this.o.random);
        this.#record({ kind: 'doubt-callback-replay', target: 'api', detail: `${round.sent} replays of ${director.endpoint.relay.kept} kept callbacks; answered ${JSON.stringify(round.statuses)}; accepted ${round.accepted}` });
        if (round.accepted > 0) this.o.log(`VIOLATION-LIKE: ${round.accepted} replayed callbacks were accepted (CONTRACT §15 says 401)`);
      }],
      [1, async () => {
        const delayMs = this.#between(200, 1500);
        this.#record({ kind: 'doubt-proxy-delay', target: 'fake-doubt', detail: `${delayMs} ms` });
        proxy.setMode({ delayMs });
        await sleep(this.#between(2000, 5000));
        proxy.setMode({});
      }],
    ];
    return pickWeighted(menu, this.o.random);
  }

  /** Stops injecting, waits for the faults in progress, and heals the doubt fake. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    await Promise.all([...this.#tasks]);
    await this.o.director.heal();
  }
}
