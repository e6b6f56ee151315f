/**
 * Doubt in the chaos cluster (CONTRACT §11, docs/reconciliation.md): one
 * more fake provider process (behind a TCP proxy of its own) that serves the
 * three provider types with a lookup, and the routes over them:
 *
 * - `dr`: `openai-responses` (background, polled; asked by its `resp_…` id),
 * - `ds`: `openai` with `"lookup": "stored-completions"` (asked by the attempt's id),
 * - `dt`: `task` (polled; asked by its task id).
 *
 * Every piece of work the fake is scripted to do ends within
 * {@link DOUBT_WORK_MAX_MS}, below the providers' `maxDurationMs`
 * ({@link DOUBT_MAX_DURATION_MS}): the fake keeps the promise a real provider
 * makes, so "not found" after `maxDurationMs` is a true failure.
 *
 * {@link DoubtDirector} scripts it (a calm mix plus storms that lose answers
 * after the work, hang, run past the deadline), counts the work each attempt
 * submitted (`GET /submits`, kept across kills of the fake), and kills and
 * restarts it. The faults are in chaos/doubt-faults.ts, the clients in
 * chaos/doubt-workload.ts, the checker's rules in chaos/doubt-checker.ts.
 */
import { join } from 'node:path';
import type { FaultRecord } from './records.ts';
import type { DoubtSubmit } from './doubt-checker.ts';
import type { ManagedProcess, ProcessGroups } from './cluster.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { CallbackRelay } from './callback-replayer.ts';

/** The routes over the lookup providers: each kind first once, the next kind as its failover. */
export const DOUBT_ROUTES = {
  'doubt-responses': { providers: ['dr', 'ds'] },
  'doubt-stored': { providers: ['ds', 'dt'] },
  'doubt-task': { providers: ['dt', 'dr'] },
} as const;
/**
 * How each lookup provider is asked: `id`, by the id its create answered
 * (recorded as `provider_request_id`; an attempt whose create answer was lost
 * has none and cannot be asked), `attempt`, by onejob's own attempt id.
 */
export const DOUBT_LOOKUPS: Readonly<Record<string, 'id' | 'attempt'>> = { dr: 'id', ds: 'attempt', dt: 'id' };
/**
 * How long after the faults stopped an attempt its provider's lookup can ask
 * about may stay unknown (CONTRACT §11 promises asks with backoff up to 60 s
 * apart: two of the longest gaps).
 */
export const DOUBT_WINDOW_MS = 120_000;
/** The lookup providers' `maxDurationMs`: "not found" is definite after this long. */
export const DOUBT_MAX_DURATION_MS = 12_000;
/** The longest any scripted work of the doubt fake runs (below {@link DOUBT_MAX_DURATION_MS}). */
export const DOUBT_WORK_MAX_MS = 8_000;
/** The models the providers send (a storm's rule matches one kind by it); the task kind is matched by a header. */
const MODEL_OF = { dr: 'model-dr', ds: 'model-ds' } as const;
const TASK_HEADER = { name: 'x-chaos-doubt-kind', value: 'task' } as const;

/** The doubt fake: its process, its own URL (control plane), and the proxy the providers go through. */
export interface DoubtEndpoint {
  readonly process: ManagedProcess;
  readonly url: string;
  readonly proxy: TcpProxy;
  /** Where its tasks call back, signed with {@link DOUBT_CALLBACK_SECRET}; forwards to the cluster (its target set once it is up) and replays. */
  readonly relay: CallbackRelay;
}

/** What {@link startDoubtFake} needs of the cluster (passed in: cluster.ts imports this file). */
export interface DoubtFakeOptions {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly groups: ProcessGroups;
  readonly bin: string;
  /** A port below the ephemeral range, so a restart gets it back (cluster.ts `freePort`). */
  readonly port: number;
  readonly makeProcess: (name: string, command: string, args: readonly string[], env: NodeJS.ProcessEnv, logFile: string, groups: ProcessGroups) => ManagedProcess;
  readonly waitFor: (what: string, check: () => Promise<boolean>, timeoutMs: number) => Promise<void>;
}

/** The `dt` provider's `callbackSecret`: the doubt fake's tasks sign their callbacks with it (CONTRACT §15). */
export const DOUBT_CALLBACK_SECRET = 'whsec_chaos_doubt_0123456789';

async function healthy(url: string): Promise<boolean> {
  const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
  await res.body?.cancel();
  return res.ok;
}

/** Starts the doubt fake on `port` and a TCP proxy in front of it. */
export async function startDoubtFake(o: DoubtFakeOptions): Promise<DoubtEndpoint> {
  const relay = new CallbackRelay();
  await relay.listen();
  const p = o.makeProcess('fake-doubt', process.execPath, [
    o.bin, 'fake-provider', '--port', String(o.port), '--host', '127.0.0.1', '--unique-ids',
    // An upstream that ignores the metadata filter (several OpenAI-compatible servers do): a lookup must take only its own (§15).
    '--ignore-lookup-filter', '--task-callback-url', relay.callbackUrl, '--task-callback-secret', DOUBT_CALLBACK_SECRET,
  ], o.env, join(o.dir, 'fake-doubt.log'), o.groups);
  p.start();
  const url = `http://127.0.0.1:${o.port}`;
  await o.waitFor('the doubt fake provider', () => healthy(url), 30_000);
  const proxy = await startTcpProxy({ target: { host: '127.0.0.1', port: o.port } });
  return { process: p, url, proxy, relay };
}

/** The lookup providers' configuration (CONTRACT §11), through the doubt fake's proxy. */
export function doubtProviders(d: DoubtEndpoint, timeoutMs: number): Record<string, Record<string, unknown>> {
  const base = `http://127.0.0.1:${d.proxy.port}/v1`;
  const common = { timeoutMs, idleTimeoutMs: timeoutMs, maxDurationMs: DOUBT_MAX_DURATION_MS };
  return {
    dr: { type: 'openai-responses', baseUrl: base, model: MODEL_OF.dr, pollIntervalMs: 300, ...common },
    ds: { type: 'openai', baseUrl: base, model: MODEL_OF.ds, lookup: 'stored-completions', ...common },
    dt: { type: 'task', baseUrl: `${base}/tasks`, pollIntervalMs: 300, headers: { [TASK_HEADER.name]: TASK_HEADER.value }, callbackSecret: DOUBT_CALLBACK_SECRET, ...common },
  };
}

type Behaviour = Record<string, unknown>;
type Kind = 'dr' | 'ds' | 'dt';

async function post(url: string, body: unknown): Promise<unknown> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Scripts the doubt fake, counts the work each attempt submitted, and kills it. */
export class DoubtDirector {
  #counter = 0;
  /** Submits per attempt id, summed over the fake's lives (a restarted fake counts from zero). */
  readonly #submits = new Map<string, { submits: number; replies: unknown[] }>();
  /** Paused while the fake is down (no top-up). */
  #down = false;

  constructor(
    readonly endpoint: DoubtEndpoint,
    private readonly random: () => number,
    private readonly restart: (p: ManagedProcess) => Promise<void>,
  ) {}

  /** A unique text reply (a task's output, a response's text, a completion's content). */
  reply(): string {
    return `doubt answer d-${++this.#counter} in a few words`;
  }

  #between(lo: number, hi: number): number {
    return lo + Math.floor(this.random() * (hi - lo));
  }

  /**
   * The calm mix, shared by the three kinds (a chat call ignores `task`; a
   * background response ignores `delayMs`): quick answers, work that runs
   * past the attempt's deadline (a response or task still running when the
   * attempt goes unknown), definite refusals, work that fails.
   */
  #behaviour(): Behaviour {
    const r = this.random();
    const reply = this.reply();
    if (r < 0.7) return { reply, delayMs: this.#between(0, 200), task: { runMs: this.#between(0, 1200) } };
    if (r < 0.82) return { reply, task: { runMs: this.#between(3000, DOUBT_WORK_MAX_MS) } };
    if (r < 0.9) return { status: 503 };
    return { reply, task: { runMs: this.#between(200, 1500), status: 'failed' } };
  }

  #match(kind: Kind): Behaviour {
    return kind === 'dt' ? { header: TASK_HEADER } : { model: MODEL_OF[kind] };
  }

  /** Keeps the fake's queue at least `low` long (and its default a reply, for the moments after a restart). */
  async topUp(low = 40, batch = 80): Promise<void> {
    if (this.#down) return;
    const state = (await post(`${this.endpoint.url}/script`, {})) as { queued: number };
    if (state.queued >= low) return;
    await post(`${this.endpoint.url}/script`, { default: { reply: 'doubt default answer' }, queue: Array.from({ length: batch }, () => this.#behaviour()) });
  }

  /** A storm: the next `times` creates of `kind` get `behaviour`. */
  async storm(kind: Kind, behaviour: Behaviour, times: number): Promise<void> {
    if (this.#down) return; // the fake is being killed and restarted: its script starts afresh anyway
    await post(`${this.endpoint.url}/script`, { rules: [{ match: this.#match(kind), behaviour, times }] });
  }

  /** The storms the faults pick from: each returns its record's target and detail. */
  storms(): [number, () => Promise<Omit<FaultRecord, 'at'>>][] {
    const kinds: Kind[] = ['dr', 'ds', 'dt'];
    const pick = (): Kind => kinds[Math.floor(this.random() * kinds.length)]!;
    return [
      // The work is done, the answer is lost. A stored completion is found by the attempt's id; a task or a
      // response whose create answer is lost has no id recorded and cannot be asked (docs/reconciliation.md).
      [3, async () => {
        const times = this.#between(2, 7);
        await this.storm('ds', { reply: this.reply(), loseAnswer: true }, times);
        return { kind: 'doubt-lose-answer', target: 'ds', detail: `next ${times} creates: stored, then the answer lost` };
      }],
      [1, async () => {
        const kind = this.random() < 0.5 ? 'dr' : 'dt';
        await this.storm(kind, { reply: this.reply(), loseAnswer: true }, 1);
        return { kind: 'doubt-lose-answer', target: kind, detail: 'next create: done, its id lost with the answer' };
      }],
      // Work that runs past the attempt's deadline (a response, a task), or a call that hangs before any work.
      [3, async () => {
        const kind = this.random() < 0.5 ? 'dr' : 'dt';
        const times = this.#between(2, 6);
        await this.storm(kind, { reply: this.reply(), task: { runMs: this.#between(3000, DOUBT_WORK_MAX_MS) } }, times);
        return { kind: 'doubt-past-deadline', target: kind, detail: `next ${times} creates run 3-8 s` };
      }],
      [1, async () => {
        const times = this.#between(1, 4);
        await this.storm('ds', { hang: true }, times);
        return { kind: 'doubt-hang', target: 'ds', detail: `next ${times} calls hang before any work` };
      }],
      [1, async () => {
        const kind = pick();
        const times = this.#between(2, 6);
        await this.storm(kind, { status: 503 }, times);
        return { kind: 'doubt-503', target: kind, detail: `next ${times} creates refused` };
      }],
    ];
  }

  /** Adds the fake's counts since its last restart to the run's. */
  async #collect(): Promise<void> {
    const res = await fetch(`${this.endpoint.url}/submits`, { signal: AbortSignal.timeout(30_000) });
    const { data } = (await res.json()) as { data: { attempt_id: string; submits: number; replies: unknown[] }[] };
    for (const s of data) {
      const total = this.#submits.get(s.attempt_id) ?? { submits: 0, replies: [] };
      total.submits += s.submits;
      total.replies.push(...s.replies);
      this.#submits.set(s.attempt_id, total);
    }
  }

  /**
   * kill -9 of the doubt fake (it forgets every response, task and stored
   * completion: its lookups answer 404, definite after `maxDurationMs`), and a
   * restart on the same port. Its counts are read first, with the proxy
   * refusing new connections, so no create goes uncounted.
   */
  async kill(downMs: number): Promise<void> {
    this.#down = true;
    try {
      this.endpoint.proxy.setMode({ cut: 'on-connect', cutRate: 1 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await this.#collect();
      await this.endpoint.process.kill9();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await this.restart(this.endpoint.process);
      for (let i = 0; i < 100 && !(await healthy(this.endpoint.url).catch(() => false)); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      this.#down = false;
      await this.topUp();
    } finally {
      this.#down = false;
      this.endpoint.proxy.setMode({});
    }
  }

  /** Ends every storm: no rules, a calm queue of quick replies. */
  async heal(): Promise<void> {
    this.endpoint.proxy.setMode({});
    await post(`${this.endpoint.url}/script`, { replace: true, default: { reply: 'doubt default answer' }, queue: Array.from({ length: 40 }, () => ({ reply: this.reply() })) }).catch(() => undefined);
  }

  /** Every attempt's submits to the doubt fake over the run (read once, at the end). */
  async submits(): Promise<DoubtSubmit[]> {
    await this.#collect();
    const out = [...this.#submits].map(([attemptId, s]) => ({ attempt_id: attemptId, submits: s.submits, replies: s.replies, fake: 'doubt' }));
    this.#submits.clear();
    return out;
  }
}

/** The submits the other fakes (`p1`, `p2`) received, per attempt (they are never killed: their counts are whole). */
export async function fakeSubmits(fakes: readonly { readonly name: string; readonly url: string }[]): Promise<DoubtSubmit[]> {
  const out: DoubtSubmit[] = [];
  for (const f of fakes) {
    const res = await fetch(`${f.url}/submits`, { signal: AbortSignal.timeout(60_000) });
    const { data } = (await res.json()) as { data: { attempt_id: string; submits: number; replies: unknown[] }[] };
    for (const s of data) out.push({ ...s, fake: f.name });
  }
  return out;
}

/**
 * After the faults stopped: waits until no attempt on a lookup provider that
 * its lookup can ask about is `unknown`, and no job on a doubt route is
 * `queued` or `running` (a definite failure found by a lookup moves its job
 * to its next provider), or until `deadline` (epoch ms). The reconciler does
 * the work at its real pace (first ask after ~1 s, backoff to 60 s); this
 * only decides when the snapshot is read, so the doubt rule's two-minute
 * window is checked in full while a run whose doubt all ended early is not
 * made to wait for nothing. Returns what was left.
 */
export async function waitForDoubt(databaseUrl: string, deadline: number, log: (line: string) => void): Promise<{ askableUnknown: number; openJobs: number }> {
  const idProviders = Object.entries(DOUBT_LOOKUPS).filter(([, how]) => how === 'id').map(([p]) => p);
  const attemptProviders = Object.entries(DOUBT_LOOKUPS).filter(([, how]) => how === 'attempt').map(([p]) => p);
  const pg = (await import('pg')).default;
  let left = { askableUnknown: 0, openJobs: 0 };
  let logged = 0;
  for (;;) {
    const c = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
    try {
      await c.connect();
      const r = await c.query<{ askable: string; open: string }>(
        `SELECT (SELECT count(*) FROM attempts WHERE state = 'unknown' AND (provider = ANY($2) OR (provider = ANY($1) AND provider_request_id IS NOT NULL))) AS askable,
                (SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') AND route = ANY($3)) AS open`,
        [idProviders, attemptProviders, Object.keys(DOUBT_ROUTES)]);
      left = { askableUnknown: Number(r.rows[0]!.askable), openJobs: Number(r.rows[0]!.open) };
    } catch (e) {
      log(`waiting for doubt to end: ${String(e)}`);
    } finally {
      await c.end().catch(() => undefined);
    }
    if ((left.askableUnknown === 0 && left.openJobs === 0) || Date.now() >= deadline) return left;
    if (Date.now() - logged > 15_000) {
      logged = Date.now();
      log(`doubt left: ${left.askableUnknown} askable attempts unknown, ${left.openJobs} doubt-route jobs queued/running`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
