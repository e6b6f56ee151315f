/**
 * The one group-commit queue (`src/store/batcher.ts`), ordered by hand: each
 * `one` and `many` returns a promise the test settles, so which calls travel
 * together is decided by the test, not by timing. The queue over the real
 * engines is exercised by the conformance suite (concurrent creates, leased
 * creates mixed with plain ones, 40 concurrent settles) on both drivers.
 */
import { describe, expect, it } from 'vitest';
import { Batcher, ItemFailed, type BatcherOptions } from '../../src/store/batcher.ts';

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}
const tick = () => new Promise((r) => setImmediate(r));

/** A batcher whose runs wait for the test; records every run. */
function harness(options: Partial<BatcherOptions<string, string>> = {}) {
  const runs: { kind: 'one' | 'many'; calls: string[]; done: Deferred<(string | ItemFailed)[] | string> }[] = [];
  const batcher = new Batcher<string, string>({
    one: (c) => {
      const done = deferred<(string | ItemFailed)[] | string>();
      runs.push({ kind: 'one', calls: [c], done });
      return done.promise as Promise<string>;
    },
    many: (calls) => {
      const done = deferred<(string | ItemFailed)[] | string>();
      runs.push({ kind: 'many', calls: [...calls], done });
      return done.promise as Promise<(string | ItemFailed)[]>;
    },
    maxInFlight: 1,
    maxQueued: 100,
    failsAll: () => false,
    refusal: (n) => new Error(`refused: ${n} waiting`),
    ...options,
  });
  /** Answers a `many` run with each call upper-cased, or a `one` run likewise. */
  const answer = (i: number) => {
    const run = runs[i]!;
    run.done.resolve(run.kind === 'one' ? run.calls[0]!.toUpperCase() : run.calls.map((c) => c.toUpperCase()));
  };
  /** Sends 'a' alone, queues `calls` behind it, answers 'a': the calls are then one `many` batch, `runs[1]`, waiting for the test. */
  const batchBehindFirst = async (...calls: string[]) => {
    const first = batcher.submit('a');
    const queued = calls.map((c) => batcher.submit(c));
    answer(0);
    await first;
    await tick();
    return queued;
  };
  return { batcher, runs, answer, batchBehindFirst };
}

describe('Batcher (the one group-commit queue)', () => {
  it('runs a call alone at once when nothing else is on its way (no waiting under low load)', async () => {
    const { batcher, runs, answer } = harness();
    const p = batcher.submit('a');
    expect(runs.map((r) => [r.kind, r.calls])).toEqual([['one', ['a']]]);
    answer(0);
    await expect(p).resolves.toBe('A');
  });

  it('sends the calls that arrive while a batch is out together, in arrival order, each with its own answer', async () => {
    const { batcher, runs, answer } = harness();
    const first = batcher.submit('a');
    const rest = ['b', 'c', 'd'].map((c) => batcher.submit(c));
    expect(runs).toHaveLength(1);
    expect(batcher.queued).toBe(3);
    answer(0);
    await first;
    await tick();
    expect(runs.map((r) => [r.kind, r.calls])).toEqual([['one', ['a']], ['many', ['b', 'c', 'd']]]);
    answer(1);
    await expect(Promise.all(rest)).resolves.toEqual(['B', 'C', 'D']);
  });

  it('sends the next batch before it answers the callers of the last one (the engine is never idle waiting for them)', async () => {
    const { batcher, runs, answer } = harness();
    const a = batcher.submit('a');
    const b = batcher.submit('b');
    let sentWhenAnswered = -1;
    const seen = a.then(() => (sentWhenAnswered = runs.length));
    answer(0);
    await seen;
    expect(sentWhenAnswered).toBe(2);
    expect(runs[1]!.calls).toEqual(['b']);
    answer(1);
    await expect(b).resolves.toBe('B');
  });

  it('keeps at most maxInFlight batches out and at most maxBatch calls in one', async () => {
    const { batcher, runs, answer } = harness({ maxInFlight: 2, maxBatch: 2 });
    const all = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => batcher.submit(c));
    expect(runs.map((r) => r.calls)).toEqual([['a'], ['b']]);
    answer(0);
    await tick();
    expect(runs.map((r) => r.calls)).toEqual([['a'], ['b'], ['c', 'd']]);
    answer(1);
    await tick();
    expect(runs.map((r) => r.calls)).toEqual([['a'], ['b'], ['c', 'd'], ['e', 'f']]);
    answer(2);
    answer(3);
    await expect(Promise.all(all)).resolves.toEqual(['A', 'B', 'C', 'D', 'E', 'F']);
  });

  it('lets calls with one share key queued together share one run, but never joins a batch already sent', async () => {
    const { batcher, runs, answer } = harness({ shareKey: (c) => (c.startsWith('k') ? 'k' : undefined) });
    const sent = batcher.submit('k1'); // alone, at once
    const a = batcher.submit('k2');
    const b = batcher.submit('k3'); // joins k2's queued entry
    const other = batcher.submit('x');
    expect(batcher.queued).toBe(2);
    answer(0);
    await expect(sent).resolves.toBe('K1');
    await tick();
    expect(runs[1]!.calls).toEqual(['k2', 'x']);
    answer(1);
    await expect(Promise.all([a, b, other])).resolves.toEqual(['K2', 'K2', 'X']);
  });

  it('fails only the call whose answer is an ItemFailed', async () => {
    const { runs, batchBehindFirst } = harness();
    const [b, c] = await batchBehindFirst('b', 'c');
    runs[1]!.done.resolve(['B', new ItemFailed(new Error('CHECK violated by c'))]);
    await expect(b).resolves.toBe('B');
    await expect(c).rejects.toThrow('CHECK violated by c');
  });

  it('when a whole batch fails, runs each call again alone so an error reaches only its caller', async () => {
    const { runs, answer, batchBehindFirst } = harness();
    const [b, c] = await batchBehindFirst('b', 'c');
    runs[1]!.done.reject(new Error('one row of the statement is bad'));
    await tick();
    expect(runs.slice(2).map((r) => [r.kind, r.calls])).toEqual([['one', ['b']], ['one', ['c']]]);
    answer(2);
    runs[3]!.done.reject(new Error('c is the bad row'));
    await expect(b).resolves.toBe('B');
    await expect(c).rejects.toThrow('c is the bad row');
  });

  it('fails every call of a batch at once when failsAll says so (a lost connection), running none again', async () => {
    const lost = new Error('connection lost');
    const { runs, batchBehindFirst } = harness({ failsAll: (e) => e === lost });
    const rest = await batchBehindFirst('b', 'c');
    runs[1]!.done.reject(lost);
    for (const p of rest) await expect(p).rejects.toBe(lost);
    expect(runs).toHaveLength(2);
  });

  it('refuses a call at once past maxQueued, sending nothing for it; a call that shares a queued read is not refused', async () => {
    const { batcher, runs, answer } = harness({ maxQueued: 2, shareKey: (c) => (c.startsWith('k') ? 'k' : undefined) });
    const first = batcher.submit('a');
    const queued = [batcher.submit('b'), batcher.submit('k1')];
    await expect(batcher.submit('c')).rejects.toThrow('refused: 2 waiting');
    const shared = batcher.submit('k2');
    answer(0);
    await first;
    await tick();
    expect(runs[1]!.calls).toEqual(['b', 'k1']);
    answer(1);
    await expect(Promise.all([...queued, shared])).resolves.toEqual(['B', 'K1', 'K1']);
  });

  it('takes a batch only once whenReady lets it; calls arriving meanwhile join that batch', async () => {
    const gate: (() => void)[] = [];
    const { batcher, runs, answer } = harness({ whenReady: (go) => gate.push(go) });
    const a = batcher.submit('a');
    const b = batcher.submit('b');
    expect(runs).toHaveLength(0);
    expect(gate).toHaveLength(1);
    gate.shift()!();
    expect(runs.map((r) => [r.kind, r.calls])).toEqual([['many', ['a', 'b']]]);
    answer(0);
    await expect(Promise.all([a, b])).resolves.toEqual(['A', 'B']);
    const c = batcher.submit('c');
    expect(gate).toHaveLength(1);
    gate.shift()!();
    expect(runs[1]!.kind).toBe('one');
    answer(1);
    await expect(c).resolves.toBe('C');
  });

  it('answers a call that the batch left unanswered with an error rather than leaving it waiting', async () => {
    const { runs, batchBehindFirst } = harness();
    const [b, c] = await batchBehindFirst('b', 'c');
    runs[1]!.done.resolve(['B']);
    await expect(b).resolves.toBe('B');
    await expect(c).rejects.toThrow('a batch of 2 calls was answered 1 times');
  });

  describe('spares (spareAfterMs): a second batch beside one on its way only once that one is slow', () => {
    /** A clock the test moves; `after` timers fire when it passes them. */
    function manualClock() {
      let t = 0;
      const timers: { at: number; fn: () => void }[] = [];
      return {
        clock: { now: () => t, after: (ms: number, fn: () => void) => void timers.push({ at: t + ms, fn }) },
        timers,
        advanceTo(at: number) {
          t = at;
          for (const timer of timers.filter((x) => x.at <= t)) {
            timers.splice(timers.indexOf(timer), 1);
            timer.fn();
          }
        },
      };
    }
    /** The harness with spares after 5 ms on the manual clock `m`. */
    function spares(maxInFlight: number) {
      const m = manualClock();
      return { m, ...harness({ maxInFlight, spareAfterMs: 5, clock: m.clock }) };
    }

    it('holds calls while the batch on its way is young, and sends them together when it is answered', async () => {
      const { m, batcher, runs, answer } = spares(2);
      const a = batcher.submit('a');
      m.advanceTo(1);
      const rest = ['b', 'c'].map((c) => batcher.submit(c));
      expect(runs).toHaveLength(1);
      expect(m.timers.map((x) => x.at)).toEqual([5]);
      m.advanceTo(3);
      answer(0);
      await a;
      await tick();
      expect(runs.map((r) => [r.kind, r.calls])).toEqual([['one', ['a']], ['many', ['b', 'c']]]);
      answer(1);
      await expect(Promise.all(rest)).resolves.toEqual(['B', 'C']);
      // The timer armed for the spare finds nothing left to send.
      m.advanceTo(5);
      expect(runs).toHaveLength(2);
    });

    it('sends a spare once the batch on its way has been out spareAfterMs, and no third beside them', async () => {
      const { m, batcher, runs, answer } = spares(2);
      const a = batcher.submit('a');
      m.advanceTo(2);
      const b = batcher.submit('b');
      m.advanceTo(4);
      expect(runs).toHaveLength(1);
      m.advanceTo(5);
      expect(runs.map((r) => [r.kind, r.calls])).toEqual([['one', ['a']], ['one', ['b']]]);
      const c = batcher.submit('c');
      m.advanceTo(20);
      expect(runs).toHaveLength(2);
      answer(1);
      await b;
      await tick();
      // 'a' is still out, but it has been out long enough: 'c' leaves at once beside it.
      expect(runs.map((r) => r.calls)).toEqual([['a'], ['b'], ['c']]);
      answer(0);
      answer(2);
      await expect(Promise.all([a, c])).resolves.toEqual(['A', 'C']);
    });

    it('measures from the newest batch on its way: a spare that just left holds the next one back', async () => {
      const { m, batcher, runs, answer } = spares(3);
      const a = batcher.submit('a');
      m.advanceTo(6);
      const b = batcher.submit('b');
      expect(runs.map((r) => r.calls)).toEqual([['a'], ['b']]);
      m.advanceTo(8);
      const c = batcher.submit('c');
      expect(runs).toHaveLength(2);
      m.advanceTo(11);
      expect(runs.map((r) => r.calls)).toEqual([['a'], ['b'], ['c']]);
      for (const i of [0, 1, 2]) answer(i);
      await expect(Promise.all([a, b, c])).resolves.toEqual(['A', 'B', 'C']);
    });

    it('sends at once when nothing is on its way, however recent the last batch', async () => {
      const { m, batcher, runs, answer } = spares(2);
      const a = batcher.submit('a');
      answer(0);
      await a;
      const b = batcher.submit('b');
      expect(runs.map((r) => r.calls)).toEqual([['a'], ['b']]);
      answer(1);
      await expect(b).resolves.toBe('B');
      expect(m.timers).toHaveLength(0);
    });
  });
});
