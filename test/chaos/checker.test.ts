/**
 * The chaos checker on a tiny synthetic run: the clean run passes, and a
 * planted violation of each kind is reported (so the checker cannot pass
 * silently).
 */
import { describe, expect, it } from 'vitest';
import { checkRun, formatReport, VIOLATION_KINDS, type ViolationKind } from '../../chaos/checker.ts';
import type { CheckInput, DbAttempt, DbEvent, DbJob, HistoryEntry, ProviderCall } from '../../chaos/records.ts';
import { SseReader } from '../../chaos/workload.ts';
import { checkToolCalls, TOOL_VIOLATION_KINDS, type ToolViolationKind } from '../../chaos/tool-checker.ts';
import { TOOL_ROUTE, type ToolCallEntry, type ToolExecution } from '../../chaos/tool-records.ts';
import { responsesSseEvent, type ResponsesSseEvent } from '../../src/protocols/openai-responses-stream.ts';

type Mutable<T> = { -readonly [K in keyof T]: T[K] extends readonly (infer U)[] ? U[] : T[K] };

const J1 = 'job_0001';
const A1 = 'att_0001';
const A2 = 'att_0002';
const BODY = { route: 'plain', input: { messages: [{ role: 'user', content: 'hello' }] } };
const RESULT = { content: 'answer p2-1', finish_reason: 'stop', model: 'model-p2', provider: 'p2', usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };

function entry(id: number, e: Partial<HistoryEntry> & Pick<HistoryEntry, 'op' | 'method' | 'path'>): HistoryEntry {
  return { id, client: 'c0', owner: 'alice', sentAt: id * 100, recvAt: id * 100 + 50, status: 200, outcome: 'answered', ...e };
}

function event(id: number, type: string, attempt: string | null, at: string, data: Record<string, unknown> = {}, job = J1): DbEvent {
  return { id, owner_id: 'alice', job_id: job, attempt_id: attempt, type, data, at };
}

// A streamed chat job (CONTRACT §7): attempt 1 claimed the stream and ended with an error event (failed),
// the failover's attempt 2 claimed it again and won; the client that saw the break retried and got attempt 2's text.
const J2 = 'job_0002';
const B1 = 'att_0021';
const B2 = 'att_0022';
const CHAT = { model: 'plain', messages: [{ role: 'user', content: 'stream me' }], stream: true };
const P1_REPLY = { summary: 'answer p1-7 in a few more words' };
const P2_REPLY = { summary: 'answer p2-8 in a few more words' };
const CHAT_RESULT = { content: JSON.stringify(P2_REPLY), finish_reason: 'stop', model: 'model-p2', provider: 'p2', usage: null };
// A contract-route job over /v1/messages: attempt 1 replied plain text (contract_violation), attempt 2 conformed.
const J3 = 'job_0003';
const C1 = 'att_0031';
const C2 = 'att_0032';
const MSG = { model: 'contract', max_tokens: 256, messages: [{ role: 'user', content: 'summarize' }] };
const C2_REPLY = { summary: 'answer p2-9 in a few more words' };

function stream(text: string, end: 'done' | 'error' | 'eof' | 'garbled', errorCode: string | null = null): Record<string, unknown> {
  return { text, end, error_code: errorCode, events: 3, keepalives: 0 };
}

/** The streamed job's events: claim, break (failed), failover, claim again, win. */
function streamEvents(): DbEvent[] {
  return [
    event(11, 'attempt.started', B1, 's1', { number: 1, provider: 'p1', kind: 'first' }, J2),
    event(12, 'attempt.running', B1, 's2', {}, J2),
    event(13, 'attempt.stream_claimed', B1, 's3', {}, J2),
    event(14, 'attempt.started', B2, 's4', { number: 2, provider: 'p2', kind: 'failover' }, J2),
    event(15, 'attempt.failed', B1, 's4', { actor: 'executor:e1', error: { code: 'provider_stream_error' } }, J2),
    event(16, 'attempt.running', B2, 's5', {}, J2),
    event(17, 'attempt.stream_claimed', B2, 's6', {}, J2),
    event(18, 'attempt.succeeded', B2, 's7', { actor: 'executor:e2' }, J2),
    event(19, 'job.succeeded', B2, 's7', { actor: 'executor:e2' }, J2),
  ];
}

/**
 * A clean run: attempt 1 refused (503), failover attempt 2 won; a replay, a conflict, two reads; a streamed
 * chat job that failed over mid-stream; a contract job over /v1/messages.
 */
function cleanRun(): Mutable<CheckInput> & { db: { takenAt: string; jobs: DbJob[]; attempts: DbAttempt[]; events: DbEvent[] } } {
  const job: DbJob = { owner_id: 'alice', id: J1, idempotency_key: 'k1', route: 'plain', input: BODY.input, metadata: null, state: 'succeeded', version: 1, completed_by: A2, result: RESULT, error: null, created_at: '2026-03-01T11:59:00.000Z' };
  const jobBody = { id: J1, state: 'succeeded', completed_by: A2, result: RESULT };
  const calls: ProviderCall[] = [
    { provider: 'p1', seq: 1, idempotencyKey: `${J1}:1`, jobId: J1, body: {}, behaviour: { status: 503 }, result: 'error', status: 503 },
    { provider: 'p2', seq: 1, idempotencyKey: `${J1}:2`, jobId: J1, body: {}, behaviour: { reply: 'answer p2-1' }, result: 'replied', status: 200 },
    { provider: 'p1', seq: 2, idempotencyKey: `${J2}:1`, jobId: J2, body: {}, behaviour: { reply: P1_REPLY, streamError: { afterChunks: 2 } }, result: 'stream-error', status: 200 },
    { provider: 'p2', seq: 2, idempotencyKey: `${J2}:2`, jobId: J2, body: {}, behaviour: { reply: P2_REPLY }, result: 'replied', status: 200 },
    { provider: 'p1', seq: 3, idempotencyKey: `${J3}:1`, jobId: J3, body: {}, behaviour: { reply: 'plain p1-3 text' }, result: 'replied', status: 200 },
    { provider: 'p2', seq: 3, idempotencyKey: `${J3}:2`, jobId: J3, body: {}, behaviour: { reply: C2_REPLY }, result: 'replied', status: 200 },
  ];
  const chatJob: DbJob = { owner_id: 'alice', id: J2, idempotency_key: 'k2', route: 'plain', input: { messages: CHAT.messages, stream: true }, metadata: null, state: 'succeeded', version: 1, completed_by: B2, result: CHAT_RESULT, error: null, created_at: '2026-03-01T11:59:00.000Z', stream_attempt_id: B2 };
  const contractJob: DbJob = { owner_id: 'alice', id: J3, idempotency_key: 'k3', route: 'contract', input: { messages: MSG.messages }, metadata: null, state: 'succeeded', version: 1, completed_by: C2, result: { content: C2_REPLY, finish_reason: 'stop', model: 'model-p2', provider: 'p2', usage: null }, error: null, created_at: '2026-03-01T11:59:00.000Z', stream_attempt_id: null };
  return {
    history: [
      entry(1, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: BODY, status: 201, response: { id: J1, state: 'queued', completed_by: null, result: null } }),
      entry(2, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: { input: BODY.input, route: 'plain' }, status: 200, replayed: true, response: { id: J1, state: 'running', completed_by: null, result: null } }),
      entry(3, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: { ...BODY, route: 'hedged' }, status: 409, response: { code: 'idempotency_key_reused', job_id: J1 } }),
      entry(4, { op: 'get', method: 'GET', path: `/v1/jobs/${J1}`, jobId: J1, response: jobBody }),
      entry(5, { op: 'get', method: 'GET', path: `/v1/jobs/${J1}`, jobId: J1, response: jobBody }),
      entry(6, { op: 'peek', method: 'GET', path: `/v1/jobs/job_bob`, owner: 'alice', jobId: 'job_bob', status: 404, response: { code: 'job_not_found' } }),
      // The stream broke after two words of attempt 1 (not an answer), the retry with the key got attempt 2's text.
      entry(7, { op: 'chat', method: 'POST', path: '/v1/chat/completions', key: 'k2', body: CHAT, response: { job_id: J2, stream: stream('{"summary":"answer ', 'error', 'provider_stream_error') } }),
      entry(8, { op: 'chat', method: 'POST', path: '/v1/chat/completions', key: 'k2', body: CHAT, replayed: true, response: { job_id: J2, stream: stream(JSON.stringify(P2_REPLY), 'done') } }),
      entry(9, { op: 'chat', method: 'POST', path: '/v1/chat/completions', key: 'k2', body: { ...CHAT, model: 'hedged' }, status: 409, response: { code: 'idempotency_key_reused' } }),
      entry(10, { op: 'messages', method: 'POST', path: '/v1/messages', key: 'k3', body: MSG, response: { job_id: J3, text: JSON.stringify(C2_REPLY) } }),
    ],
    faults: [{ at: 10, kind: 'kill9', target: 'api-1' }],
    db: {
      takenAt: TAKEN,
      jobs: [job, chatJob, contractJob],
      attempts: [
        { owner_id: 'alice', id: A1, job_id: J1, number: 1, provider: 'p1', kind: 'first', state: 'failed', error: { code: 'provider_overloaded' } },
        { owner_id: 'alice', id: A2, job_id: J1, number: 2, provider: 'p2', kind: 'failover', state: 'succeeded', error: null },
        { owner_id: 'alice', id: B1, job_id: J2, number: 1, provider: 'p1', kind: 'first', state: 'failed', error: { code: 'provider_stream_error' } },
        { owner_id: 'alice', id: B2, job_id: J2, number: 2, provider: 'p2', kind: 'failover', state: 'succeeded', error: null },
        { owner_id: 'alice', id: C1, job_id: J3, number: 1, provider: 'p1', kind: 'first', state: 'failed', error: { code: 'contract_violation' } },
        { owner_id: 'alice', id: C2, job_id: J3, number: 2, provider: 'p2', kind: 'failover', state: 'succeeded', error: null },
      ],
      events: [
        event(1, 'attempt.started', A1, 't1', { number: 1, provider: 'p1', kind: 'first' }),
        event(2, 'attempt.running', A1, 't2'),
        // The store writes a failover's start before the failure that caused it, in one transaction.
        event(3, 'attempt.started', A2, 't3', { number: 2, provider: 'p2', kind: 'failover' }),
        event(4, 'attempt.failed', A1, 't3', { actor: 'executor:e1', error: { code: 'provider_overloaded' } }),
        event(5, 'attempt.claimed', A2, 't4'),
        event(6, 'attempt.running', A2, 't5'),
        event(7, 'attempt.succeeded', A2, 't6', { actor: 'executor:e2' }),
        event(8, 'job.succeeded', A2, 't6', { actor: 'executor:e2' }),
        ...streamEvents(),
        event(21, 'attempt.started', C1, 'c1', { number: 1, provider: 'p1', kind: 'first' }, J3),
        event(22, 'attempt.running', C1, 'c2', {}, J3),
        event(23, 'attempt.started', C2, 'c3', { number: 2, provider: 'p2', kind: 'failover' }, J3),
        event(24, 'attempt.failed', C1, 'c3', { actor: 'executor:e1', error: { code: 'contract_violation' } }, J3),
        event(25, 'attempt.running', C2, 'c4', {}, J3),
        event(26, 'attempt.succeeded', C2, 'c5', { actor: 'executor:e2' }, J3),
      ],
    },
    callsBefore: calls,
    callsAfter: calls,
    hedgedRoutes: ['hedged'],
    contractRoutes: ['contract'],
    // The faults stopped at 12:00:00; the snapshot was read 30 s later; a job may take 20 s to reach an end.
    liveness: { quietSince: QUIET, boundMs: 20_000, rescueSlackMs: 7_000 },
  };
}

const QUIET = '2026-03-01T12:00:00.000Z';
const TAKEN = '2026-03-01T12:00:30.000Z';

/** A second job of the run, with one attempt (for the liveness plants). */
function extraJob(run: ReturnType<typeof cleanRun>, id: string, state: string, attempt: Partial<DbAttempt>, createdAt = '2026-03-01T11:59:50.000Z'): void {
  run.db.jobs.push({ owner_id: 'alice', id, idempotency_key: `key-${id}`, route: 'plain', input: BODY.input, metadata: null, state, version: 0, completed_by: null, result: null, error: null, created_at: createdAt });
  run.db.attempts.push({ owner_id: 'alice', id: `att_${id}`, job_id: id, number: 1, provider: 'p1', kind: 'first', state: 'running', error: null, started_at: createdAt, lease_owner: 'exe_1', lease_expires_at: '2026-03-01T12:00:31.000Z', ...attempt });
}

const plants: Record<ViolationKind, (run: ReturnType<typeof cleanRun>) => void> = {
  duplicate_job: (run) => {
    run.db.jobs.push({ ...run.db.jobs[0]!, id: 'job_0002', state: 'queued', completed_by: null, result: null });
  },
  created_twice: (run) => {
    run.history.push(entry(7, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: BODY, status: 201, response: { id: J1, state: 'succeeded', completed_by: A2, result: RESULT } }));
  },
  job_missing: (run) => {
    run.history.push(entry(7, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k2', body: BODY, status: 201, response: { id: 'job_ghost', state: 'queued', completed_by: null, result: null } }));
  },
  bad_conflict: (run) => {
    run.history.push(entry(7, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: { input: BODY.input, route: 'plain' }, status: 409, response: { code: 'idempotency_key_reused', job_id: J1 } }));
  },
  missed_conflict: (run) => {
    run.history.push(entry(7, { op: 'create', method: 'POST', path: '/v1/jobs', key: 'k1', body: { ...BODY, input: 'other' }, status: 200, replayed: true, response: { id: J1, state: 'succeeded', completed_by: A2, result: RESULT } }));
  },
  two_winners: (run) => {
    run.db.attempts[0] = { ...run.db.attempts[0]!, state: 'succeeded', error: null };
  },
  result_mismatch: (run) => {
    const forged = { ...RESULT, content: 'merged answer' };
    run.db.jobs[0] = { ...run.db.jobs[0]!, result: forged };
    run.history = run.history.map((e) => (e.op === 'get' ? { ...e, response: { id: J1, state: 'succeeded', completed_by: A2, result: forged } } : e));
  },
  result_changed: (run) => {
    run.history.push(entry(7, { op: 'get', method: 'GET', path: `/v1/jobs/${J1}`, jobId: J1, response: { id: J1, state: 'succeeded', completed_by: A1, result: { other: true } } }));
  },
  attempt_overlap: (run) => {
    // Attempt 1 became unknown, and a manual attempt started anyway.
    run.db.events.splice(2, 2,
      event(3, 'attempt.unknown', A1, 't3', { reason: { code: 'aborted_after_send' } }),
      event(4, 'attempt.started', A2, 't3b', { number: 2, provider: 'p2', kind: 'manual' }));
  },
  extra_execution: (run) => {
    const again: ProviderCall = { provider: 'p2', seq: 2, idempotencyKey: `${J1}:2`, jobId: J1, body: {}, behaviour: { reply: 'answer p2-2' }, result: 'replied', status: 200 };
    run.callsBefore = [...run.callsBefore, again];
    run.callsAfter = [...run.callsAfter, again];
  },
  timeout_failed: (run) => {
    // The provider never answered attempt 1 (a hang), yet it is recorded failed.
    const hang: ProviderCall = { provider: 'p1', seq: 1, idempotencyKey: `${J1}:1`, jobId: J1, body: {}, behaviour: { hang: true }, result: 'client-closed', status: null };
    run.callsBefore = [hang, run.callsBefore[1]!];
    run.callsAfter = [hang, run.callsAfter[1]!];
  },
  cross_owner: (run) => {
    run.history.push(entry(7, { op: 'peek', method: 'GET', path: '/v1/jobs/job_bob', jobId: 'job_bob', status: 200, response: { id: 'job_bob', state: 'queued', completed_by: null, result: null } }));
  },
  stuck_job: (run) => {
    // Created before the faults stopped and still running 30 s later, its lease renewed all along.
    extraJob(run, 'job_stuck', 'running', {});
  },
  ownerless_attempt: (run) => {
    // The old failure: "mark unknown" failed, the lease was released anyway; the attempt runs with no owner.
    extraJob(run, 'job_orphan', 'unknown', { lease_owner: null, lease_expires_at: null });
  },
  stream_owner: (run) => {
    // A hedge claimed the stream while attempt 1 still held it (running): two stream owners at once.
    hedgedStream(run, [
      event(11, 'attempt.started', B1, 's1', { number: 1, provider: 'p1', kind: 'first' }, J2),
      event(12, 'attempt.running', B1, 's2', {}, J2),
      event(13, 'attempt.stream_claimed', B1, 's3', {}, J2),
      event(14, 'attempt.started', B2, 's4', { number: 2, provider: 'p2', kind: 'hedge' }, J2),
      event(16, 'attempt.running', B2, 's5', {}, J2),
      event(17, 'attempt.stream_claimed', B2, 's6', {}, J2),
      event(18, 'attempt.succeeded', B2, 's7', { actor: 'executor:e2' }, J2),
      event(19, 'attempt.superseded', B1, 's8', { actor: 'executor:e1' }, J2),
    ]);
  },
  answer_mismatch: (run) => {
    // The stream that broke off had carried attempt 1's first words, then attempt 2's: two attempts' text.
    run.history[6] = { ...run.history[6]!, response: { job_id: J2, stream: stream('{"summary":"answer {"summary":"answer p2-8', 'error', 'attempt_in_doubt') } };
  },
  stream_end: (run) => {
    // The server ended the stream with neither [DONE] nor event: error.
    run.history[6] = { ...run.history[6]!, response: { job_id: J2, stream: stream('{"summary":"answer ', 'eof') } };
  },
  resume_mismatch: (run) => {
    // The resume on another process sent the event the client had already received again: its text twice.
    resumedChain(run, [['2-1', '2-2'], ['2-2', '2-3', '2-4', '2-5']], ['{"summary":', '"answer "answer p2-8 in a few more words"}']);
  },
  contract_verdict: (run) => {
    // Attempt 1's provider replied a conforming {"summary"}, yet the attempt failed as a contract violation.
    run.callsAfter = run.callsAfter.map((c) => (c.idempotencyKey === `${J3}:1` ? { ...c, behaviour: { reply: { summary: 'fine' } } } : c));
  },
  doubt_unresolved: (run) => {
    // An attempt on a provider with a lookup went unknown before the faults stopped and is still unknown 30 s later (window 20 s).
    run.doubt = { lookups: { p2: 'attempt' }, windowMs: 20_000, submits: [] };
    extraJob(run, 'job_doubt', 'unknown', { provider: 'p2', state: 'unknown', unknown_at: '2026-03-01T11:59:55.000Z', lease_owner: null, lease_expires_at: null });
  },
  foreign_answer: (run) => {
    // A stored-completions lookup took another attempt's completion from an unfiltered list: the job's result is att_other's work.
    const content = 'doubt answer d-2 in a few words';
    run.doubt = {
      lookups: { ds: 'attempt' }, windowMs: 20_000,
      submits: [{ attempt_id: 'att_job_looked', submits: 1, replies: ['doubt answer d-1 in a few words'], fake: 'doubt' }, { attempt_id: 'att_other', submits: 1, replies: [content], fake: 'doubt' }],
    };
    extraJob(run, 'job_looked', 'succeeded', { provider: 'ds', state: 'succeeded', lease_owner: null, lease_expires_at: null, resolved_by: 'lookup' });
    const job = run.db.jobs.at(-1)!;
    run.db.jobs[run.db.jobs.length - 1] = { ...job, completed_by: 'att_job_looked', version: 1, result: { content, finish_reason: 'stop', model: 'model-ds', provider: 'ds', usage: null } };
  },
  settled_while_live: (run) => {
    // A lookup ended attempt 2 while it was running (its last state event before the end): not an attempt in doubt.
    run.db.events = run.db.events.map((e) => (e.id === 7 ? { ...e, data: { actor: 'lookup:rec_1', resolved_by: 'lookup' } } : e));
  },
  double_submit: (run) => {
    // The winning attempt's work reached its provider twice.
    run.doubt = { lookups: {}, windowMs: 20_000, submits: [{ attempt_id: A2, submits: 1, replies: ['answer p2-1'], fake: 'p2' }, { attempt_id: A2, submits: 1, replies: [], fake: 'doubt' }] };
  },
};

/**
 * Appends a resuming client's chain on the streamed job J2 (won by attempt 2): a first connection dropped by the
 * client, then resumes with Last-Event-ID (or `starting_after`), each on a process of its own; `ids[i]` and `texts[i]`
 * are what connection i received. The last connection ends with `[DONE]` unless `lastEnd` says otherwise.
 */
function resumedChain(run: ReturnType<typeof cleanRun>, ids: string[][], texts: string[], o: { lastEnd?: 'done' | 'eof'; startingAfter?: boolean } = {}): void {
  let prev = 0;
  let lastId = '';
  for (const [i, connIds] of ids.entries()) {
    const id = 100 + i;
    const last = i === ids.length - 1;
    const end = last ? (o.lastEnd ?? 'done') : 'eof';
    const ordinal = Number(lastId.split('-')[1]);
    const resume = i === 0 ? {} : { resume: { of: prev, last_event_id: o.startingAfter ? null : lastId, starting_after: o.startingAfter ? ordinal - 1 : null, via: `api-${1 + (i % 2)}` } };
    const viaGet = i > 0 && o.startingAfter === true;
    run.history.push(entry(id, {
      op: viaGet ? 'response_get' : 'chat', method: viaGet ? 'GET' : 'POST', path: viaGet ? `/v1/responses/resp_${J2}?stream=true&starting_after=${ordinal - 1}` : '/v1/chat/completions',
      ...(viaGet ? { jobId: J2 } : { key: 'k2', body: CHAT, replayed: true }),
      outcome: last ? 'answered' : 'dropped',
      response: { job_id: J2, stream: { ...stream(texts[i]!, end), events: connIds.length, ids: connIds } },
      ...resume,
    }));
    prev = id;
    lastId = connIds.at(-1) ?? lastId;
  }
}

/** Turns the streamed job into a hedged one whose attempt 2 is a hedge, with the given events. */
function hedgedStream(run: ReturnType<typeof cleanRun>, events: DbEvent[]): void {
  run.db.jobs = run.db.jobs.map((j) => (j.id === J2 ? { ...j, route: 'hedged' } : j));
  run.db.attempts = run.db.attempts.map((a) => (a.id === B1 ? { ...a, state: 'superseded', error: { code: 'superseded' } } : a.id === B2 ? { ...a, kind: 'hedge' } : a));
  run.db.events = [...run.db.events.filter((e) => e.job_id !== J2), ...events];
  run.callsAfter = run.callsAfter.map((c) => (c.idempotencyKey === `${J2}:1` ? { ...c, result: 'client-closed', status: 200 } : c));
  run.callsBefore = run.callsAfter;
}

describe('chaos checker', () => {
  it('passes a clean run and ends with the summary line', () => {
    const report = checkRun(cleanRun());
    expect(report.violations).toEqual([]);
    const text = formatReport(report);
    expect(text.split('\n').at(-1)).toBe('operations: 10, faults: 1, violations: 0');
  });

  it('has a planted case for every kind', () => {
    expect(Object.keys(plants).sort()).toEqual([...VIOLATION_KINDS].sort());
  });

  for (const kind of VIOLATION_KINDS) {
    it(`reports a planted ${kind}`, () => {
      const run = cleanRun();
      plants[kind](run);
      const report = checkRun(run);
      expect(report.violations.map((v) => v.kind)).toContain(kind);
      const text = formatReport(report);
      expect(text).toContain(`[${kind}]`);
      expect(text.split('\n').at(-1)).toMatch(/^operations: \d+, faults: 1, violations: [1-9]\d*$/);
    });
  }

  it('liveness: a job still running within its bound, or a lease just expired, is not a violation', () => {
    const run = cleanRun();
    extraJob(run, 'job_young', 'running', {}, '2026-03-01T12:00:20.000Z');
    extraJob(run, 'job_rescue_due', 'unknown', { lease_expires_at: '2026-03-01T12:00:25.000Z' });
    extraJob(run, 'job_unclaimed', 'running', { state: 'starting', lease_owner: null, lease_expires_at: null, started_at: '2026-03-01T12:00:15.000Z' }, '2026-03-01T12:00:15.000Z');
    expect(checkRun(run).violations).toEqual([]);
  });

  it('liveness: a lease expired long before the snapshot and an attempt never claimed are violations', () => {
    const run = cleanRun();
    extraJob(run, 'job_rotten', 'unknown', { lease_expires_at: '2026-03-01T12:00:05.000Z' });
    extraJob(run, 'job_unclaimed', 'unknown', { state: 'starting', lease_owner: null, lease_expires_at: null, started_at: '2026-03-01T11:59:00.000Z' });
    const found = checkRun(run).violations.filter((v) => v.kind === 'ownerless_attempt').map((v) => v.jobId).sort();
    expect(found).toEqual(['job_rotten', 'job_unclaimed']);
  });

  it('liveness is checked only when the run gives its times', () => {
    const run = cleanRun();
    run.liveness = undefined;
    extraJob(run, 'job_stuck', 'running', {});
    expect(checkRun(run).violations).toEqual([]);
  });

  it('reports an executor turning an unknown attempt into failed on an ambiguous outcome (a late definite refusal may: CONTRACT §2)', () => {
    const run = cleanRun();
    run.db.events.splice(3, 1, event(4, 'attempt.unknown', A1, 't3x'), event(9, 'attempt.failed', A1, 't3y', { actor: 'executor:e1', error: { code: 'connection_lost' } }));
    expect(checkRun(run).violations.map((v) => v.kind)).toContain('timeout_failed');
  });

  it('streams: a hedge that asked for the stream after attempt 1 claimed it, and stopped, is no violation', () => {
    const run = cleanRun();
    // The hedge's claim failed (nothing in the log), it was stopped (superseded) and attempt 1 won.
    hedgedStream(run, [
      event(11, 'attempt.started', B1, 's1', { number: 1, provider: 'p1', kind: 'first' }, J2),
      event(12, 'attempt.running', B1, 's2', {}, J2),
      event(13, 'attempt.stream_claimed', B1, 's3', {}, J2),
      event(14, 'attempt.started', B2, 's4', { number: 2, provider: 'p2', kind: 'hedge' }, J2),
      event(16, 'attempt.running', B2, 's5', {}, J2),
      event(17, 'attempt.superseded', B2, 's6', { actor: 'executor:e2' }, J2),
      event(18, 'attempt.succeeded', B1, 's7', { actor: 'executor:e1' }, J2),
    ]);
    run.db.attempts = run.db.attempts.map((a) => (a.id === B1 ? { ...a, state: 'succeeded', error: null } : a.id === B2 ? { ...a, state: 'superseded', error: { code: 'superseded' } } : a));
    const winnerResult = { ...CHAT_RESULT, content: JSON.stringify(P1_REPLY), provider: 'p1', model: 'model-p1' };
    run.db.jobs = run.db.jobs.map((j) => (j.id === J2 ? { ...j, completed_by: B1, result: winnerResult, stream_attempt_id: B1 } : j));
    run.callsAfter = run.callsAfter.map((c) => (c.idempotencyKey === `${J2}:1` ? { ...c, behaviour: { reply: P1_REPLY }, result: 'replied' } : c.idempotencyKey === `${J2}:2` ? { ...c, result: 'client-closed' } : c));
    run.callsBefore = run.callsAfter;
    run.history[7] = { ...run.history[7]!, response: { job_id: J2, stream: stream(JSON.stringify(P1_REPLY), 'done') } };
    expect(checkRun(run).violations).toEqual([]);
  });

  it('streams: a win by another attempt than the live stream holder, and a stored holder that never claimed, are violations', () => {
    const run = cleanRun();
    hedgedStream(run, [
      event(11, 'attempt.started', B1, 's1', { number: 1, provider: 'p1', kind: 'first' }, J2),
      event(12, 'attempt.running', B1, 's2', {}, J2),
      event(13, 'attempt.stream_claimed', B1, 's3', {}, J2),
      event(14, 'attempt.started', B2, 's4', { number: 2, provider: 'p2', kind: 'hedge' }, J2),
      event(16, 'attempt.running', B2, 's5', {}, J2),
      event(18, 'attempt.succeeded', B2, 's7', { actor: 'executor:e2' }, J2),
      event(19, 'attempt.superseded', B1, 's8', { actor: 'executor:e1' }, J2),
    ]);
    const messages = checkRun(run).violations.filter((v) => v.kind === 'stream_owner').map((v) => v.message);
    expect(messages.some((m) => m.includes(`attempt ${B2} won the job`))).toBe(true);
    expect(messages.some((m) => m.includes('never claimed'))).toBe(true);
  });

  it('streams: a complete stream or an answer with other text than the stored result is a mismatch', () => {
    const run = cleanRun();
    run.history[7] = { ...run.history[7]!, response: { job_id: J2, stream: stream(JSON.stringify(P1_REPLY), 'done') } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
    const run2 = cleanRun();
    run2.history[9] = { ...run2.history[9]!, response: { job_id: J3, text: 'plain p1-3 text' } };
    expect(checkRun(run2).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
  });

  it('gateway keys: two bodies answered with one job, two fresh answers, two job ids are violations', () => {
    const run = cleanRun();
    run.history.push(entry(11, { op: 'chat', method: 'POST', path: '/v1/chat/completions', key: 'k2', body: { ...CHAT, model: 'hedged' }, replayed: true, response: { job_id: J2, stream: stream(JSON.stringify(P2_REPLY), 'done') } }));
    expect(checkRun(run).violations.map((v) => v.kind)).toContain('missed_conflict');
    const run2 = cleanRun();
    run2.history[7] = { ...run2.history[7]!, replayed: undefined };
    expect(checkRun(run2).violations.map((v) => v.kind)).toContain('created_twice');
    const run3 = cleanRun();
    run3.history.push(entry(11, { op: 'chat', method: 'POST', path: '/v1/chat/completions', key: 'k2', body: CHAT, status: 409, response: { code: 'attempt_in_doubt', job_id: 'job_other' } }));
    expect(checkRun(run3).violations.map((v) => v.kind)).toContain('duplicate_job');
    const run4 = cleanRun();
    run4.history[8] = { ...run4.history[8]!, body: CHAT };
    expect(checkRun(run4).violations.map((v) => v.kind)).toContain('bad_conflict');
  });

  it('contracts: a contract job that won with output its schema refuses is a violation', () => {
    const run = cleanRun();
    run.db.jobs = run.db.jobs.map((j) => (j.id === J3 ? { ...j, result: { ...(j.result as object), content: 'plain p2-9 text' } } : j));
    run.callsAfter = run.callsAfter.map((c) => (c.idempotencyKey === `${J3}:2` ? { ...c, behaviour: { reply: 'plain p2-9 text' } } : c));
    run.history[9] = { ...run.history[9]!, response: { job_id: J3, text: 'plain p2-9 text' } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['contract_verdict']);
  });

  it('accepts a result given by a resolve, and rejects one nobody gave', () => {
    const run = cleanRun();
    const given = { resolved_by: 'c0', n: 1 };
    run.db.jobs[0] = { ...run.db.jobs[0]!, result: given };
    run.history = run.history.filter((e) => e.op !== 'get');
    run.callsBefore = run.callsBefore.filter((c) => c.idempotencyKey !== `${J1}:2`);
    run.callsAfter = run.callsAfter.filter((c) => c.idempotencyKey !== `${J1}:2`);
    run.history.push(entry(7, { op: 'resolve', method: 'POST', path: `/v1/attempts/${A2}/resolve`, jobId: J1, attemptId: A2, body: { state: 'succeeded', result: given }, response: { id: A2, state: 'succeeded', job: { id: J1, state: 'succeeded', completed_by: A2, result: given } } }));
    expect(checkRun(run).violations).toEqual([]);
    run.db.jobs[0] = { ...run.db.jobs[0]!, result: { resolved_by: 'nobody' } };
    expect(checkRun(run).violations.map((v) => v.kind)).toContain('result_mismatch');
  });
});

// A /v1/responses job (docs/responses-api.md): a background create, polled with GET /v1/responses/{id} until
// completed, then the same key replayed plain and streamed (`stream` / `background` are delivery, not intent).
const J4 = 'job_0004';
const D1 = 'att_0041';
const RESP = { model: 'plain', input: 'respond' };
const RESP_TEXT = 'answer p1-4';

function responsesStream(text: string, end: 'done' | 'error' | 'eof' | 'garbled', errorCode: string | null = null, badSequence: string | null = null): Record<string, unknown> {
  return { ...stream(text, end, errorCode), events: 9, bad_sequence: badSequence };
}

/** The clean run plus a clean Responses job. */
function responsesRun(): ReturnType<typeof cleanRun> {
  const run = cleanRun();
  run.db.jobs.push({ owner_id: 'alice', id: J4, idempotency_key: 'k4', route: 'plain', input: { messages: [{ role: 'user', content: 'respond' }], stream: true }, metadata: { 'onejob:responses': { model: 'plain' } }, state: 'succeeded', version: 1, completed_by: D1, result: { content: RESP_TEXT, finish_reason: 'stop', model: 'model-p1', provider: 'p1', usage: null }, error: null, created_at: '2026-03-01T11:59:00.000Z', stream_attempt_id: D1 });
  run.db.attempts.push({ owner_id: 'alice', id: D1, job_id: J4, number: 1, provider: 'p1', kind: 'first', state: 'succeeded', error: null });
  run.db.events.push(
    event(31, 'attempt.started', D1, 'r1', { number: 1, provider: 'p1', kind: 'first' }, J4),
    event(32, 'attempt.running', D1, 'r2', {}, J4),
    event(33, 'attempt.stream_claimed', D1, 'r3', {}, J4),
    event(34, 'attempt.succeeded', D1, 'r4', { actor: 'executor:e1' }, J4),
    event(35, 'job.succeeded', D1, 'r4', { actor: 'executor:e1' }, J4),
  );
  const call: ProviderCall = { provider: 'p1', seq: 4, idempotencyKey: `${J4}:1`, jobId: J4, body: {}, behaviour: { reply: RESP_TEXT }, result: 'replied', status: 200 };
  run.callsBefore = [...run.callsBefore, call];
  run.callsAfter = [...run.callsAfter, call];
  const answer = (status: string, text: string): Record<string, unknown> => ({ job_id: J4, id: `resp_${J4}`, response_status: status, text });
  run.history.push(
    entry(11, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: { ...RESP, background: true }, response: answer('queued', '') }),
    entry(12, { op: 'response_get', method: 'GET', path: `/v1/responses/resp_${J4}`, jobId: J4, response: answer('in_progress', '') }),
    entry(13, { op: 'response_get', method: 'GET', path: `/v1/responses/resp_${J4}`, jobId: J4, response: answer('completed', RESP_TEXT) }),
    entry(14, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: RESP, replayed: true, response: answer('completed', RESP_TEXT) }),
    entry(15, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: { ...RESP, stream: true }, replayed: true, response: { job_id: J4, stream: responsesStream(RESP_TEXT, 'done') } }),
  );
  return run;
}

const at = (run: ReturnType<typeof cleanRun>, h: number): number => run.history.findIndex((e) => e.id === h);

describe('chaos checker: doubt (CONTRACT §11)', () => {
  /** A job on a lookup route whose attempt 1 (on `dr`, asked by its id) went unknown and was resolved by lookup. */
  function doubtRun(attempt: Partial<DbAttempt>, reply = 'doubt answer d-1 in a few words') {
    const run = cleanRun();
    const result = { content: reply, finish_reason: 'stop', model: 'model-dr', provider: 'dr', usage: null };
    run.db.jobs.push({ owner_id: 'alice', id: 'job_d', idempotency_key: 'kd', route: 'doubt-responses', input: BODY.input, metadata: null, state: 'succeeded', version: 1, completed_by: 'att_d', result, error: null, created_at: '2026-03-01T11:59:00.000Z' });
    run.db.attempts.push({
      owner_id: 'alice', id: 'att_d', job_id: 'job_d', number: 1, provider: 'dr', kind: 'first', state: 'succeeded', error: null,
      started_at: '2026-03-01T11:59:00.000Z', lease_owner: null, lease_expires_at: null,
      unknown_at: '2026-03-01T11:59:03.000Z', finished_at: '2026-03-01T12:00:05.000Z', provider_request_id: 'resp_1', resolved_by: 'lookup', ...attempt,
    });
    run.doubt = { lookups: { dr: 'id', ds: 'attempt' }, windowMs: 20_000, submits: [{ attempt_id: 'att_d', submits: 1, replies: ['doubt answer d-1 in a few words'], fake: 'doubt' }] };
    return run;
  }
  const kinds = (run: ReturnType<typeof cleanRun>) => checkRun(run).violations.map((v) => v.kind);

  it('passes doubt resolved by lookup within the window, its result the work the fake did', () => {
    const report = checkRun(doubtRun({}));
    expect(report.violations).toEqual([]);
    expect(report.notes).toMatchObject({ doubt_attempts: 1, doubt_resolved_by_lookup: 1, doubt_resolution_p50_ms: 62_000, submits_counted: 1 });
  });

  /** The same job still unknown: its attempt not resolved yet. */
  function unknownRun(attempt: Partial<DbAttempt>) {
    const run = doubtRun({ state: 'unknown', finished_at: null, resolved_by: null, ...attempt });
    run.db.jobs = run.db.jobs.map((j) => (j.id === 'job_d' ? { ...j, state: 'unknown', completed_by: null, result: null } : j));
    return run;
  }

  it('an attempt still unknown within its window, or never asked because its id never arrived, is no violation', () => {
    expect(kinds(unknownRun({ unknown_at: '2026-03-01T12:00:15.000Z' }))).toEqual([]);
    const report = checkRun(unknownRun({ provider_request_id: null }));
    expect(report.violations).toEqual([]);
    expect(report.notes.doubt_unaskable_unknown).toBe(1);
  });

  it('an attempt resolved only after the window, or still unknown past it, is doubt_unresolved; an attempt asked by its attempt id needs no provider id', () => {
    expect(kinds(doubtRun({ finished_at: '2026-03-01T12:00:25.000Z' }))).toEqual(['doubt_unresolved']);
    expect(kinds(unknownRun({}))).toEqual(['doubt_unresolved']);
    expect(kinds(unknownRun({ provider: 'ds', provider_request_id: null }))).toEqual(['doubt_unresolved']);
  });

  it('a doubt job whose result is not the work the fake did for its winner is a result_mismatch', () => {
    expect(kinds(doubtRun({}, 'doubt answer d-2 in a few words'))).toEqual(['result_mismatch']);
  });

  it('a result that is another attempt\'s work is a foreign_answer (and no result_mismatch besides); its own work is none', () => {
    const run = doubtRun({}, 'doubt answer d-9 in a few words');
    run.doubt = { ...run.doubt!, submits: [...run.doubt!.submits, { attempt_id: 'att_other', submits: 1, replies: ['doubt answer d-9 in a few words'], fake: 'doubt' }] };
    expect(kinds(run)).toEqual(['foreign_answer']);
    expect(kinds(doubtRun({}))).toEqual([]);
  });

  it('an outside resolver ending an attempt in doubt is fine; one that was handed back or running is settled_while_live', () => {
    const withEvents = (events: [string, Record<string, unknown>?][]) => {
      const run = doubtRun({});
      run.db.events.push(...events.map(([type, data], i) => event(900 + i, type, 'att_d', `d${i}`, data ?? {}, 'job_d')));
      return run;
    };
    const end: [string, Record<string, unknown>] = ['attempt.succeeded', { actor: 'lookup:rec_1', resolved_by: 'lookup' }];
    expect(kinds(withEvents([['attempt.started'], ['attempt.running'], ['attempt.unknown'], end]))).toEqual([]);
    expect(kinds(withEvents([['attempt.started'], ['attempt.running'], ['attempt.unknown'], ['attempt.handed_back'], end]))).toEqual(['settled_while_live']);
    expect(kinds(withEvents([['attempt.started'], ['attempt.running'], ['attempt.failed', { resolved_by: 'callback' }]]))).toEqual(['settled_while_live']);
    // The executor's own answer, or a person, may end a running attempt.
    expect(kinds(withEvents([['attempt.started'], ['attempt.running'], ['attempt.succeeded', { actor: 'executor:e1' }]]))).toEqual([]);
    expect(kinds(withEvents([['attempt.started'], ['attempt.running'], ['attempt.succeeded', { resolved_by: 'operator' }]]))).toEqual([]);
  });

  it('two creates of one attempt, even on two fakes, are a double_submit', () => {
    const run = doubtRun({});
    run.doubt = { ...run.doubt!, submits: [...run.doubt!.submits, { attempt_id: 'att_d', submits: 1, replies: [], fake: 'doubt' }] };
    expect(kinds(run)).toEqual(['double_submit']);
  });
});

describe('chaos checker: /v1/responses', () => {
  it('passes a clean Responses job: background, polled, replayed plain and streamed', () => {
    const report = checkRun(responsesRun());
    expect(formatReport(report)).toMatch(/violations: 0$/);
    expect(report.notes.ops_responses).toBe(3);
    expect(report.notes.ops_response_get).toBe(2);
  });

  it('a Response answer whose output text differs from the stored result is a mismatch', () => {
    const run = responsesRun();
    run.history[at(run, 14)] = { ...run.history[at(run, 14)]!, response: { job_id: J4, id: `resp_${J4}`, response_status: 'completed', text: 'answer p2-4' } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
    const polled = responsesRun();
    polled.history[at(polled, 13)] = { ...polled.history[at(polled, 13)]!, response: { job_id: J4, id: `resp_${J4}`, response_status: 'completed', text: 'answer p2-4' } };
    expect(checkRun(polled).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
  });

  it('a Responses stream that completed with other text than the stored result is a mismatch', () => {
    const run = responsesRun();
    run.history[at(run, 15)] = { ...run.history[at(run, 15)]!, response: { job_id: J4, stream: responsesStream('answer p1-', 'done') } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
  });

  it('a Response shown failed (or completed) for a job in another state is a mismatch; in_progress is not an answer', () => {
    const run = responsesRun();
    run.history[at(run, 13)] = { ...run.history[at(run, 13)]!, response: { job_id: J4, id: `resp_${J4}`, response_status: 'failed', text: '' } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
    const running = responsesRun();
    running.db.jobs = running.db.jobs.map((j) => (j.id === J4 ? { ...j, state: 'failed', completed_by: null, result: null } : j));
    running.db.attempts = running.db.attempts.map((a) => (a.id === D1 ? { ...a, state: 'failed', error: { code: 'provider_rejected' } } : a));
    running.db.events = running.db.events.filter((ev) => ev.job_id !== J4 || ev.id < 34);
    running.callsAfter = running.callsAfter.map((c) => (c.idempotencyKey === `${J4}:1` ? { ...c, result: 'rejected', status: 400 } : c));
    running.callsBefore = running.callsAfter;
    running.history = running.history.filter((e) => e.id < 13);
    expect(checkRun(running).violations).toEqual([]);
    running.history.push(entry(13, { op: 'response_get', method: 'GET', path: `/v1/responses/resp_${J4}`, jobId: J4, response: { job_id: J4, id: `resp_${J4}`, response_status: 'completed', text: RESP_TEXT } }));
    expect(checkRun(running).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
  });

  it('a Responses stream numbered out of order, or cut without its terminator, is a stream_end violation', () => {
    const run = responsesRun();
    run.history[at(run, 15)] = { ...run.history[at(run, 15)]!, response: { job_id: J4, stream: responsesStream(RESP_TEXT, 'done', null, '3:4') } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['stream_end']);
    const eof = responsesRun();
    eof.history[at(eof, 15)] = { ...eof.history[at(eof, 15)]!, response: { job_id: J4, stream: responsesStream('answer', 'eof') } };
    expect(checkRun(eof).violations.map((v) => v.kind)).toEqual(['stream_end']);
  });

  it('a Responses stream broken off (error event, response.failed) is checked as the start of an attempt output', () => {
    const run = responsesRun();
    run.history[at(run, 15)] = { ...run.history[at(run, 15)]!, response: { job_id: J4, stream: responsesStream('answer p1', 'error', 'response_failed') } };
    expect(checkRun(run).violations).toEqual([]);
    run.history[at(run, 15)] = { ...run.history[at(run, 15)]!, response: { job_id: J4, stream: responsesStream('answer p9', 'error', 'provider_stream_error') } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['answer_mismatch']);
  });

  it('responses keys: two fresh answers, another job id, other input answered with the job are violations; delivery flips are not', () => {
    const fresh = responsesRun();
    fresh.history[at(fresh, 14)] = { ...fresh.history[at(fresh, 14)]!, replayed: undefined };
    expect(checkRun(fresh).violations.map((v) => v.kind)).toEqual(['created_twice']);
    const other = responsesRun();
    other.history.push(entry(16, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: RESP, status: 409, response: { code: 'attempt_in_doubt', job_id: 'job_other' } }));
    expect(checkRun(other).violations.map((v) => v.kind)).toContain('duplicate_job');
    const edited = responsesRun();
    edited.history.push(entry(16, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: { ...RESP, input: 'respond (edited)' }, replayed: true, response: { job_id: J4, id: `resp_${J4}`, response_status: 'completed', text: RESP_TEXT } }));
    expect(checkRun(edited).violations.map((v) => v.kind)).toEqual(['missed_conflict']);
    const conflict = responsesRun();
    conflict.history.push(entry(16, { op: 'responses', method: 'POST', path: '/v1/responses', key: 'k4', body: { ...RESP, stream: true }, status: 409, response: { code: 'idempotency_key_reused' } }));
    expect(checkRun(conflict).violations.map((v) => v.kind)).toEqual(['bad_conflict']);
  });

  it('polling one own Response: a 404 while its job exists, or another owner shown it, is a violation', () => {
    const run = responsesRun();
    run.history[at(run, 12)] = { ...run.history[at(run, 12)]!, status: 404, response: { code: 'job_not_found' } };
    expect(checkRun(run).violations.map((v) => v.kind)).toEqual(['job_missing']);
    const bob = responsesRun();
    bob.history[at(bob, 12)] = { ...bob.history[at(bob, 12)]!, owner: 'bob' };
    expect(checkRun(bob).violations.map((v) => v.kind)).toEqual(['cross_owner']);
  });
});

describe('chaos workload: reading a Responses stream', () => {
  const sse = (events: Record<string, unknown>[]): string => events.map((e) => responsesSseEvent(e as unknown as ResponsesSseEvent)).join('');
  const ev = (n: number, type: string, more: Record<string, unknown> = {}): Record<string, unknown> => ({ type, sequence_number: n, ...more });

  it('records the output_text deltas and response.completed as done', () => {
    const r = new SseReader('responses');
    const text = sse([ev(0, 'response.created'), ev(1, 'response.output_text.delta', { delta: 'answer ' }), ev(2, 'response.output_text.delta', { delta: 'p1-4' }), ev(3, 'response.completed'), ev(4, 'response.output_text.delta', { delta: ' late' })]);
    r.feed(text.slice(0, 37));
    r.feed(text.slice(37));
    expect(r.record).toMatchObject({ text: 'answer p1-4', end: 'done', error_code: null, events: 4, bad_sequence: null });
  });

  it('records response.failed and the error event as error, and a sequence_number out of order', () => {
    const failed = new SseReader('responses');
    failed.feed(sse([ev(0, 'response.created'), ev(1, 'response.failed')]));
    expect(failed.record).toMatchObject({ end: 'error', error_code: 'response_failed', bad_sequence: null });
    const broken = new SseReader('responses');
    broken.feed(sse([ev(0, 'response.created'), ev(2, 'response.output_text.delta', { delta: 'ans' }), ev(3, 'error', { code: 'provider_stream_error', error: { code: 'provider_stream_error' } })]));
    expect(broken.record).toMatchObject({ text: 'ans', end: 'error', error_code: 'provider_stream_error', bad_sequence: '1:2' });
  });
});

// ---- tool calls through /mcp (chaos/tool-checker.ts) -------------------------------------------------

/**
 * A clean tool run: call c1 keyed in _meta, executed once (x1), answered fresh then replayed; call c2
 * keyless, sent twice, executed once; call c3 timed out (in doubt), was resolved succeeded by an operator
 * with its own result, and the repeat got that result (no execution).
 */
function cleanToolRun(): { calls: ToolCallEntry[]; executions: ToolExecution[]; db: { jobs: DbJob[]; attempts: DbAttempt[]; events: DbEvent[] } } {
  const call = (id: number, e: Partial<ToolCallEntry> & Pick<ToolCallEntry, 'call'>): ToolCallEntry => ({
    id, agent: 'agent0', owner: 'alice', op: 'call', mode: 'meta', key: null, sentAt: id * 100, recvAt: id * 100 + 50, status: 200, outcome: 'answered', ...e,
  });
  const ok = (jobId: string, exec: string | null, c: string, replayed: boolean, resolvedBy: string | null = null): ToolCallEntry['answer'] =>
    ({ kind: 'result', isError: false, jobId, state: 'succeeded', replayed, exec, call: c, resolvedBy, attemptId: null });
  const toolJob = (id: string, c: string, result: unknown): DbJob => ({
    owner_id: 'alice', id, idempotency_key: `key-${c}`, route: TOOL_ROUTE, input: { arguments: { call: c, amount: 5 } }, metadata: null, state: 'succeeded', version: 1, completed_by: `att_${id}`, result, error: null,
  });
  return {
    calls: [
      call(1, { call: 'c1', key: 't:c1', answer: ok('job_t1', 'x1', 'c1', false) }),
      call(2, { call: 'c1', key: 't:c1', answer: ok('job_t1', 'x1', 'c1', true) }),
      call(3, { call: 'c2', mode: 'keyless', answer: ok('job_t2', 'x2', 'c2', false) }),
      call(4, { call: 'c2', mode: 'keyless', answer: ok('job_t2', 'x2', 'c2', true) }),
      call(5, { call: 'c3', key: 't:c3', answer: { kind: 'result', isError: true, jobId: 'job_t3', state: 'unknown', replayed: false, exec: null, call: null, resolvedBy: null, attemptId: 'att_job_t3' } }),
      call(6, { call: 'c3', op: 'resolve', key: null, jobId: 'job_t3', attemptId: 'att_job_t3', body: { state: 'succeeded', result: { content: [], structuredContent: { resolved_by: 'agent0', call: 'c3' } } } }),
      call(7, { call: 'c3', key: 't:c3', answer: ok('job_t3', null, 'c3', true, 'agent0') }),
    ],
    executions: [
      { exec: 'x1', call: 'c1', amount: 5, at: 1, key: 'att_job_t1', jobId: 'job_t1' },
      { exec: 'x2', call: 'c2', amount: 5, at: 2, key: 'att_job_t2', jobId: 'job_t2' },
      // c3's call arrived (and may have charged) before it timed out: one execution.
      { exec: 'x3', call: 'c3', amount: 5, at: 3, key: 'att_job_t3', jobId: 'job_t3' },
    ],
    db: {
      jobs: [
        toolJob('job_t1', 'c1', { content: [], structuredContent: { exec: 'x1', call: 'c1', amount: 5 } }),
        toolJob('job_t2', 'c2', { content: [], structuredContent: { exec: 'x2', call: 'c2', amount: 5 } }),
        toolJob('job_t3', 'c3', { content: [], structuredContent: { resolved_by: 'agent0', call: 'c3' } }),
      ],
      attempts: [],
      events: [],
    },
  };
}

const toolPlants: Record<ToolViolationKind, ((run: ReturnType<typeof cleanToolRun>) => void)[]> = {
  tool_executed_twice: [
    // The agent's repeat reached the tool server again (a second attempt, or a second job for one key).
    (run) => void run.executions.push({ exec: 'x9', call: 'c1', amount: 5, at: 9, key: 'att_other', jobId: 'job_t1' }),
    // Keyless repeats that became two jobs, each executed.
    (run) => void run.executions.push({ exec: 'x8', call: 'c2', amount: 5, at: 8, key: 'att_job_t2b', jobId: 'job_t2b' }),
  ],
  tool_success_unexecuted: [
    // A success told with an execution the tool server never logged (a made-up answer).
    (run) => void run.calls.push({ ...run.calls[1]!, id: 20, answer: { kind: 'result', isError: false, jobId: 'job_t1', state: 'succeeded', replayed: true, exec: 'x77', call: 'c1', resolvedBy: null, attemptId: null } }),
    // Another call's execution given as this call's answer.
    (run) => void run.calls.push({ ...run.calls[3]!, id: 21, answer: { kind: 'result', isError: false, jobId: 'job_t2', state: 'succeeded', replayed: true, exec: 'x1', call: 'c1', resolvedBy: null, attemptId: null } }),
    // An operator's result nobody gave (no resolve of that job recorded).
    (run) => void run.calls.splice(5, 1),
    // A stored success whose result names no execution at all.
    (run) => void (run.db.jobs[1] = { ...run.db.jobs[1]!, result: { content: [{ type: 'text', text: 'charged' }] } }),
    // A "still running" answer that names an execution the tool server never logged is a success told.
    (run) => void run.calls.push({ ...run.calls[1]!, id: 22, answer: { kind: 'result', isError: false, jobId: 'job_t1', state: 'running', replayed: false, exec: 'x77', call: 'c1', resolvedBy: null, attemptId: null } }),
  ],
};

describe('chaos checker: tool calls through /mcp', () => {
  it('passes a clean tool run (a replay, keyless repeats, a doubt resolved by an operator)', () => {
    const { violations, notes } = checkToolCalls(cleanToolRun());
    expect(violations).toEqual([]);
    expect(notes).toMatchObject({ tool_executions: 3, tool_intended_calls: 3, tool_answers_in_doubt: 1, tool_answers_replayed: 3, tool_jobs_succeeded: 3 });
  });

  it('a result past the server\'s wait that says the job is still running tells no success (CONTRACT §15)', () => {
    const run = cleanToolRun();
    for (const [i, state] of ['queued', 'starting', 'running'].entries()) {
      run.calls.push({ ...run.calls[1]!, id: 30 + i, answer: { kind: 'result', isError: false, jobId: 'job_t1', state, replayed: false, exec: null, call: null, resolvedBy: null, attemptId: null } });
    }
    const { violations, notes } = checkToolCalls(run);
    expect(violations).toEqual([]);
    expect(notes.tool_answers_still_running).toBe(3);
    // The same answer with a final state is a success that names no execution.
    run.calls.push({ ...run.calls[1]!, id: 40, answer: { kind: 'result', isError: false, jobId: 'job_t1', state: 'succeeded', replayed: false, exec: null, call: null, resolvedBy: null, attemptId: null } });
    expect(checkToolCalls(run).violations.map((v) => v.kind)).toEqual(['tool_success_unexecuted']);
  });

  it('has planted cases for every tool kind', () => {
    expect(Object.keys(toolPlants).sort()).toEqual([...TOOL_VIOLATION_KINDS].sort());
  });

  for (const kind of TOOL_VIOLATION_KINDS) {
    toolPlants[kind].forEach((plant, i) => {
      it(`reports a planted ${kind} (#${i + 1})`, () => {
        const run = cleanToolRun();
        plant(run);
        const { violations } = checkToolCalls(run);
        expect(violations.length).toBeGreaterThan(0);
        expect(new Set(violations.map((v) => v.kind))).toEqual(new Set([kind]));
        expect(violations[0]!.message.length).toBeGreaterThan(10);
      });
    });
  }
});

describe('chaos checker: streams resumed across reconnects (chaos/resume-check.ts)', () => {
  const REST = '"answer p2-8 in a few more words"}';
  const kinds = (run: ReturnType<typeof cleanRun>): string[] => checkRun(run).violations.map((v) => v.kind);

  it('a chain dropped twice and resumed on other processes that assembles the result, each event once, passes', () => {
    const run = cleanRun();
    resumedChain(run, [['2-1', '2-2'], ['2-3'], ['2-4', '2-5']], ['{"summary":', '"answer p2-8 ', 'in a few more words"}']);
    const report = checkRun(run);
    expect(report.violations).toEqual([]);
    expect(report.notes).toMatchObject({ resume_chains: 1, resume_connections: 2, resume_chains_done: 1, resume_chains_direct_to_a_process: 1 });
  });

  it('a resume that skips an event, or continues another attempt\'s stream, is a violation', () => {
    const skipped = cleanRun();
    resumedChain(skipped, [['2-1', '2-2'], ['2-4', '2-5']], ['{"summary":', REST]);
    expect(kinds(skipped)).toEqual(['resume_mismatch']);
    const other = cleanRun();
    resumedChain(other, [['2-1', '2-2'], ['1-3', '1-4']], ['{"summary":', REST]);
    expect(kinds(other)).toEqual(['resume_mismatch']);
  });

  it('assembled text that is not the stored result is a violation even when the ids line up', () => {
    const run = cleanRun();
    resumedChain(run, [['2-1', '2-2'], ['2-3', '2-4']], ['{"summary":', '"answer p1-7 in a few more words"}']);
    expect(kinds(run)).toEqual(['resume_mismatch']);
  });

  it('starting_after=k resumes at ordinal k + 2; a resume cut without its terminator is a violation; an unfinished chain is checked as a beginning', () => {
    const after = cleanRun();
    resumedChain(after, [['2-1', '2-2'], ['2-3', '2-4']], ['{"summary":', REST], { startingAfter: true });
    expect(checkRun(after).violations).toEqual([]);
    const cut = cleanRun();
    resumedChain(cut, [['2-1', '2-2'], []], ['{"summary":', ''], { lastEnd: 'eof' });
    expect(kinds(cut)).toEqual(['resume_mismatch']);
    const left = cleanRun();
    resumedChain(left, [['2-1', '2-2'], ['2-3']], ['{"summary":', '"answer p2-8 '], { lastEnd: 'eof' });
    left.history[left.history.length - 1] = { ...left.history.at(-1)!, outcome: 'dropped' };
    expect(checkRun(left).violations).toEqual([]);
    const mixed = cleanRun();
    resumedChain(mixed, [['2-1', '2-2'], ['2-3']], ['{"summary":', '"answer p1-7 '], { lastEnd: 'eof' });
    mixed.history[mixed.history.length - 1] = { ...mixed.history.at(-1)!, outcome: 'dropped' };
    expect(kinds(mixed)).toEqual(['resume_mismatch']);
  });
});
