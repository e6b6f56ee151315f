/**
 * Scripts the fake providers of a chaos run over their HTTP control plane
 * (`POST /script`, `POST /release`, `GET /calls`).
 *
 * Each fake's queue is kept topped up with a random mix of behaviours (most
 * replies carry a unique text, so the checker can tell which attempt's output
 * a job holds), including failures, hangs, late answers and gated answers
 * released in random order, and for streaming calls (`"stream": true`)
 * streams cut mid-way (`streamCut`: the connection ends after some content
 * events) or ended by the protocol's error event (`streamError`), with
 * chunk delays so a live stream lasts long enough to be shared. Replies are
 * `{"summary": …}` objects (the `contract` route's schema; other routes
 * receive their JSON text), a few plain texts that break that contract.
 * Storms (rules that take the next N calls) are faults injected by the
 * scheduler.
 */
import type { FakeEndpoint } from './cluster.ts';
import { PROVIDER_TIMEOUT_MS } from './cluster.ts';
import type { ProviderCall } from './records.ts';

type Behaviour = Record<string, unknown>;

async function post(url: string, body: unknown): Promise<unknown> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Drives the fakes' scripts for one run. */
export class FakeDirector {
  #counter = 0;
  #gates: { fake: FakeEndpoint; gate: string }[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly fakes: readonly FakeEndpoint[],
    private readonly random: () => number,
  ) {}

  /** A unique reply: a `{"summary"}` object of several words (a stream of it has several content events). */
  reply(fake: FakeEndpoint): { summary: string } {
    return { summary: `answer ${fake.name}-${++this.#counter} in a few more words` };
  }

  /** One behaviour of the everyday mix. */
  #behaviour(fake: FakeEndpoint): Behaviour {
    const r = this.random();
    const reply = this.reply(fake);
    // Streaming calls only: the pause between content events (a live stream others can join).
    const chunks = this.random() < 0.5 ? { chunkDelayMs: Math.floor(this.random() * 120) } : {};
    if (r < 0.62) return { reply, delayMs: Math.floor(this.random() * 250), ...chunks };
    if (r < 0.67) return { reply, delayMs: 800 + Math.floor(this.random() * 1200) }; // slow enough for a hedge
    if (r < 0.71) return { reply, delayMs: PROVIDER_TIMEOUT_MS + 200 + Math.floor(this.random() * 2500) }; // late: after the deadline
    if (r < 0.76) return { reply, gate: this.#gate(fake, 200 + Math.floor(this.random() * 5000)) }; // out of order
    if (r < 0.81) return { status: 503 };
    if (r < 0.83) return { status: 429 };
    if (r < 0.85) return { status: 500 };
    if (r < 0.865) return { hang: true };
    if (r < 0.885) return { reply, reset: (['before-headers', 'after-headers', 'mid-body'] as const)[Math.floor(this.random() * 3)] };
    if (r < 0.895) return { reply, malformed: true };
    // A stream cut mid-way (the attempt is unknown) or ended by an error event (failed); a plain reply when not streamed.
    if (r < 0.93) return { reply, chunkDelayMs: 20 + Math.floor(this.random() * 80), streamCut: { afterChunks: 1 + Math.floor(this.random() * 4) } };
    if (r < 0.965) return { reply, chunkDelayMs: 20 + Math.floor(this.random() * 80), streamError: { afterChunks: Math.floor(this.random() * 4) } };
    // Text that is not the contract's JSON: a contract_violation on the contract route, a fine answer elsewhere.
    if (r < 0.98) return { reply: `plain ${fake.name}-${++this.#counter} text`, delayMs: Math.floor(this.random() * 250) };
    return { reply, delayMs: Math.floor(this.random() * 250), ...chunks };
  }

  /** A new gate, released after `releaseAfterMs` (gates are released in random order). */
  #gate(fake: FakeEndpoint, releaseAfterMs: number): string {
    const gate = `g${++this.#counter}`;
    this.#gates.push({ fake, gate });
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void post(`${fake.url}/release`, { gate }).catch(() => undefined);
    }, releaseAfterMs);
    this.#timers.add(timer);
    return gate;
  }

  /** Keeps each fake's queue at least `low` long. */
  async topUp(low = 60, batch = 120): Promise<void> {
    await Promise.all(this.fakes.map(async (fake) => {
      const state = (await post(`${fake.url}/script`, {})) as { queued: number };
      if (state.queued >= low) return;
      await post(`${fake.url}/script`, { queue: Array.from({ length: batch }, () => this.#behaviour(fake)) });
    }));
  }

  /** A storm: the next `times` calls to `fake` get `behaviour` (before the queue). */
  async storm(fake: FakeEndpoint, behaviour: Behaviour, times: number): Promise<void> {
    await post(`${fake.url}/script`, { rules: [{ match: {}, behaviour, times }] });
  }

  /** `count` gated replies answered in reverse order of arrival, the last after `spreadMs`. */
  async outOfOrder(fake: FakeEndpoint, count: number, spreadMs: number): Promise<void> {
    const rules = [];
    for (let i = 0; i < count; i++) {
      const gate = this.#gate(fake, spreadMs - Math.floor((i * spreadMs) / count));
      rules.push({ match: {}, behaviour: { gate, reply: this.reply(fake) }, times: 1 });
    }
    await post(`${fake.url}/script`, { rules });
  }

  /** Ends every scripted fault: no rules, a calm queue, every gate open. */
  async heal(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    await Promise.all(this.fakes.map((fake) =>
      post(`${fake.url}/script`, { replace: true, queue: Array.from({ length: 50 }, () => ({ reply: this.reply(fake) })) }).catch(() => undefined)));
    for (const { fake, gate } of this.#gates.splice(0)) await post(`${fake.url}/release`, { gate }).catch(() => undefined);
  }

  /** Every call each fake received (for the checker). */
  async calls(): Promise<ProviderCall[]> {
    const out: ProviderCall[] = [];
    for (const fake of this.fakes) {
      const res = await fetch(`${fake.url}/calls`, { signal: AbortSignal.timeout(60_000) });
      const { data } = (await res.json()) as { data: (ProviderCall & { provider?: string })[] };
      for (const c of data) {
        out.push({ provider: fake.name, seq: c.seq, idempotencyKey: c.idempotencyKey, jobId: c.jobId, body: c.body, behaviour: c.behaviour, result: c.result, status: c.status });
      }
    }
    return out;
  }
}
