/**
 * The attempt machine (src/executor/attempt-machine.ts), table by table:
 * every combination issue #20 §2 names, as events fed to the pure functions
 * and what they decide to record and do. The process and executor tests
 * (answers-kept, database-outage, first-attempt-kept, executor-process…)
 * prove the same rows against real PostgreSQL, SQLite and providers.
 */
import { describe, expect, it } from 'vitest';
import {
  AttemptStep, isOwnEarlierSettle, planHandBack, planLeaseAfterCreate, planRecord, planRefusal, planWriteFailure, startAttempt, stepAttempt, streamEndFor,
  type AnswerFacts, type AttemptAction, type AttemptEvent, type AttemptState, type CreateEnd, type HandBackFacts, HAND_BACK_ABSENT_LOOKS, type RecordPlan, type RefusalCode, type WriteFailureFacts,
} from '../../src/executor/attempt-machine.ts';

const plain = { streaming: false, hedged: false, runningMarkDelayMs: 50 } as const;
const streamed = { ...plain, streaming: true } as const;
const hedgedRoute = { ...plain, hedged: true } as const;
const streamedHedged = { ...streamed, hedged: true } as const;

/** Feeds the events in order; the final state and every action, in order. */
function feed(init: Parameters<typeof startAttempt>[0], events: readonly AttemptEvent[]): { state: AttemptState; actions: AttemptAction[]; last: readonly AttemptAction[] } {
  let state = startAttempt(init);
  const actions: AttemptAction[] = [];
  let last: readonly AttemptAction[] = [];
  for (const e of events) {
    const t = stepAttempt(state, e);
    state = t.state;
    last = t.actions;
    actions.push(...t.actions);
  }
  return { state, actions, last };
}

const ev = {
  dispatched: { type: 'dispatched' },
  backstop: { type: 'dispatch_backstop' },
  markDue: { type: 'mark_due' },
  marked: { type: 'marked', applied: true },
  notMarked: { type: 'marked', applied: false },
  deadline: { type: 'deadline' },
  stall: { type: 'stall' },
  firstOutput: { type: 'first_output' },
  claimed: { type: 'stream_claim', claimed: true },
  claimLost: { type: 'stream_claim', claimed: false },
  cancelled: { type: 'job_decided', cancelled: true },
  decided: { type: 'job_decided', cancelled: false },
  answered: { type: 'answered' },
  afterWrite: (status: Extract<AttemptEvent, { type: 'lease_status' }>['status']): AttemptEvent => ({ type: 'lease_status', after: 'write', status }),
  afterRenewal: (status: Extract<AttemptEvent, { type: 'lease_status' }>['status']): AttemptEvent => ({ type: 'lease_status', after: 'renewal', status }),
} satisfies Record<string, AttemptEvent | ((s: never) => AttemptEvent)>;

const dos = (actions: readonly AttemptAction[]) => actions.map((a) => a.do);
const success: AnswerFacts = { kind: 'success', contractOk: true, executorRunning: true };
const failure = (code: string): AnswerFacts => ({ kind: 'failure', code, executorRunning: true });
const ambiguous: AnswerFacts = { kind: 'ambiguous', code: 'provider_timeout', executorRunning: true };

describe('send: the deadline counts from when the request was written (§2 "deadline before the request left")', () => {
  const rows: readonly { name: string; init: Parameters<typeof startAttempt>[0]; events: AttemptEvent[]; actions: string[]; state?: Partial<AttemptState> }[] = [
    { name: 'nothing is armed at the lease: a slow connect is not the provider\'s silence', init: plain, events: [], actions: [], state: { step: AttemptStep.lease, deadlineArmed: false } },
    { name: 'the dispatch arms the deadline and schedules the running mark', init: plain, events: [ev.dispatched], actions: ['arm_deadline', 'schedule_mark'], state: { step: AttemptStep.send, dispatched: true, deadlineArmed: true, mark: 'pending' } },
    { name: 'a hedged route marks running at once (with the deadline)', init: hedgedRoute, events: [ev.dispatched], actions: ['arm_deadline', 'write_running'], state: { mark: 'writing' } },
    { name: 'runningMarkDelayMs 0 marks at once', init: { ...plain, runningMarkDelayMs: 0 }, events: [ev.dispatched], actions: ['arm_deadline', 'write_running'] },
    { name: 'a provider that never reports its dispatch: the backstop arms the deadline', init: plain, events: [ev.backstop], actions: ['arm_deadline'], state: { deadlineArmed: true, dispatched: false } },
    { name: 'the backstop after a dispatch does nothing', init: plain, events: [ev.dispatched, ev.backstop], actions: ['arm_deadline', 'schedule_mark'] },
    { name: 'a dispatch after the backstop does not arm twice', init: plain, events: [ev.backstop, ev.dispatched], actions: ['arm_deadline', 'schedule_mark'] },
    { name: 'the backstop after the answer does nothing', init: plain, events: [ev.answered, ev.backstop], actions: [] },
    { name: 'the mark is due: running is written with the deadline', init: plain, events: [ev.dispatched, ev.markDue], actions: ['arm_deadline', 'schedule_mark', 'write_running'] },
    { name: 'the answer came before the mark was due: no running write (starting → outcome in one commit)', init: plain, events: [ev.dispatched, ev.answered, ev.markDue], actions: ['arm_deadline', 'schedule_mark'], state: { mark: 'none', answered: true, step: AttemptStep.answer } },
    { name: 'running applied: reported dispatched', init: plain, events: [ev.dispatched, ev.markDue, ev.marked], actions: ['arm_deadline', 'schedule_mark', 'write_running', 'report_dispatched'] },
    { name: 'running applied on a hedged route: the hedge timer starts', init: hedgedRoute, events: [ev.dispatched, ev.marked], actions: ['arm_deadline', 'write_running', 'report_dispatched', 'schedule_hedge'] },
    { name: 'running applied after the deadline fired: no hedge beside a doubt', init: hedgedRoute, events: [ev.dispatched, ev.deadline, ev.marked], actions: ['arm_deadline', 'write_running', 'write_unknown', 'schedule_grace', 'report_dispatched'] },
    { name: 'running not applied: the store is asked which guard failed, nothing is given up yet', init: plain, events: [ev.dispatched, ev.markDue, ev.notMarked], actions: ['arm_deadline', 'schedule_mark', 'write_running', 'ask_lease_status'], state: { lease: 'held', stopped: null } },
  ];
  it.each(rows)('$name', ({ init, events, actions, state }) => {
    const r = feed(init, events);
    expect(dos(r.actions)).toEqual(actions);
    if (state) expect(r.state).toMatchObject(state);
  });

  it('a connect that fails before sending is a definite failure, retried where it happened when the policy allows; never unknown', () => {
    const { state } = feed(plain, [ev.answered]);
    const plan = planRecord(state, failure('provider_unreachable'));
    expect(plan).toMatchObject({ record: 'settle', state: 'failed', error: 'provider', usage: 'partial', retryHere: true });
  });
  it('the write that found the guard failed must not be read as "lease lost": expired keeps listening, the answer settles by its token', () => {
    const r = feed(plain, [ev.dispatched, ev.markDue, ev.notMarked, ev.afterWrite('expired'), ev.answered]);
    expect(r.state.lease).toBe('expired');
    expect(r.last).toEqual([]);
    expect(planRecord(r.state, success)).toMatchObject({ record: 'settle', state: 'succeeded', result: 'completion', usage: 'metered' });
  });
});

describe('lease status: which guard failed (STYLE §23)', () => {
  const rows: readonly { name: string; events: AttemptEvent[]; last: string[]; state: Partial<AttemptState> }[] = [
    { name: 'held (a race with the renewal): nothing changes', events: [ev.afterWrite('held')], last: [], state: { lease: 'held', stopped: null } },
    { name: 'expired after a write: keep listening, no abort', events: [ev.afterWrite('expired')], last: [], state: { lease: 'expired' } },
    { name: 'expired at a renewal: keep listening, no abort', events: [ev.afterRenewal('expired')], last: [], state: { lease: 'expired' } },
    { name: 'another lease after a write: no more writes, the request goes on (its usage is still kept)', events: [ev.afterWrite('lost')], last: ['lose_lease'], state: { lease: 'lost' } },
    { name: 'the attempt gone after a write: lost', events: [ev.afterWrite('gone')], last: ['lose_lease'], state: { lease: 'lost' } },
    { name: 'another lease at a renewal: lost and the request aborted', events: [ev.afterRenewal('lost')], last: ['lose_lease', 'abort'], state: { lease: 'lost' } },
    { name: 'lost twice: reported once; a renewal still aborts', events: [ev.afterWrite('lost'), ev.afterRenewal('lost')], last: ['abort'], state: { lease: 'lost' } },
    { name: 'lost, then expired: stays lost', events: [ev.afterWrite('lost'), ev.afterWrite('expired')], last: [], state: { lease: 'lost' } },
    { name: 'finished, cancelled (a cancel raced the claim): stopped as cancelled', events: [ev.afterWrite('finished_cancelled')], last: ['abort'], state: { stopped: 'cancelled' } },
    { name: 'finished otherwise (decided elsewhere): stopped as superseded', events: [ev.afterRenewal('finished_other')], last: ['abort'], state: { stopped: 'superseded' } },
  ];
  it.each(rows)('$name', ({ events, last, state }) => {
    const r = feed(plain, [ev.dispatched, ...events]);
    expect(dos(r.last)).toEqual(last);
    expect(r.state).toMatchObject(state);
  });
  it('a lost lease writes no running mark', () => {
    expect(dos(feed(plain, [ev.dispatched, ev.afterWrite('lost'), ev.markDue]).last)).toEqual([]);
  });
  it('the abort reasons say what stopped it', () => {
    expect(feed(plain, [ev.afterRenewal('lost')]).last).toContainEqual({ do: 'abort', why: 'lease_lost' });
    expect(feed(plain, [ev.cancelled]).last).toEqual([{ do: 'abort', why: 'job_cancelled' }]);
    expect(feed(plain, [ev.decided]).last).toEqual([{ do: 'abort', why: 'job_decided' }]);
  });
});

describe('deadline and stall: unknown, named for what they bound', () => {
  const rows: readonly { name: string; init: Parameters<typeof startAttempt>[0]; events: AttemptEvent[]; last: string[]; doubt: string | null }[] = [
    { name: 'a non-streamed deadline: unknown, and keep listening for a late answer', init: plain, events: [ev.dispatched, ev.deadline], last: ['write_unknown', 'schedule_grace'], doubt: 'deadline_exceeded' },
    { name: 'a stream without first output past the deadline: unknown and stopped', init: streamed, events: [ev.dispatched, ev.deadline], last: ['write_unknown', 'abort'], doubt: 'deadline_exceeded' },
    { name: 'a stream silent after its first output: unknown (stream_stalled) and stopped', init: streamed, events: [ev.dispatched, ev.firstOutput, ev.claimed, ev.stall], last: ['write_unknown', 'abort'], doubt: 'stream_stalled' },
    { name: 'a stall after the deadline already wrote the doubt: nothing more', init: streamed, events: [ev.dispatched, ev.deadline, ev.stall], last: [], doubt: 'deadline_exceeded' },
    { name: 'a stall after the answer: nothing', init: streamed, events: [ev.dispatched, ev.firstOutput, ev.answered, ev.stall], last: [], doubt: null },
  ];
  it.each(rows)('$name', ({ init, events, last, doubt }) => {
    const r = feed(init, events);
    expect(dos(r.last)).toEqual(last);
    expect(r.state.doubt).toBe(doubt);
  });
  it('the reasons written', () => {
    expect(feed(plain, [ev.deadline]).last[0]).toEqual({ do: 'write_unknown', reason: 'deadline_exceeded' });
    expect(feed(streamed, [ev.firstOutput, ev.stall]).last[0]).toEqual({ do: 'write_unknown', reason: 'stream_stalled' });
    expect(feed(streamed, [ev.deadline]).last[1]).toEqual({ do: 'abort', why: 'stream_deadline' });
  });
  it('a late answer after the deadline still wins or is superseded through the compare-and-swap (a success is settled)', () => {
    const { state } = feed(plain, [ev.dispatched, ev.deadline, ev.answered]);
    expect(planRecord(state, success)).toMatchObject({ record: 'settle', state: 'succeeded' });
  });
  it('an ambiguous end after the deadline reuses the doubt already written, and the stream says why', () => {
    const { state } = feed(streamed, [ev.dispatched, ev.deadline, ev.answered]);
    expect(planRecord(state, ambiguous)).toEqual({ record: 'unknown', reuseDoubt: true, streamError: 'doubt', finished: 'outcome' });
  });
  it('an ambiguous end without a doubt of ours writes unknown with the provider\'s error', () => {
    const { state } = feed(plain, [ev.dispatched, ev.answered]);
    expect(planRecord(state, ambiguous)).toEqual({ record: 'unknown', reuseDoubt: false, streamError: 'provider', finished: 'outcome' });
  });
});

describe('first output: the stream claim', () => {
  it('without hedging the first token is published at once, and the claim is asked beside it', () => {
    const r = feed(streamed, [ev.dispatched, ev.markDue, ev.firstOutput]);
    expect(dos(r.last)).toEqual(['clear_hedge', 'clear_deadline', 'schedule_idle', 'publish_stream', 'claim_stream']);
    expect(r.last.at(-1)).toEqual({ do: 'claim_stream', thenMark: false });
    expect(r.state).toMatchObject({ firstOutput: true, step: AttemptStep.firstOutput });
  });
  it('a hedged route publishes nothing before the claim decides between its attempts', () => {
    const r = feed(streamedHedged, [ev.dispatched, ev.firstOutput]);
    expect(dos(r.last)).toEqual(['clear_hedge', 'clear_deadline', 'schedule_idle', 'claim_stream']);
  });
  it('a running mark not yet written goes after the claim, without a deadline', () => {
    const r = feed(streamed, [ev.dispatched, ev.firstOutput]);
    expect(r.last).toEqual([
      { do: 'clear_hedge' }, { do: 'clear_deadline' }, { do: 'schedule_idle' }, { do: 'publish_stream' }, { do: 'cancel_mark' }, { do: 'claim_stream', thenMark: true }, { do: 'write_running', withDeadline: false },
    ]);
  });
  it('a first output after the deadline fired keeps the doubt (no idle bound)', () => {
    expect(dos(feed(streamed, [ev.dispatched, ev.markDue, ev.deadline, ev.firstOutput]).last)).toEqual(['clear_hedge', 'publish_stream', 'claim_stream']);
  });
  it('only the first output counts', () => {
    expect(feed(streamed, [ev.dispatched, ev.firstOutput, ev.firstOutput]).last).toEqual([]);
  });
  it('no first output for a stopped attempt or a lost lease', () => {
    expect(feed(streamed, [ev.cancelled, ev.firstOutput]).last).toEqual([]);
    expect(feed(streamed, [ev.afterWrite('lost'), ev.firstOutput]).last).toEqual([]);
  });
  it('the claim won: the stream is stored (hedged: opened), and the job\'s other attempts here stop', () => {
    expect(feed(streamed, [ev.firstOutput, ev.claimed]).last).toEqual([{ do: 'open_stream' }]);
    expect(feed(streamedHedged, [ev.firstOutput, ev.claimed]).last).toEqual([{ do: 'open_stream' }]);
  });
  it('the claim lost: superseded and stopped; it can never win; what was published ends unstored', () => {
    const r = feed(streamed, [ev.firstOutput, ev.claimLost]);
    expect(r.last).toEqual([{ do: 'drop_stream' }, { do: 'abort', why: 'stream_owned_elsewhere' }]);
    expect(r.state.stopped).toBe('superseded');
    expect(planRecord(feed(streamed, [ev.firstOutput, ev.claimLost, ev.answered]).state, failure('aborted'))).toMatchObject({ record: 'settle', state: 'superseded', usage: 'partial', stopUpstream: true });
    expect(feed(streamedHedged, [ev.firstOutput, ev.claimLost]).last).toEqual([{ do: 'abort', why: 'stream_owned_elsewhere' }]);
  });
  it('the claim lost after a cancel: stays cancelled, what was published ends', () => {
    const r = feed(streamed, [ev.firstOutput, ev.cancelled, ev.claimLost]);
    expect(r.last).toEqual([{ do: 'drop_stream' }]);
    expect(r.state.stopped).toBe('cancelled');
    expect(feed(streamedHedged, [ev.firstOutput, ev.cancelled, ev.claimLost]).last).toEqual([]);
  });
});

describe('record: what the answer becomes (planRecord)', () => {
  const held = startAttempt(plain);
  const lost = feed(plain, [ev.afterWrite('lost')]).state;
  const expired = feed(plain, [ev.afterRenewal('expired')]).state;
  const cancelled = feed(plain, [ev.cancelled]).state;
  const superseded = feed(plain, [ev.decided]).state;
  const stopping = (a: AnswerFacts): AnswerFacts => ({ ...a, executorRunning: false });
  const rows: readonly { name: string; state: AttemptState; answer: AnswerFacts; plan: Partial<RecordPlan> & { record: RecordPlan['record'] } }[] = [
    { name: 'a success: succeeded with its usage', state: held, answer: success, plan: { record: 'settle', state: 'succeeded', result: 'completion', usage: 'metered', stopUpstream: false } },
    { name: 'a success breaking the route contract: failed contract_violation, with its usage', state: held, answer: { ...success, contractOk: false }, plan: { record: 'settle', state: 'failed', error: 'contract_violation', usage: 'metered', retryHere: false } },
    { name: 'a tool\'s result: succeeded as given, no usage', state: held, answer: { ...success, givenResult: true, contractOk: null }, plan: { record: 'settle', state: 'succeeded', result: 'given', usage: 'none' } },
    { name: 'a definite failure: failed, partial usage, the retry policy asked', state: held, answer: failure('provider_rate_limited'), plan: { record: 'settle', state: 'failed', error: 'provider', usage: 'partial', retryHere: true } },
    { name: 'ambiguous: unknown', state: held, answer: ambiguous, plan: { record: 'unknown', reuseDoubt: false } },
    { name: 'the lease expired (database away longer than the lease): the answer still settles by its token', state: expired, answer: success, plan: { record: 'settle', state: 'succeeded' } },
    { name: 'the lease expired, ambiguous: unknown as usual', state: expired, answer: ambiguous, plan: { record: 'unknown' } },
    { name: 'another lease holds it, a success: only its usage (metered) is kept', state: lost, answer: success, plan: { record: 'usage_only', usage: 'metered', finished: 'abandoned' } },
    { name: 'another lease holds it, a cut stream: only its partial usage', state: lost, answer: ambiguous, plan: { record: 'usage_only', usage: 'partial', finished: 'abandoned' } },
    { name: 'another lease holds it, a failure: partial usage', state: lost, answer: failure('provider_error'), plan: { record: 'usage_only', usage: 'partial' } },
    { name: 'cancelled (the cancel raced the claim), the request aborted: cancelled, stopped upstream', state: cancelled, answer: failure('aborted'), plan: { record: 'settle', state: 'cancelled', error: 'cancelled', usage: 'none', stopUpstream: true } },
    { name: 'cancelled, ambiguous: cancelled (the job is decided)', state: cancelled, answer: ambiguous, plan: { record: 'settle', state: 'cancelled', stopUpstream: true } },
    { name: 'cancelled, but the answer arrived: settled succeeded, the compare-and-swap supersedes it with its usage', state: cancelled, answer: success, plan: { record: 'settle', state: 'succeeded', usage: 'metered', stopUpstream: false } },
    { name: 'another attempt won, the request stopped: superseded with the partial usage', state: superseded, answer: ambiguous, plan: { record: 'settle', state: 'superseded', error: 'superseded', usage: 'partial', stopUpstream: true } },
    { name: 'another attempt won, this answer arrived anyway: settled, superseded by the compare-and-swap', state: superseded, answer: success, plan: { record: 'settle', state: 'succeeded', usage: 'metered' } },
    { name: 'shutdown before anything was sent: handed back, still starting', state: held, answer: stopping(failure('aborted_before_send')), plan: { record: 'hand_back', finished: 'abandoned' } },
    { name: 'shutdown after sending (aborted): unknown, never failed over', state: held, answer: stopping(ambiguous), plan: { record: 'unknown' } },
    { name: 'cancelled and shutting down, before sending: cancelled, not handed back', state: cancelled, answer: stopping(failure('aborted_before_send')), plan: { record: 'settle', state: 'cancelled' } },
    { name: 'a refused send while running (not a shutdown): failed', state: held, answer: failure('aborted_before_send'), plan: { record: 'settle', state: 'failed' } },
    { name: 'a lost lease wins over a shutdown: usage only', state: lost, answer: stopping(failure('aborted_before_send')), plan: { record: 'usage_only' } },
  ];
  it.each(rows)('$name', ({ state, answer, plan }) => {
    expect(planRecord(state, answer)).toMatchObject(plan);
  });
});

describe('report: how a stream ends (streamEndFor)', () => {
  const settle = planRecord(startAttempt(streamed), success);
  const rows: readonly { name: string; plan: RecordPlan; won: { won: boolean } | null; end: ReturnType<typeof streamEndFor> }[] = [
    { name: 'won: the stored result', plan: settle, won: { won: true }, end: 'result' },
    { name: 'lost the race: superseded', plan: settle, won: { won: false }, end: 'superseded' },
    { name: 'the settle gave up (job deleted, refused): not a result', plan: settle, won: null, end: 'superseded' },
    { name: 'failed: the error', plan: planRecord(startAttempt(streamed), failure('provider_error')), won: { won: false }, end: 'error' },
    { name: 'cancelled: the error', plan: planRecord(feed(streamed, [ev.cancelled]).state, failure('aborted')), won: { won: false }, end: 'error' },
    { name: 'unknown after our own doubt: the doubt', plan: planRecord(feed(streamed, [ev.deadline]).state, ambiguous), won: null, end: 'doubt' },
    { name: 'unknown: the provider\'s error', plan: planRecord(startAttempt(streamed), ambiguous), won: null, end: 'error' },
    { name: 'lease lost: interrupted (no outcome of ours)', plan: planRecord(feed(streamed, [ev.afterWrite('lost')]).state, success), won: null, end: 'interrupted' },
  ];
  it.each(rows)('$name', ({ plan, won, end }) => {
    expect(streamEndFor(plan, won)).toBe(end);
  });
});

describe('a settle refused, by which guard (planRefusal; §2 "a settle retried after its commit", "usage on every end")', () => {
  const rows: readonly { code: RefusalCode; tries: number; then: string }[] = [
    { code: 'attempt_not_found', tries: 1, then: 'report_unrecorded' },
    { code: 'job_not_found', tries: 3, then: 'report_unrecorded' },
    { code: 'lease_lost', tries: 1, then: 'keep_usage_lose_lease' },
    { code: 'lease_lost', tries: 4, then: 'keep_usage_lose_lease' },
    { code: 'attempt_finished', tries: 1, then: 'keep_usage' },
    { code: 'attempt_finished', tries: 2, then: 'read_back' },
  ];
  it.each(rows)('$code on try $tries: $then', ({ code, tries, then }) => {
    expect(planRefusal(code, tries).then).toBe(then);
  });

  const own = [
    { name: 'our success won on the earlier try', wrote: { state: 'succeeded', totalTokens: 12 }, found: { state: 'succeeded', won: true, totalTokens: 12, errorCode: null }, ours: true },
    { name: 'a success that is not the winner: not ours', wrote: { state: 'succeeded', totalTokens: 12 }, found: { state: 'succeeded', won: false, totalTokens: 12, errorCode: null }, ours: false },
    { name: 'our success lost the race on that try: superseded with our usage', wrote: { state: 'succeeded', totalTokens: 12 }, found: { state: 'superseded', won: false, totalTokens: 12, errorCode: 'superseded' }, ours: true },
    { name: 'superseded with other usage: not ours', wrote: { state: 'succeeded', totalTokens: 12 }, found: { state: 'superseded', won: false, totalTokens: 7, errorCode: 'superseded' }, ours: false },
    { name: 'superseded by a resolve (other code): not ours', wrote: { state: 'succeeded', totalTokens: null }, found: { state: 'superseded', won: false, totalTokens: null, errorCode: 'resolved' }, ours: false },
    { name: 'a success without usage, superseded: ours', wrote: { state: 'succeeded', totalTokens: null }, found: { state: 'superseded', won: false, totalTokens: null, errorCode: 'superseded' }, ours: true },
    { name: 'a success, but a person resolved it failed: not ours', wrote: { state: 'succeeded', totalTokens: 12 }, found: { state: 'failed', won: false, totalTokens: 12, errorCode: 'resolved' }, ours: false },
    { name: 'our failure is there: ours', wrote: { state: 'failed', totalTokens: null }, found: { state: 'failed', won: false, totalTokens: null, errorCode: 'provider_error' }, ours: true },
    { name: 'our failure, but it ended cancelled: not ours', wrote: { state: 'failed', totalTokens: null }, found: { state: 'cancelled', won: false, totalTokens: null, errorCode: 'cancelled' }, ours: false },
  ] as const;
  it.each(own)('read back: $name', ({ wrote, found, ours }) => {
    expect(isOwnEarlierSettle(wrote, found)).toBe(ours);
  });
});

describe('a write that failed (planWriteFailure; §2 "the database away longer than a lease")', () => {
  const base: WriteFailureFacts = { write: 'settle', transient: true, holding: false, held: 0, maxHeld: 10_000, heldForMs: 0, holdMs: 600_000, leaseLeftMs: 20_000, leaseLost: false };
  const rows: readonly { name: string; facts: Partial<WriteFailureFacts>; plan: ReturnType<typeof planWriteFailure> }[] = [
    { name: 'a permanent error is thrown at once', facts: { transient: false }, plan: { then: 'throw' } },
    { name: 'a doubt, permanent: thrown', facts: { write: 'unknown', transient: false }, plan: { then: 'throw' } },
    { name: 'an answer, the first transient failure: held, tried again for the whole hold', facts: {}, plan: { then: 'retry', leftMs: 600_000, hold: true } },
    { name: 'an answer held 5 minutes: tried again for the rest', facts: { holding: true, heldForMs: 300_000 }, plan: { then: 'retry', leftMs: 300_000, hold: false } },
    { name: 'an answer held past the lease: still tried (its token fences it)', facts: { holding: true, heldForMs: 60_000, leaseLeftMs: -30_000 }, plan: { then: 'retry', leftMs: 540_000, hold: false } },
    { name: 'an answer held past the horizon: given up (the attempt stays in doubt for a lookup or a person)', facts: { holding: true, heldForMs: 600_000 }, plan: { then: 'give_up', why: 'hold_over' } },
    { name: 'too many answers held: this one is given up', facts: { held: 10_000 }, plan: { then: 'give_up', why: 'too_many_held' } },
    { name: 'an answer already held is not refused by the bound', facts: { holding: true, held: 10_000, heldForMs: 1_000 }, plan: { then: 'retry', leftMs: 599_000, hold: false } },
    { name: 'an answer with its lease lost: still held (the store says lease_lost when it returns)', facts: { leaseLost: true }, plan: { then: 'retry', leftMs: 600_000, hold: true } },
    { name: 'a doubt while the lease may hold: tried again until then', facts: { write: 'unknown' }, plan: { then: 'retry', leftMs: 20_000, hold: false } },
    { name: 'a doubt once the lease is surely gone: given up, the rescuer takes over', facts: { write: 'unknown', leaseLeftMs: 0 }, plan: { then: 'give_up', why: 'lease_gone' } },
    { name: 'a doubt with the lease lost: given up', facts: { write: 'unknown', leaseLost: true }, plan: { then: 'give_up', why: 'lease_lost' } },
  ];
  it.each(rows)('$name', ({ facts, plan }) => {
    expect(planWriteFailure({ ...base, ...facts })).toEqual(plan);
  });
});

describe('lease: the fast path after the create (planLeaseAfterCreate; §2 "a create whose commit answer was lost")', () => {
  const rows: readonly { end: CreateEnd; then: string }[] = [
    { end: 'created_leased', then: 'adopt' },
    { end: 'created_queued', then: 'unused' },
    { end: 'replayed', then: 'unused' },
    { end: 'refused', then: 'unused' },
    { end: 'unanswered', then: 'release' },
  ];
  it.each(rows)('$end: $then', ({ end, then }) => {
    expect(planLeaseAfterCreate(end)).toBe(then);
  });
});

describe('lease: the hand-back of a never-sent first attempt (planHandBack; §2 "a create whose commit answer was lost", the database away longer than a lease)', () => {
  const base: HandBackFacts = { tried: 'transient', absent: 0, triedForMs: 0, holdMs: 600_000 };
  const rows: readonly { name: string; facts: Partial<HandBackFacts>; then: string }[] = [
    { name: 'handed back (from starting, or from the rescuer\'s unknown): done', facts: { tried: 'handed_back' }, then: 'done' },
    { name: 'handed back after ten minutes of tries: still done', facts: { tried: 'handed_back', triedForMs: 600_000 }, then: 'done' },
    { name: 'something else happened (another claim, a resolve, a cancel): given up, never reverted', facts: { tried: 'refused' }, then: 'give_up' },
    { name: 'the database fails within the lease: tried again', facts: { triedForMs: 500 }, then: 'retry' },
    { name: 'the database fails past the lease, within answerHoldMs: tried again (the token fences it)', facts: { triedForMs: 120_000 }, then: 'retry' },
    { name: 'the database fails past answerHoldMs: given up', facts: { triedForMs: 600_000 }, then: 'give_up' },
    { name: 'a permanent failure: thrown (reported)', facts: { tried: 'permanent' }, then: 'throw' },
    { name: 'no attempt yet, first looks: looked again', facts: { tried: 'absent', absent: HAND_BACK_ABSENT_LOOKS - 1 }, then: 'retry' },
    { name: 'no attempt after a few looks: the create did not commit, given up', facts: { tried: 'absent', absent: HAND_BACK_ABSENT_LOOKS }, then: 'give_up' },
  ];
  it.each(rows)('$name', ({ facts, then }) => {
    expect(planHandBack({ ...base, ...facts })).toEqual({ then });
  });
});

describe('whole lives, event by event', () => {
  it('the fast answer: dispatched, answered before the mark, succeeded in one commit', () => {
    const r = feed(plain, [ev.dispatched, ev.answered, ev.markDue]);
    expect(dos(r.actions)).toEqual(['arm_deadline', 'schedule_mark']);
    expect(planRecord(r.state, success)).toMatchObject({ record: 'settle', state: 'succeeded' });
  });
  it('a slow connect (deadline 300 ms, dispatch at 400 ms, answer at 700 ms): no doubt, the answer recorded', () => {
    // Before the fix the deadline ran from the claim: at 300 ms it fired, the running mark then failed, and the answer was dropped.
    const r = feed(plain, [ev.dispatched, ev.markDue, ev.marked, ev.answered]);
    expect(r.state.doubt).toBeNull();
    expect(dos(r.actions)).not.toContain('write_unknown');
    expect(planRecord(r.state, success)).toMatchObject({ record: 'settle', state: 'succeeded', usage: 'metered' });
  });
  it('a database outage longer than the lease: the renewal finds it expired, the answer is held and settled by its token', () => {
    const r = feed(plain, [ev.dispatched, ev.markDue, ev.marked, ev.afterRenewal('expired'), ev.answered]);
    expect(r.state.lease).toBe('expired');
    expect(dos(r.actions)).not.toContain('abort');
    expect(planRecord(r.state, success)).toMatchObject({ record: 'settle', state: 'succeeded' });
    expect(planWriteFailure({ write: 'settle', transient: true, holding: false, held: 3, maxHeld: 10_000, heldForMs: 0, holdMs: 600_000, leaseLeftMs: -1, leaseLost: false })).toMatchObject({ then: 'retry', hold: true });
  });
  it('a cancel committed while the claim was in flight: the running mark finds the attempt cancelled, it is stopped and recorded cancelled', () => {
    const r = feed(plain, [ev.dispatched, ev.markDue, ev.notMarked, ev.afterWrite('finished_cancelled'), ev.answered]);
    expect(dos(r.actions)).toEqual(['arm_deadline', 'schedule_mark', 'write_running', 'ask_lease_status', 'abort']);
    expect(planRecord(r.state, failure('aborted'))).toMatchObject({ record: 'settle', state: 'cancelled', stopUpstream: true });
  });
  it('a streamed attempt that stalls after its output and then ends ambiguous: unknown once, the stream says stalled', () => {
    const r = feed(streamed, [ev.dispatched, ev.firstOutput, ev.claimed, ev.stall, ev.answered]);
    expect(dos(r.actions).filter((a) => a === 'write_unknown')).toHaveLength(1);
    const plan = planRecord(r.state, ambiguous);
    expect(plan).toEqual({ record: 'unknown', reuseDoubt: true, streamError: 'doubt', finished: 'outcome' });
    expect(streamEndFor(plan, null)).toBe('doubt');
  });
});
