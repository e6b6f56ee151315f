/**
 * The chaos checker's rules for answers onejob may trust (CONTRACT §15,
 * issue 35). Pure, like chaos/checker.ts, which calls {@link checkTrust}:
 *
 * - `foreign_answer`: a job's result is the work the doubt fake did for
 *   another attempt (its scripted reply, unique per create), not for the
 *   job's winner: a lookup took another attempt's stored completion (the
 *   doubt fake ignores the `metadata[…]` filter), a response or task under
 *   another id, or a callback replayed onto another attempt was accepted.
 * - `settled_while_live`: an outside resolver (`resolved_by` `lookup`,
 *   `callback` or `policy` on the attempt's end event) moved an attempt that
 *   was not `unknown` at that moment (its last state event before the end was
 *   `attempt.started`, `attempt.claimed`, `attempt.running` or
 *   `attempt.handed_back`): only an attempt in doubt is settled from outside.
 */
import type { DbAttempt, DbEvent, DbJob } from './records.ts';

/** One finding, in the shape chaos/checker.ts turns into a violation. */
export interface TrustFinding {
  readonly kind: 'foreign_answer' | 'settled_while_live';
  readonly jobId: string | null;
  readonly message: string;
  readonly detail: Record<string, unknown>;
}

/** Who settles from outside (CONTRACT §11's `resolved_by` of resolvers that are not the attempt's executor nor a person). */
const OUTSIDE = new Set(['lookup', 'callback', 'policy']);
const ENDS = new Set(['attempt.succeeded', 'attempt.failed', 'attempt.cancelled', 'attempt.superseded']);
/** The state each event leaves an attempt in (events that change nothing are absent). */
const STATE_OF: Readonly<Record<string, string>> = {
  'attempt.started': 'starting',
  'attempt.claimed': 'starting',
  'attempt.handed_back': 'starting',
  'attempt.running': 'running',
  'attempt.unknown': 'unknown',
};

/**
 * Checks the rules. `replies` are the scripted reply texts each attempt's
 * creates chose at the doubt fake (chaos/doubt-checker.ts `repliesByAttempt`).
 * Returns the findings and the jobs that have a `foreign_answer` (the caller
 * reports no `result_mismatch` for those: this is the precise reason).
 */
export function checkTrust(jobs: readonly DbJob[], attempts: readonly DbAttempt[], events: readonly DbEvent[], replies: ReadonlyMap<string, readonly string[]>): { findings: TrustFinding[]; foreignJobs: Set<string> } {
  const findings: TrustFinding[] = [];
  const foreignJobs = new Set<string>();
  const attemptById = new Map(attempts.map((a) => [a.id, a]));
  const whoseReply = new Map<string, string>();
  for (const [attemptId, texts] of replies) for (const t of texts) whoseReply.set(t, attemptId);
  for (const job of jobs) {
    if (job.state !== 'succeeded' || job.completed_by === null) continue;
    const content = (job.result as { content?: unknown } | null)?.content;
    if (typeof content !== 'string') continue;
    const owner = whoseReply.get(content);
    if (owner === undefined || owner === job.completed_by || (replies.get(job.completed_by) ?? []).includes(content)) continue;
    const other = attemptById.get(owner);
    foreignJobs.add(job.id);
    findings.push({
      kind: 'foreign_answer', jobId: job.id,
      message: `the result of job ${job.id} (won by ${job.completed_by}) is the work the fake did for attempt ${owner}${other ? ` (#${other.number} of job ${other.job_id})` : ''}`,
      detail: { winner: job.completed_by, content, work_of: owner, work_of_job: other?.job_id ?? null, resolved_by: attemptById.get(job.completed_by)?.resolved_by ?? null },
    });
  }
  const state = new Map<string, string>();
  for (const ev of [...events].sort((x, y) => x.id - y.id)) {
    if (ev.attempt_id === null) continue;
    const next = STATE_OF[ev.type];
    if (next !== undefined) {
      state.set(ev.attempt_id, next);
      continue;
    }
    if (!ENDS.has(ev.type)) continue;
    const by = ev.data.resolved_by;
    const was = state.get(ev.attempt_id);
    state.set(ev.attempt_id, ev.type.slice('attempt.'.length));
    if (typeof by !== 'string' || !OUTSIDE.has(by) || was === undefined || was === 'unknown') continue;
    findings.push({
      kind: 'settled_while_live', jobId: ev.job_id,
      message: `attempt ${ev.attempt_id} was ${was} (its executor's) when ${by} ended it (${ev.type}, event ${ev.id}): only an attempt in doubt is settled from outside`,
      detail: { attempt: ev.attempt_id, was, resolved_by: by, event: ev.id, type: ev.type },
    });
  }
  return { findings, foreignJobs };
}
