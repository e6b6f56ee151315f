/**
 * Agent-like clients of the chaos run: they call the counting tool server's
 * `charge` through onejob's `/mcp` (through the load balancer) while the
 * fault scheduler kills, pauses and restarts onejob's processes. Each
 * intended call has its own id (in the arguments) and one way of keying:
 * - `meta`: onejob/client's `callToolOnce` (the key in
 *   `_meta["onejob/idempotencyKey"]`, repeated where a repeat is safe),
 *   sometimes twice at once (an agent loop and its retry), sometimes asked
 *   again after its answer (a replay);
 * - `header`: the `Idempotency-Key` header, repeated by hand on no answer;
 * - `keyless`: no key at all, the same arguments sent 1–3 times (at once or
 *   one after another): onejob's fingerprint makes them one call.
 * A call whose outcome is unknown is sometimes resolved (succeeded with an
 * operator's result, failed, cancelled) or its job cancelled, then asked
 * again. Some calls are slower than the tool's deadline (so: in doubt).
 * Every request is one {@link ToolCallEntry} in `tool-calls.jsonl`.
 */
import { createWriteStream } from 'node:fs';
import { Agent, request } from 'undici';
import { callToolOnce, type ToolCaller, type ToolCallParams } from '../src/client/tool-call.ts';
import { API_KEYS } from './cluster.ts';
import { TOOL_SERVER, type ToolAnswer, type ToolCallEntry, type ToolKeyMode } from './tool-records.ts';

/** Options of {@link runToolAgents}. */
export interface ToolAgentsOptions {
  /** The load balancer's URL. */
  readonly url: string;
  readonly agents: number;
  /** Agents start no new call after this (epoch ms). */
  readonly until: number;
  readonly file: string;
  readonly random: () => number;
  readonly clock: () => number;
  readonly tag: string;
}

const OWNERS = Object.entries(API_KEYS).filter(([, owner]) => owner !== 'mallory');
const CHARGE = `${TOOL_SERVER}.charge`;

/** A JSON-RPC error as the SDK's McpError carries it (what callToolOnce classifies). */
class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data: unknown) {
    super(message);
  }
}

/** An HTTP answer that is not JSON-RPC (a load balancer's 502/503): `code` is the status, as the SDK's transport error has it. */
class HttpStatusError extends Error {
  constructor(readonly code: number) {
    super(`HTTP ${code}`);
  }
}

function answerOf(body: unknown): ToolAnswer | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as { result?: Record<string, unknown>; error?: { code?: unknown; data?: Record<string, unknown> } };
  if (b.error !== undefined) {
    const data = b.error.data ?? {};
    return { kind: 'error', code: typeof data.code === 'string' ? data.code : null, rpcCode: typeof b.error.code === 'number' ? b.error.code : null, jobId: typeof data.job_id === 'string' ? data.job_id : null };
  }
  const r = b.result;
  if (r === undefined) return undefined;
  const meta = (r._meta ?? {}) as Record<string, unknown>;
  const sc = (r.structuredContent ?? {}) as Record<string, unknown>;
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  return {
    kind: 'result', isError: r.isError === true, jobId: str(meta['onejob/jobId']), state: str(meta['onejob/state']), replayed: meta['onejob/replayed'] === true,
    exec: str(sc.exec), call: str(sc.call), resolvedBy: str(sc.resolved_by), attemptId: str(meta['onejob/attemptId']),
  };
}

/** Runs the agents until `until`; resolves with the number of requests made. */
export async function runToolAgents(o: ToolAgentsOptions): Promise<number> {
  const dispatcher = new Agent({ connections: 64, keepAliveTimeout: 2000, connect: { timeout: 3000 } });
  const out = createWriteStream(o.file, { flags: 'a' });
  let seq = 0;
  let rpcId = 0;
  const chance = (p: number): boolean => o.random() < p;
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  const agent = async (index: number): Promise<void> => {
    const [token, owner] = OWNERS[(index + 1) % OWNERS.length]!;
    const name = `agent${index}`;
    const record = (e: Omit<ToolCallEntry, 'id' | 'agent' | 'owner'>): ToolCallEntry => {
      const entry: ToolCallEntry = { id: ++seq, agent: name, owner, ...e };
      out.write(`${JSON.stringify(entry)}\n`);
      return entry;
    };

    /** One HTTP request to onejob, recorded. */
    const send = async (op: ToolCallEntry['op'], call: string, mode: ToolKeyMode, path: string, body: unknown, opts: { key?: string | null; header?: string; timeoutMs?: number; jobId?: string; attemptId?: string } = {}): Promise<{ entry: ToolCallEntry; json: unknown }> => {
      const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      if (path === '/mcp') Object.assign(headers, { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' });
      if (opts.header !== undefined) headers['idempotency-key'] = opts.header;
      const sentAt = o.clock();
      let status: number | null = null;
      let json: unknown;
      let outcome: ToolCallEntry['outcome'] = 'answered';
      let error: string | undefined;
      try {
        const res = await request(`${o.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body), dispatcher, signal: AbortSignal.timeout(opts.timeoutMs ?? 8000) });
        status = res.statusCode;
        const text = await res.body.text();
        try {
          json = text === '' ? undefined : JSON.parse(text);
        } catch {
          json = undefined;
        }
      } catch (e) {
        const err = e as Error;
        outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
        error = `${err.name}: ${err.message}`.slice(0, 200);
      }
      const answer = path === '/mcp' ? answerOf(json) : undefined;
      const entry = record({
        op, call, mode, key: opts.key ?? opts.header ?? null, sentAt, recvAt: o.clock(), status, outcome,
        ...(answer === undefined ? {} : { answer }), ...(opts.jobId === undefined ? {} : { jobId: opts.jobId }),
        ...(opts.attemptId === undefined ? {} : { attemptId: opts.attemptId }), ...(path === '/mcp' ? {} : { body }), ...(error === undefined ? {} : { error }),
      });
      return { entry, json };
    };

    /** `tools/call`, raw: one recorded request. */
    const rawCall = (call: string, mode: ToolKeyMode, params: ToolCallParams, opts: { header?: string; timeoutMs?: number } = {}) => {
      const key = typeof params._meta?.['onejob/idempotencyKey'] === 'string' ? params._meta['onejob/idempotencyKey'] : null;
      return send(params.name === CHARGE ? 'call' : 'read', call, mode, '/mcp', { jsonrpc: '2.0', id: ++rpcId, method: 'tools/call', params }, { key, ...opts });
    };

    /** The SDK-shaped caller callToolOnce drives: every try a recorded request; JSON-RPC errors thrown as the SDK throws them. */
    const callerFor = (call: string): ToolCaller => ({
      async callTool(params, _schema, options) {
        const { entry, json } = await rawCall(call, 'meta', params, { timeoutMs: options?.timeout ?? 8000 });
        if (entry.status === null) throw new TypeError(`fetch failed (${entry.error ?? entry.outcome})`);
        const b = json as { result?: unknown; error?: { code: number; message: string; data?: unknown } } | undefined;
        if (b?.error !== undefined) throw new RpcError(b.error.code, b.error.message, b.error.data);
        if (b?.result === undefined) throw new HttpStatusError(entry.status);
        return b.result;
      },
    });

    /** What an agent does with an answer in doubt: sometimes decide it, then ask again. */
    const decide = async (call: string, mode: ToolKeyMode, answer: ToolAnswer | undefined, again: () => Promise<unknown>): Promise<void> => {
      if (answer?.kind !== 'result' || !answer.isError || answer.state !== 'unknown' || answer.jobId === null) return;
      const r = o.random();
      if (r < 0.35 && answer.attemptId !== null) {
        const body = chance(0.4)
          ? { state: 'succeeded', result: { content: [{ type: 'text', text: `checked by ${name}` }], structuredContent: { resolved_by: name, call } } }
          : chance(0.7) ? { state: 'failed', error: { code: 'resolved_failed', message: `${name}: the charge is not in the ledger` } } : { state: 'cancelled' };
        await send('resolve', call, mode, `/v1/attempts/${answer.attemptId}/resolve`, body, { jobId: answer.jobId, attemptId: answer.attemptId });
        await again();
      } else if (r < 0.45) {
        await send('cancel', call, mode, `/v1/jobs/${answer.jobId}/cancel`, {}, { jobId: answer.jobId });
        await again();
      }
    };

    /** Repeats a raw call (same key or none) until an answer that is not a transient failure (bounded). */
    const rawUntilAnswered = async (call: string, mode: ToolKeyMode, params: ToolCallParams, header?: string): Promise<ToolAnswer | undefined> => {
      for (let i = 0; i < 4; i++) {
        const { entry } = await rawCall(call, mode, params, { ...(header === undefined ? {} : { header }), timeoutMs: i === 0 && chance(0.2) ? 300 + Math.floor(o.random() * 1500) : 8000 });
        const a = entry.answer;
        const transient = entry.status === null || entry.status >= 500 || (a?.kind === 'error' && (a.code === 'attempt_in_flight' || a.code === 'unavailable'));
        if (!transient) return a;
        await sleep(100 + Math.floor(o.random() * 300));
      }
      return undefined;
    };

    let k = 0;
    while (Date.now() < o.until) {
      k++;
      const call = `${o.tag}-${name}-${k}`;
      const d = o.random();
      // Most calls are quick; some take a while; a few outlast the tool's deadline (2.5 s): those end in doubt.
      const delayMs = d < 0.7 ? Math.floor(o.random() * 200) : d < 0.9 ? 200 + Math.floor(o.random() * 1300) : 3000 + Math.floor(o.random() * 1000);
      const args = { call, amount: 1 + Math.floor(o.random() * 100), delayMs };
      const m = o.random();
      const mode: ToolKeyMode = m < 0.6 ? 'meta' : m < 0.8 ? 'header' : 'keyless';
      try {
        if (mode === 'meta') {
          const key = `${o.tag}:${call}`;
          const once = () => callToolOnce(callerFor(call), { name: CHARGE, arguments: args }, { idempotencyKey: key, retry: { maxRetries: 3, baseDelayMs: 150 }, tryTimeoutMs: chance(0.2) ? 300 + Math.floor(o.random() * 1500) : 8000 });
          const outcomes = await Promise.allSettled(chance(0.25) ? [once(), once()] : [once()]);
          const first = outcomes.find((x) => x.status === 'fulfilled')?.value;
          if (first !== undefined) {
            await decide(call, mode, answerOf({ result: first.result }), () => once().catch(() => undefined));
            if (chance(0.2)) await once().catch(() => undefined);
          }
        } else {
          const header = mode === 'header' ? `${o.tag}-h-${call}` : undefined;
          const params = { name: CHARGE, arguments: args };
          const repeats = mode === 'keyless' ? 1 + Math.floor(o.random() * 3) : chance(0.3) ? 2 : 1;
          const answers = chance(0.5)
            ? await Promise.all(Array.from({ length: repeats }, () => rawUntilAnswered(call, mode, params, header)))
            : await (async () => {
              const xs: (ToolAnswer | undefined)[] = [];
              for (let i = 0; i < repeats; i++) xs.push(await rawUntilAnswered(call, mode, params, header));
              return xs;
            })();
          await decide(call, mode, answers.find((a) => a !== undefined), () => rawUntilAnswered(call, mode, params, header));
        }
        if (chance(0.1)) await rawCall(call, 'keyless', { name: `${TOOL_SERVER}.balance`, arguments: {} });
      } catch {
        // A refusal (callToolOnce throws it) is recorded already; the agent goes on.
      }
      await sleep(50 + Math.floor(o.random() * 200));
    }
  };
  await Promise.all(Array.from({ length: o.agents }, (_, i) => agent(i)));
  await new Promise<void>((r) => out.end(() => r()));
  await dispatcher.close();
  return seq;
}
