/**
 * The checker's rules for tool calls through `/mcp` (CONTRACT §14), over
 * what the agents were told (chaos/tool-agents.ts), what the counting tool
 * server executed (chaos/tool-server.ts) and the database:
 * - `tool_executed_twice`: at most one execution upstream per intended tool
 *   call (each call has one key: its `_meta` key, its header, or its
 *   arguments' fingerprint), and per onejob attempt (the key onejob sends);
 * - `tool_success_unexecuted`: never a success told for a call that did not
 *   execute: every successful tool result an agent received, and every
 *   succeeded tool job, carries an execution the tool server logged for that
 *   same call (and that job), unless an operator resolved it `succeeded`
 *   with that result (recorded by the agent that did).
 *
 * Pure, like chaos/checker.ts: unit-tested with planted violations in
 * test/chaos/checker.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isStillRunningState } from '../src/client/tool-call.ts';
import type { Violation } from './checker.ts';
import type { DbSnapshot } from './records.ts';
import { TOOL_CALLS_FILE, TOOL_EXECUTIONS_FILE, TOOL_ROUTE, type ToolCallEntry, type ToolExecution } from './tool-records.ts';

/** The kinds of violation these rules report (beside chaos/checker.ts's VIOLATION_KINDS). */
export const TOOL_VIOLATION_KINDS = ['tool_executed_twice', 'tool_success_unexecuted'] as const;
export type ToolViolationKind = (typeof TOOL_VIOLATION_KINDS)[number];

/** What {@link checkToolCalls} reads. */
export interface ToolCheckInput {
  readonly calls: readonly ToolCallEntry[];
  readonly executions: readonly ToolExecution[];
  readonly db: DbSnapshot;
}

/** A run directory's tool records (empty for runs recorded before the tool agents) beside its database snapshot. */
export function loadToolRun(dir: string, db: DbSnapshot): ToolCheckInput {
  const lines = <T>(name: string): T[] => {
    const file = join(dir, name);
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as T) : [];
  };
  return { calls: lines<ToolCallEntry>(TOOL_CALLS_FILE), executions: lines<ToolExecution>(TOOL_EXECUTIONS_FILE), db };
}

/** The violations found, and counts worth knowing (prefixed `tool_`). */
export function checkToolCalls(input: ToolCheckInput): { violations: Violation[]; notes: Record<string, number> } {
  const violations: Violation[] = [];
  const notes: Record<string, number> = {};
  const note = (name: string, n = 1): void => {
    notes[name] = (notes[name] ?? 0) + n;
  };
  const brief = (e: ToolCallEntry): Record<string, unknown> => ({
    h: e.id, agent: e.agent, op: e.op, call: e.call, mode: e.mode, key: e.key, sent: Math.round(e.sentAt), recv: Math.round(e.recvAt), status: e.status ?? e.outcome,
    ...(e.answer === undefined ? {} : { answer: e.answer }), ...(e.body === undefined ? {} : { body: e.body }),
  });
  const callsOf = new Map<string, ToolCallEntry[]>();
  for (const e of input.calls) callsOf.set(e.call, [...(callsOf.get(e.call) ?? []), e]);
  const excerpt = (call: string, extra: unknown[] = []): unknown[] => [...extra, ...(callsOf.get(call) ?? []).slice(0, 6).map(brief)];

  const byCall = new Map<string, ToolExecution[]>();
  const byAttempt = new Map<string, ToolExecution[]>();
  const execById = new Map<string, ToolExecution>();
  for (const x of input.executions) {
    byCall.set(x.call, [...(byCall.get(x.call) ?? []), x]);
    if (x.key !== null) byAttempt.set(x.key, [...(byAttempt.get(x.key) ?? []), x]);
    execById.set(x.exec, x);
  }
  note('tool_executions', input.executions.length);
  note('tool_intended_calls', callsOf.size);

  // 1. At most one execution per intended call, and per attempt.
  for (const [call, xs] of byCall) {
    if (xs.length > 1) {
      violations.push({ kind: 'tool_executed_twice', jobId: xs[0]!.jobId, message: `intended call ${call} was executed ${xs.length} times upstream (jobs ${[...new Set(xs.map((x) => x.jobId))].join(', ')}; attempts ${xs.map((x) => x.key).join(', ')})`, excerpt: excerpt(call, [{ executions: xs }]) });
    }
  }
  for (const [attempt, xs] of byAttempt) {
    if (xs.length > 1 && new Set(xs.map((x) => x.call)).size > 1) {
      violations.push({ kind: 'tool_executed_twice', jobId: xs[0]!.jobId, message: `attempt ${attempt} was executed ${xs.length} times upstream, for calls ${xs.map((x) => x.call).join(', ')}`, excerpt: [{ executions: xs }] });
    }
  }

  // 2. No success without its execution (or an operator's resolution with that result).
  const resolvedBy = new Map<string, string[]>();
  for (const e of input.calls) {
    const b = e.body as { state?: string; result?: { structuredContent?: { resolved_by?: unknown } } } | undefined;
    if (e.op === 'resolve' && e.jobId !== undefined && b?.state === 'succeeded' && typeof b.result?.structuredContent?.resolved_by === 'string') {
      resolvedBy.set(e.jobId, [...(resolvedBy.get(e.jobId) ?? []), b.result.structuredContent.resolved_by]);
    }
  }
  const unexecuted = (jobId: string | null, call: string, exec: string | null, by: string | null): string | null => {
    if (by !== null) return jobId !== null && (resolvedBy.get(jobId) ?? []).includes(by) ? null : `an operator's result (resolved_by ${by}) that no resolve of job ${jobId} gave`;
    if (exec === null) return 'a result naming no execution';
    const x = execById.get(exec);
    if (x === undefined) return `execution ${exec}, which the tool server never logged`;
    if (x.call !== call) return `execution ${exec}, which was made for call ${x.call}`;
    if (jobId !== null && x.jobId !== null && x.jobId !== jobId) return `execution ${exec}, which was made for job ${x.jobId}`;
    return null;
  };
  for (const e of input.calls) {
    if (e.op !== 'call') continue;
    const a = e.answer;
    if (a === undefined) continue;
    // A result past the server's wait says the job is still running (CONTRACT §15): no success is told, unless it names an execution.
    const stillRunning = a.kind === 'result' && !a.isError && isStillRunningState(a.state) && a.exec === null;
    note(`tool_answers_${a.kind === 'error' ? `error_${a.code ?? a.rpcCode}` : a.isError ? (a.state === 'unknown' ? 'in_doubt' : 'tool_error') : stillRunning ? 'still_running' : a.replayed ? 'replayed' : 'fresh'}`);
    if (a.kind !== 'result' || a.isError || stillRunning) continue;
    const why = unexecuted(a.jobId, e.call, a.exec, a.resolvedBy);
    if (why !== null) violations.push({ kind: 'tool_success_unexecuted', jobId: a.jobId, message: `agent ${e.agent} was told call ${e.call} succeeded (h${e.id}) with ${why}`, excerpt: excerpt(e.call) });
  }
  for (const job of input.db.jobs) {
    if (job.route !== TOOL_ROUTE) continue;
    note(`tool_jobs_${job.state}`);
    if (job.state !== 'succeeded') continue;
    const r = job.result as { isError?: unknown; structuredContent?: { exec?: unknown; call?: unknown; resolved_by?: unknown } } | null;
    const call = (job.input as { arguments?: { call?: unknown } } | null)?.arguments?.call;
    if (typeof call !== 'string') continue;
    const sc = r?.structuredContent;
    const why = unexecuted(job.id, call, typeof sc?.exec === 'string' ? sc.exec : null, typeof sc?.resolved_by === 'string' ? sc.resolved_by : null);
    if (why !== null) violations.push({ kind: 'tool_success_unexecuted', jobId: job.id, message: `tool job ${job.id} (call ${call}) is succeeded with ${why}`, excerpt: excerpt(call, [{ result: job.result }]) });
  }
  return { violations, notes };
}
