/**
 * One attempt's life as an explicit machine (issue #20 §3, STYLE §22): the
 * named steps an executor walks an attempt through, and the pure decisions
 * it takes on the way. No I/O here: plain data in, plain data out. The
 * executor (`executor.ts`) feeds in what happened (the request was written,
 * the deadline fired, the first output came, the store said which guard
 * failed, the answer arrived, a write failed…) and carries out what comes
 * back (write `running`, mark `unknown`, abort the request, settle `failed`
 * with the partial usage…).
 *
 * Steps: `lease` → `send` → `first_output` → `answer` → `record` → `report`.
 *
 * - {@link stepAttempt}: the events while the request is out (send, first
 *   output), each giving the next state and the actions to carry out.
 * - {@link planRecord}: once the provider answered, what to record.
 * - {@link planRefusal}: a settle the store refused, by which guard.
 * - {@link isOwnEarlierSettle}: after a retried settle found the attempt
 *   finished, whether what is there is our own earlier try.
 * - {@link planWriteFailure}: a write that failed: try again (and for how
 *   long more), hold the answer, or give up.
 * - {@link planLeaseAfterCreate}: the fast path's lease after the create
 *   answered (or did not).
 * - {@link planHandBack}: the hand-back of a never-sent first attempt whose
 *   create went unanswered: tried again, done or given up.
 *
 * The decision table, step by step, is in docs/executor.md ("The attempt
 * machine"); test/executor/attempt-machine.test.ts walks every row.
 */

/** The named steps of an attempt (Oban-style pipeline). */
export const AttemptStep = {
  /** Claimed (or created leased at birth); nothing sent yet. */
  lease: 'lease',
  /** The request was written to the connection: the deadline runs. */
  send: 'send',
  /** A stream's first output came: it owns (or lost) the job's stream. */
  firstOutput: 'first_output',
  /** The provider answered (success, failure or ambiguous). */
  answer: 'answer',
  /** The outcome is being written. */
  record: 'record',
  /** Recorded (or given up): events, the stream's end. */
  report: 'report',
} as const;
export type AttemptStep = (typeof AttemptStep)[keyof typeof AttemptStep];

/** Why the attempt went into doubt here. */
export type DoubtCode = 'deadline_exceeded' | 'stream_stalled';

/** Where this executor's lease stands: `expired` still records the answer by its token; `lost` writes nothing more. */
export type LeaseHold = 'held' | 'expired' | 'lost';

/** What stopped the attempt from outside: the job was cancelled, or another attempt decided it. */
export type StopReason = 'cancelled' | 'superseded';

/** An attempt's state in the machine: plain data, replaced (never mutated) by each event. */
export interface AttemptState {
  readonly step: AttemptStep;
  readonly streaming: boolean;
  /** The route hedges: `running` is marked at once (a hedge stands beside a running attempt). */
  readonly hedged: boolean;
  /** `running` is marked at once after the dispatch (a hedged route, or `runningMarkDelayMs` 0). */
  readonly markAtOnce: boolean;
  readonly dispatched: boolean;
  readonly deadlineArmed: boolean;
  /** The `running` mark: `pending` while its delay runs; `writing` once asked for. */
  readonly mark: 'none' | 'pending' | 'writing';
  readonly firstOutput: boolean;
  readonly doubt: DoubtCode | null;
  readonly lease: LeaseHold;
  readonly stopped: StopReason | null;
  readonly answered: boolean;
}

/** The state of an attempt just leased to this executor. */
export function startAttempt(p: { readonly streaming: boolean; readonly hedged: boolean; readonly runningMarkDelayMs: number }): AttemptState {
  return {
    step: AttemptStep.lease, streaming: p.streaming, hedged: p.hedged, markAtOnce: p.hedged || p.runningMarkDelayMs === 0,
    dispatched: false, deadlineArmed: false, mark: 'none', firstOutput: false, doubt: null, lease: 'held', stopped: null, answered: false,
  };
}

/** Where the lease stands, as the store said (`Store.leaseStatus`), reduced to what the machine needs. */
export type LeaseReport = 'held' | 'expired' | 'finished_cancelled' | 'finished_other' | 'lost' | 'gone';

/** What happened to an attempt while its request is out. */
export type AttemptEvent =
  /** The request was written (`ProviderRequest.onDispatched`). */
  | { readonly type: 'dispatched' }
  /** The provider never reported the dispatch within `timeoutMs` + the connect bound. */
  | { readonly type: 'dispatch_backstop' }
  /** The `running` mark's delay is over. */
  | { readonly type: 'mark_due' }
  /** The `running` write came back: applied or not (then the store is asked why). */
  | { readonly type: 'marked'; readonly applied: boolean }
  /** The store said where the lease stands, after a fenced write (the `running` mark, a settle) or a renewal did not apply. */
  | { readonly type: 'lease_status'; readonly after: 'write' | 'renewal'; readonly status: LeaseReport }
  /** `timeoutMs` passed without an answer (a stream: without a first output). */
  | { readonly type: 'deadline' }
  /** A stream was silent for `idleTimeoutMs` after its first output. */
  | { readonly type: 'stall' }
  /** A stream's first output delta (text, refusal or a tool call). */
  | { readonly type: 'first_output' }
  /** The stream claim came back. */
  | { readonly type: 'stream_claim'; readonly claimed: boolean }
  /** The job was decided (cancelled, or won by another attempt) while this attempt is out. */
  | { readonly type: 'job_decided'; readonly cancelled: boolean }
  /** The provider answered. */
  | { readonly type: 'answered' };

/** What the executor carries out after an event, in order. */
export type AttemptAction =
  | { readonly do: 'arm_deadline' }
  | { readonly do: 'schedule_mark' }
  /** Write `running`; with the provider's `timeoutMs` as the deadline unless the first output came. */
  | { readonly do: 'write_running'; readonly withDeadline: boolean }
  | { readonly do: 'report_dispatched' }
  | { readonly do: 'schedule_hedge' }
  | { readonly do: 'ask_lease_status' }
  /** The lease is another's: no more writes (reported once); the request is aborted too when a renewal found it. */
  | { readonly do: 'lose_lease' }
  | { readonly do: 'write_unknown'; readonly reason: DoubtCode }
  | { readonly do: 'abort'; readonly why: AbortWhy }
  /** Keep listening for a late answer, for `lateAnswerGraceMs`. */
  | { readonly do: 'schedule_grace' }
  | { readonly do: 'clear_hedge' }
  | { readonly do: 'clear_deadline' }
  | { readonly do: 'schedule_idle' }
  | { readonly do: 'cancel_mark' }
  /** Claim the job's stream; `thenMark`: the `running` mark (cancelled above) is written after the claim. */
  | { readonly do: 'claim_stream'; readonly thenMark: boolean }
  /**
   * A route without hedging, at the first output: open the hub stream at once, in memory only (the
   * claim's commit is not waited for), and flush what came before.
   */
  | { readonly do: 'publish_stream' }
  /** The claim won: open the hub stream (a hedged route) or start storing the one published, and stop the job's other attempts here. */
  | { readonly do: 'open_stream' }
  /** The claim lost on a route without hedging: the stream published from memory ends with an error, never stored. */
  | { readonly do: 'drop_stream' };

/** Why a request is aborted (each has its own message). */
export type AbortWhy = 'stream_deadline' | 'stream_stalled' | 'lease_lost' | 'job_cancelled' | 'job_decided' | 'stream_owned_elsewhere';

/** The next state and what to do. */
export interface AttemptTransition {
  readonly state: AttemptState;
  readonly actions: readonly AttemptAction[];
}

const none: readonly AttemptAction[] = [];

/** The `running` mark is due: written unless the answer came first or the lease is another's. */
function markNow(s: AttemptState, before: readonly AttemptAction[] = none): AttemptTransition {
  if (s.answered || s.lease === 'lost') return { state: { ...s, mark: 'none' }, actions: before };
  return { state: { ...s, mark: 'writing' }, actions: [...before, { do: 'write_running', withDeadline: !s.firstOutput }] };
}

/** The job was decided from outside: stop once (a cancel is `cancelled`, anything else `superseded`). */
function stop(s: AttemptState, cancelled: boolean): AttemptTransition {
  if (s.stopped !== null) return { state: s, actions: none };
  return { state: { ...s, stopped: cancelled ? 'cancelled' : 'superseded' }, actions: [{ do: 'abort', why: cancelled ? 'job_cancelled' : 'job_decided' }] };
}

function loseLease(s: AttemptState, abort: boolean): AttemptTransition {
  if (s.lease === 'lost') return { state: s, actions: abort ? [{ do: 'abort', why: 'lease_lost' }] : none };
  return { state: { ...s, lease: 'lost' }, actions: abort ? [{ do: 'lose_lease' }, { do: 'abort', why: 'lease_lost' }] : [{ do: 'lose_lease' }] };
}

/** One event while the request is out: the next state and the actions to carry out. */
export function stepAttempt(s: AttemptState, e: AttemptEvent): AttemptTransition {
  switch (e.type) {
    case 'dispatched': {
      // The deadline counts from here: a slow connect is not the provider's silence.
      const arm = !s.deadlineArmed && !s.answered;
      const sent: AttemptState = { ...s, dispatched: true, deadlineArmed: s.deadlineArmed || arm, step: s.step === AttemptStep.lease ? AttemptStep.send : s.step };
      const before: readonly AttemptAction[] = arm ? [{ do: 'arm_deadline' }] : none;
      if (sent.markAtOnce) return markNow(sent, before);
      return { state: { ...sent, mark: 'pending' }, actions: [...before, { do: 'schedule_mark' }] };
    }
    case 'dispatch_backstop':
      if (s.dispatched || s.deadlineArmed || s.answered) return { state: s, actions: none };
      return { state: { ...s, deadlineArmed: true }, actions: [{ do: 'arm_deadline' }] };
    case 'mark_due':
      return markNow(s);
    case 'marked':
      // Not applied: ask which guard failed before giving anything up (STYLE §23).
      if (!e.applied) return { state: s, actions: [{ do: 'ask_lease_status' }] };
      return { state: s, actions: s.hedged && s.doubt === null && !s.answered && !s.firstOutput ? [{ do: 'report_dispatched' }, { do: 'schedule_hedge' }] : [{ do: 'report_dispatched' }] };
    case 'lease_status':
      switch (e.status) {
        case 'held':
          return { state: s, actions: none };
        case 'expired':
          // The lease ran out (the database was away) but its token still names the attempt: keep listening.
          return { state: { ...s, lease: s.lease === 'lost' ? 'lost' : 'expired' }, actions: none };
        case 'finished_cancelled':
          return stop(s, true);
        case 'finished_other':
          return stop(s, false);
        case 'lost':
        case 'gone':
          // A fenced write that did not apply only stops the writes; a renewal that finds another lease stops the request too.
          return loseLease(s, e.after === 'renewal');
      }
    // eslint-disable-next-line no-fallthrough
    case 'deadline':
      return {
        state: { ...s, doubt: 'deadline_exceeded' },
        // A stream cannot be resumed: stop it. A non-streamed request keeps listening for a late answer.
        actions: s.streaming ? [{ do: 'write_unknown', reason: 'deadline_exceeded' }, { do: 'abort', why: 'stream_deadline' }] : [{ do: 'write_unknown', reason: 'deadline_exceeded' }, { do: 'schedule_grace' }],
      };
    case 'stall':
      if (s.answered || s.doubt !== null) return { state: s, actions: none };
      return { state: { ...s, doubt: 'stream_stalled' }, actions: [{ do: 'write_unknown', reason: 'stream_stalled' }, { do: 'abort', why: 'stream_stalled' }] };
    case 'first_output': {
      if (s.firstOutput || s.stopped !== null || s.lease === 'lost') return { state: s, actions: none };
      const actions: AttemptAction[] = [{ do: 'clear_hedge' }];
      // From the first output only the idle bound applies (unless the deadline already fired).
      if (s.doubt === null) actions.push({ do: 'clear_deadline' }, { do: 'schedule_idle' });
      // Without hedging no other attempt of the job can be running beside this one (CONTRACT §3), so the
      // first token waits for nothing: it is published now and stored once the claim is in. A hedged
      // route's first token waits for the claim, which decides between the attempts.
      if (!s.hedged) actions.push({ do: 'publish_stream' });
      // A `running` mark not yet written goes after the claim.
      const thenMark = s.mark === 'pending';
      if (thenMark) actions.push({ do: 'cancel_mark' });
      actions.push({ do: 'claim_stream', thenMark });
      const out: AttemptState = { ...s, firstOutput: true, step: AttemptStep.firstOutput };
      return thenMark ? markNow(out, actions) : { state: out, actions };
    }
    case 'stream_claim': {
      if (e.claimed) return { state: s, actions: [{ do: 'open_stream' }] };
      // A lost claim without hedging: the job was decided (cancelled) or the lease is another's.
      const drop: readonly AttemptAction[] = s.hedged ? none : [{ do: 'drop_stream' }];
      if (s.stopped !== null) return { state: s, actions: drop };
      return { state: { ...s, stopped: 'superseded' }, actions: [...drop, { do: 'abort', why: 'stream_owned_elsewhere' }] };
    }
    case 'job_decided':
      return stop(s, e.cancelled);
    case 'answered':
      return { state: { ...s, answered: true, step: AttemptStep.answer }, actions: none };
  }
}

/** What the provider's answer was, as the record step needs it. */
export interface AnswerFacts {
  readonly kind: 'success' | 'failure' | 'ambiguous';
  /** The provider error's code (failure, ambiguous). */
  readonly code?: string | undefined;
  /** A success that is not a completion (an MCP tool's result): stored as given, no usage. */
  readonly givenResult?: boolean | undefined;
  /** A completion's contract check (CONTRACT §5); null when not checked. */
  readonly contractOk?: boolean | null | undefined;
  /** The executor is still running (not stopping). */
  readonly executorRunning: boolean;
}

/** Which usage goes with a record: none, the whole answer's (metered), or what a cut stream reported so far. */
export type UsageSource = 'none' | 'metered' | 'partial';

/** What to record once the provider answered. */
export type RecordPlan =
  /** Another lease holds the attempt: its payload is not ours to record, what it cost is (CONTRACT §8). */
  | { readonly record: 'usage_only'; readonly usage: UsageSource; readonly finished: 'abandoned' }
  /** Stopped by our own shutdown before anything was sent: hand the lease back, still `starting`. */
  | { readonly record: 'hand_back'; readonly finished: 'abandoned' }
  | {
    readonly record: 'settle';
    readonly state: 'succeeded' | 'failed' | 'cancelled' | 'superseded';
    /** The error recorded with it: the provider's, or one of ours. */
    readonly error: 'provider' | 'contract_violation' | 'cancelled' | 'superseded' | null;
    /** A success's result: the completion (checked content) or a result given as is. */
    readonly result: 'completion' | 'given' | null;
    readonly usage: UsageSource;
    /** Ask the provider's `retry` policy whether to try the same provider again (a definite failure). */
    readonly retryHere: boolean;
    /** Ask the provider to stop what it may still do (a stopped attempt whose answer was not a success). */
    readonly stopUpstream: boolean;
    readonly finished: 'outcome';
  }
  /** Ambiguous: `unknown` (once: `reuseDoubt` when the deadline already wrote it), then the lease given up, then the partial usage. */
  | { readonly record: 'unknown'; readonly reuseDoubt: boolean; readonly streamError: 'doubt' | 'provider'; readonly finished: 'outcome' };

/** The record step: what to write for the answer, given the attempt's state. */
export function planRecord(s: AttemptState, a: AnswerFacts): RecordPlan {
  const success = a.kind === 'success';
  if (s.lease === 'lost') return { record: 'usage_only', usage: success ? 'metered' : 'partial', finished: 'abandoned' };
  if (!a.executorRunning && s.stopped === null && a.kind === 'failure' && a.code === 'aborted_before_send') return { record: 'hand_back', finished: 'abandoned' };
  const settle = (state: 'succeeded' | 'failed' | 'cancelled' | 'superseded', error: 'provider' | 'contract_violation' | 'cancelled' | 'superseded' | null, result: 'completion' | 'given' | null, usage: UsageSource, retryHere = false): RecordPlan => ({
    record: 'settle', state, error, result, usage, retryHere, stopUpstream: s.stopped !== null && !success, finished: 'outcome',
  });
  // A success is settled as a success whatever stopped it: the compare-and-swap makes a late one superseded, with its usage.
  if (!success && s.stopped === 'cancelled') return settle('cancelled', 'cancelled', null, 'none');
  if (!success && s.stopped === 'superseded') return settle('superseded', 'superseded', null, 'partial');
  if (success && a.givenResult === true) return settle('succeeded', null, 'given', 'none');
  if (success) return a.contractOk === false ? settle('failed', 'contract_violation', null, 'metered') : settle('succeeded', null, 'completion', 'metered');
  if (a.kind === 'failure') return settle('failed', 'provider', null, 'partial', true);
  return { record: 'unknown', reuseDoubt: s.doubt !== null, streamError: s.doubt !== null ? 'doubt' : 'provider', finished: 'outcome' };
}

/** How a settle ended, for the stream's end (the report step). */
export type SettleEnd = { readonly won: boolean } | null;

/**
 * The report step for a streamed attempt: how its hub stream ends after the
 * record. `result`: with the stored result (the attempt won); `superseded`:
 * it finished after the job was decided; `error`: with the recorded error;
 * `interrupted`: no outcome was recorded (given up).
 */
export function streamEndFor(plan: RecordPlan, settled: SettleEnd): 'result' | 'superseded' | 'error' | 'doubt' | 'interrupted' {
  if (plan.record === 'usage_only' || plan.record === 'hand_back') return 'interrupted';
  if (plan.record === 'unknown') return plan.streamError === 'doubt' ? 'doubt' : 'error';
  if (plan.state === 'succeeded') return settled?.won === true ? 'result' : 'superseded';
  return 'error';
}

/** A settle the store refused, by the guard that failed. */
export type RefusalCode = 'lease_lost' | 'attempt_finished' | 'attempt_not_found' | 'job_not_found';

/** What to do after a refused settle. */
export type RefusalPlan =
  /** The job was deleted: no row can hold the answer; report its usage (event, `/metrics`). */
  | { readonly then: 'report_unrecorded' }
  /** Another lease holds the attempt: keep the usage on the row, write nothing more. */
  | { readonly then: 'keep_usage_lose_lease' }
  /** An earlier try of this settle may have committed (its answer lost): read back and tell the truth. */
  | { readonly then: 'read_back' }
  /** Decided from outside (a resolve): the answer's usage is kept, its payload dropped. */
  | { readonly then: 'keep_usage' };

/** The store refused a settle (`code`) on its `tries`-th try. */
export function planRefusal(code: RefusalCode, tries: number): RefusalPlan {
  switch (code) {
    case 'attempt_not_found':
    case 'job_not_found':
      return { then: 'report_unrecorded' };
    case 'lease_lost':
      return { then: 'keep_usage_lose_lease' };
    case 'attempt_finished':
      return tries > 1 ? { then: 'read_back' } : { then: 'keep_usage' };
  }
}

/**
 * After a retried settle found the attempt finished: whether what is there
 * is our own earlier try (the attempt ended as we wrote it: a success that
 * won with it, or lost the race on that try, superseded with our usage).
 */
export function isOwnEarlierSettle(
  wrote: { readonly state: string; readonly totalTokens: number | null },
  found: { readonly state: string; readonly won: boolean; readonly totalTokens: number | null; readonly errorCode: string | null },
): boolean {
  if (wrote.state !== 'succeeded') return found.state === wrote.state;
  if (found.state === 'succeeded') return found.won;
  const ourUsage = wrote.totalTokens === null || found.totalTokens === wrote.totalTokens;
  return found.state === 'superseded' && ourUsage && found.errorCode === 'superseded';
}

/** A write of the attempt failed: what the retry loop knows. */
export interface WriteFailureFacts {
  readonly write: 'settle' | 'unknown';
  readonly transient: boolean;
  /** This answer is held already (an earlier try of this settle failed). */
  readonly holding: boolean;
  /** Answers held by the executor now, and at most. */
  readonly held: number;
  readonly maxHeld: number;
  /** How long this answer has been held, and how long an answer is held at most (`answerHoldMs`). */
  readonly heldForMs: number;
  readonly holdMs: number;
  /** How long the lease may still be held (its last sure expiry plus a lease length, from now). */
  readonly leaseLeftMs: number;
  readonly leaseLost: boolean;
}

/** What to do after a failed write. */
export type WriteFailurePlan =
  /** Not a transient failure: the caller sees it. */
  | { readonly then: 'throw' }
  /** Try again within `leftMs`; `hold`: this answer starts being held now (count it, say so). */
  | { readonly then: 'retry'; readonly leftMs: number; readonly hold: boolean }
  | { readonly then: 'give_up'; readonly why: 'too_many_held' | 'hold_over' | 'lease_gone' | 'lease_lost' };

/**
 * A failed write: an answer in hand is held for up to `answerHoldMs` (its
 * lease's token fences it after the lease ran out), at most `maxHeld` at
 * once; a doubt (`unknown`) is tried only while the lease may still hold
 * (else the rescuer makes it `unknown` anyway).
 */
export function planWriteFailure(w: WriteFailureFacts): WriteFailurePlan {
  if (!w.transient) return { then: 'throw' };
  if (w.write === 'settle') {
    if (!w.holding && w.held >= w.maxHeld) return { then: 'give_up', why: 'too_many_held' };
    const leftMs = w.holdMs - (w.holding ? w.heldForMs : 0);
    return leftMs <= 0 ? { then: 'give_up', why: 'hold_over' } : { then: 'retry', leftMs, hold: !w.holding };
  }
  if (w.leaseLost) return { then: 'give_up', why: 'lease_lost' };
  return w.leaseLeftMs <= 0 ? { then: 'give_up', why: 'lease_gone' } : { then: 'retry', leftMs: w.leaseLeftMs, hold: false };
}

/** How the create of a job whose first attempt was leased at birth ended (the fast path's `lease` step). */
export type CreateEnd = 'created_leased' | 'created_queued' | 'replayed' | 'refused' | 'unanswered';

/**
 * The fast path's lease after the create: run the attempt (`adopt`), give
 * the reserved room back (`unused`: nothing leased here was written), or
 * hand the lease back (`release`: the create may have committed its leased
 * attempt, surely never sent, which must be run, never left to doubt).
 */
export function planLeaseAfterCreate(end: CreateEnd): 'adopt' | 'unused' | 'release' {
  if (end === 'created_leased') return 'adopt';
  return end === 'unanswered' ? 'release' : 'unused';
}

/** One try of handing back the never-sent attempt of a create that went unanswered (`Store.handBackUnsent`). */
export interface HandBackFacts {
  /** What the store said, or how the try failed. */
  readonly tried: 'handed_back' | 'absent' | 'refused' | 'transient' | 'permanent';
  /** How many tries found no such attempt so far, this one included. */
  readonly absent: number;
  /** How long the hand-back has been tried, and for how long at most (`answerHoldMs`: the database may be away for longer than the lease). */
  readonly triedForMs: number;
  readonly holdMs: number;
}

/** How many looks find no attempt before the create is taken as not committed. */
export const HAND_BACK_ABSENT_LOOKS = 3;

/**
 * The hand-back's retry loop: done once handed back; given up when
 * something else happened to the attempt (another claim, a resolve, a
 * cancel: `refused`), when a few looks found no attempt (the create did not
 * commit), on a permanent failure, or past `answerHoldMs`. A database that
 * fails is tried again with backoff, after the lease too: the token fences
 * the hand-back, from the rescuer's `unknown` as well, so an attempt that
 * was never sent is never left in doubt.
 */
export function planHandBack(h: HandBackFacts): { readonly then: 'done' | 'retry' | 'give_up' | 'throw' } {
  if (h.tried === 'handed_back') return { then: 'done' };
  if (h.tried === 'refused') return { then: 'give_up' };
  if (h.tried === 'permanent') return { then: 'throw' };
  if (h.tried === 'absent' && h.absent >= HAND_BACK_ABSENT_LOOKS) return { then: 'give_up' };
  return h.triedForMs >= h.holdMs ? { then: 'give_up' } : { then: 'retry' };
}
