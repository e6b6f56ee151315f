/**
 * The chaos checker's rules for doubt that resolves itself (CONTRACT §11,
 * docs/reconciliation.md). Pure, like chaos/checker.ts, which calls
 * {@link checkDoubt} when a run gives {@link DoubtInput}:
 *
 * - `doubt_unresolved` (liveness): once the faults stopped, no attempt on a
 *   provider with a lookup stays `unknown` longer than
 *   {@link DoubtInput.windowMs} (two minutes: the reconciler asks with
 *   backoff up to 60 s between asks). Counted from `max(unknown_at, quiet)`
 *   to the attempt's end, or to the snapshot while it is still unknown. An
 *   attempt the lookup cannot ask about (a `resp_…` or task id never
 *   received: the create's answer was lost) is exempt and counted in the
 *   notes (`doubt_unaskable_unknown`): it waits for a callback or a person.
 * - `double_submit`: no attempt's work is ever sent twice upstream (the fakes
 *   count the creates carrying each attempt's id, chat, response and task
 *   alike): a lookup never submits again, and neither does anything else.
 */
import type { DbAttempt } from './records.ts';

/** The creates one attempt sent to one fake, and the reply each chose. */
export interface DoubtSubmit {
  readonly attempt_id: string;
  readonly submits: number;
  readonly replies: readonly unknown[];
  /** Which fake counted them. */
  readonly fake: string;
}

/** What the doubt rules read besides the database snapshot. */
export interface DoubtInput {
  /** The providers with a lookup, and what their lookup asks by (chaos/doubt-cluster.ts DOUBT_LOOKUPS). */
  readonly lookups: Readonly<Record<string, 'id' | 'attempt'>>;
  /** How long after the faults stopped an askable attempt may stay unknown. */
  readonly windowMs: number;
  /** Every fake's creates per attempt id. */
  readonly submits: readonly DoubtSubmit[];
}

/** One finding, in the shape chaos/checker.ts turns into a violation. */
export interface DoubtFinding {
  readonly kind: 'doubt_unresolved' | 'double_submit';
  readonly jobId: string | null;
  readonly message: string;
  readonly detail: Record<string, unknown>;
}

/** Whether the provider's lookup can ask about this attempt. */
export function askable(a: Pick<DbAttempt, 'provider' | 'provider_request_id'>, lookups: DoubtInput['lookups']): boolean {
  const how = lookups[a.provider];
  return how === 'attempt' || (how === 'id' && typeof a.provider_request_id === 'string');
}

/** The text a scripted reply makes (a string as is, any other value as its JSON). */
export function replyText(reply: unknown): string | null {
  if (reply === null || reply === undefined) return null;
  return typeof reply === 'string' ? reply : JSON.stringify(reply);
}

/**
 * Checks the doubt rules. `quietSince` and `takenAt` are the database's
 * clock when the faults stopped and when the snapshot was read.
 */
export function checkDoubt(input: DoubtInput, attempts: readonly DbAttempt[], quietSince: string, takenAt: string): { findings: DoubtFinding[]; notes: Record<string, number> } {
  const findings: DoubtFinding[] = [];
  const notes: Record<string, number> = {};
  const note = (name: string, n = 1): void => {
    notes[name] = (notes[name] ?? 0) + n;
  };
  const byId = new Map(attempts.map((a) => [a.id, a]));
  const quiet = Date.parse(quietSince);
  const taken = Date.parse(takenAt);
  const resolutionMs: number[] = [];
  for (const a of attempts) {
    if (input.lookups[a.provider] === undefined || a.unknown_at === undefined || a.unknown_at === null) continue;
    note('doubt_attempts');
    const unknownAt = Date.parse(a.unknown_at);
    const finished = a.state === 'unknown' || a.finished_at === undefined || a.finished_at === null ? taken : Date.parse(a.finished_at);
    if (a.state !== 'unknown') {
      note(`doubt_resolved_by_${a.resolved_by ?? 'own_answer'}`);
      resolutionMs.push(finished - unknownAt);
    }
    if (!askable(a, input.lookups)) {
      if (a.state === 'unknown') note('doubt_unaskable_unknown');
      continue;
    }
    if (a.state === 'unknown') note('doubt_askable_unknown');
    const since = Math.max(unknownAt, quiet);
    if (finished - since > input.windowMs) {
      findings.push({
        kind: 'doubt_unresolved', jobId: a.job_id,
        message: `attempt ${a.id} (#${a.number}) on ${a.provider}, which has a lookup, ${a.state === 'unknown' ? 'is still' : 'stayed'} unknown ${Math.round((finished - since) / 1000)} s after the faults stopped (or it became unknown); the reconciler must end it within ${Math.round(input.windowMs / 1000)} s`,
        detail: { attempt: a.id, provider: a.provider, state: a.state, unknown_at: a.unknown_at, finished_at: a.finished_at ?? null, provider_request_id: a.provider_request_id ?? null, resolved_by: a.resolved_by ?? null },
      });
    }
  }
  if (resolutionMs.length > 0) {
    const sorted = [...resolutionMs].sort((x, y) => x - y);
    notes.doubt_resolution_p50_ms = Math.round(sorted[Math.floor((sorted.length - 1) * 0.5)]!);
    notes.doubt_resolution_max_ms = Math.round(sorted.at(-1)!);
  }
  const total = new Map<string, { submits: number; fakes: string[] }>();
  for (const s of input.submits) {
    const t = total.get(s.attempt_id) ?? { submits: 0, fakes: [] };
    t.submits += s.submits;
    t.fakes.push(`${s.fake}×${s.submits}`);
    total.set(s.attempt_id, t);
  }
  note('submits_counted', total.size);
  for (const [attemptId, t] of total) {
    const a = byId.get(attemptId);
    if (a === undefined) note('submits_without_attempt');
    if (t.submits > 1) {
      findings.push({
        kind: 'double_submit', jobId: a?.job_id ?? null,
        message: `attempt ${attemptId}${a === undefined ? '' : ` (#${a.number} on ${a.provider})`} was submitted upstream ${t.submits} times (${t.fakes.join(', ')})`,
        detail: { attempt: attemptId, submits: t.submits, fakes: t.fakes, state: a?.state ?? null, resolved_by: a?.resolved_by ?? null },
      });
    }
  }
  return { findings, notes };
}

/** The reply texts each attempt's creates chose: the outputs a doubt job's result may carry (the checker's result rule). */
export function repliesByAttempt(submits: readonly DoubtSubmit[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const s of submits) {
    const texts = s.replies.map(replyText).filter((t): t is string => t !== null);
    if (texts.length > 0) out.set(s.attempt_id, [...(out.get(s.attempt_id) ?? []), ...texts]);
  }
  return out;
}
