/**
 * The chaos checker: reads what clients were told (histories), what the
 * database holds (jobs, attempts, the event log) and what the fake providers
 * received (their call logs), and reports every broken promise of
 * CONTRACT §2–3 as a {@link Violation} with the job and a history excerpt.
 *
 * Pure: {@link checkRun} takes a {@link CheckInput} and returns a report, so
 * it is unit-tested on synthetic histories (test/chaos/checker.test.ts) with
 * one planted violation of each kind.
 *
 * Besides safety (nothing duplicated, lost, changed or executed twice) it
 * checks liveness when given {@link CheckInput.liveness}: after the faults
 * stopped, every job is terminal or `unknown` within its deadlines, and no
 * attempt is `starting`/`running` without a live lease.
 */
import canonicalizeImport from 'canonicalize';
import { checkDoubt, repliesByAttempt } from './doubt-checker.ts';
import type { CheckInput, DbAttempt, DbEvent, DbJob, HistoryEntry, ProviderCall } from './records.ts';
import type { ToolViolationKind } from './tool-checker.ts';
import { checkResumedStreams } from './resume-check.ts';
import { checkTrust } from './trust-checker.ts';

/** The kinds of violation the checker reports; each is one promise. */
export const VIOLATION_KINDS = [
  /** More than one job for one (owner, key), or clients told different ids for it. */
  'duplicate_job',
  /** A key answered 201 (created) more than once. */
  'created_twice',
  /** A client was told about a job id that does not exist (or not with that owner and key). */
  'job_missing',
  /** `409 idempotency_key_reused` although the request equals the stored one. */
  'bad_conflict',
  /** A replay (200/201) although the request differs from the stored one. */
  'missed_conflict',
  /** More than one succeeded attempt in a job, or `completed_by` not naming its one winner. */
  'two_winners',
  /** The job's result is not the winning attempt's output. */
  'result_mismatch',
  /** A terminal job was later seen (or stored) with another state, winner or result. */
  'result_changed',
  /** An attempt started while another of its job was starting or unknown (or running, without a hedge). */
  'attempt_overlap',
  /** A provider executed a job more often than it has attempts (or one attempt twice). */
  'extra_execution',
  /** A timeout, lease expiry or other ambiguous outcome recorded as `failed`. */
  'timeout_failed',
  /** Another owner's job was readable. */
  'cross_owner',
  /** Liveness: after the faults stopped, a job was still `queued`/`running` past its deadlines. */
  'stuck_job',
  /** Liveness: an attempt `starting`/`running` that no live lease covers (and no rescuer took over). */
  'ownerless_attempt',
  /**
   * Streams (CONTRACT §7): a second attempt claimed the job's stream while its holder had not ended
   * definitely, a job was won by another attempt than its live stream holder, or `stream_attempt_id`
   * names an attempt that never claimed it.
   */
  'stream_owner',
  /**
   * A gateway client (`/v1/chat/completions`, `/v1/messages`, `/v1/responses`) received text that is not one
   * attempt's: an answer (or a stream ended with `[DONE]` / `message_stop` / `response.completed`) other than
   * the job's stored result, or a stream broken off (`event: error`, `response.failed`) whose text is not the
   * beginning of one attempt's output; or a Response `failed` / `cancelled` whose job is not.
   */
  'answer_mismatch',
  /**
   * A stream that ended with neither its terminator nor `event: error` while the server stayed up, sent an
   * unreadable event, or (Responses) numbered its events other than `sequence_number` 0, 1, 2, ….
   */
  'stream_end',
  /**
   * Resumed streams (CONTRACT §13, chaos/resume-check.ts): what a client assembled across its reconnects is not the
   * stored result (or, unfinished, the beginning of one attempt's output), or an event came twice, was skipped, or
   * was another stream's.
   */
  'resume_mismatch',
  /** Contracts (CONTRACT §5): a contract route's job won with output its schema refuses, or a conforming output failed as `contract_violation`. */
  'contract_verdict',
  /** Doubt (CONTRACT §11, chaos/doubt-checker.ts): an attempt the lookup can ask about still unknown two minutes after the faults stopped. */
  'doubt_unresolved',
  /** An attempt's work sent upstream more than once (the fakes count creates per attempt id). */
  'double_submit',
  /** Trust (CONTRACT §15, chaos/trust-checker.ts): a job's result is the work the doubt fake did for another attempt. */
  'foreign_answer',
  /** Trust: a lookup, callback or policy moved an attempt that was `starting`/`running`, not `unknown`. */
  'settled_while_live',
] as const;
export type ViolationKind = (typeof VIOLATION_KINDS)[number];

/** One broken promise. */
export interface Violation {
  /** A {@link ViolationKind}, a tool-call rule's kind (chaos/tool-checker.ts), or `fuzz_<finding>` for the fuzzer's findings merged by the runner. */
  readonly kind: ViolationKind | ToolViolationKind | `fuzz_${string}`;
  readonly jobId: string | null;
  readonly message: string;
  /** The history entries (and other records) that show it, oldest first. */
  readonly excerpt: readonly unknown[];
}

/** What {@link checkRun} found. */
export interface CheckReport {
  readonly operations: number;
  readonly faults: number;
  readonly violations: readonly Violation[];
  /** Counts worth knowing that are not violations (5xx answers, unknown jobs left, …). */
  readonly notes: Readonly<Record<string, number>>;
}

const TERMINAL_JOB = new Set(['succeeded', 'failed', 'cancelled']);
/** Provider error codes that mean "maybe executed": never a `failed` attempt by an executor. */
const AMBIGUOUS_CODES = new Set([
  'aborted_after_send', 'connection_lost', 'provider_server_error', 'malformed_response',
  'lease_expired', 'timeout', 'deadline_exceeded', 'stream_stalled', 'attempt_timeout',
]);
/** Fake-provider call results after which a `failed` attempt is legitimate (nothing was executed). */
const DEFINITE_FAILURE_STATUS = (status: number | null): boolean =>
  status !== null && status >= 300 && status < 600 && status !== 409 && (status < 500 || status === 503 || status === 529 || status === 501 || status === 505);

/** RFC 8785 canonical JSON (the package's types do not describe its default export as callable). */
const canonicalize = canonicalizeImport as unknown as (value: unknown) => string | undefined;

function canon(value: unknown): string {
  return canonicalize(value === undefined ? null : value) ?? 'undefined';
}

/** The canonical request of a create: what the store fingerprints. */
function requestCanon(body: unknown): string {
  const b = (body ?? {}) as { route?: unknown; input?: unknown; metadata?: unknown };
  return canon({ route: b.route ?? null, input: b.input ?? null, metadata: b.metadata ?? null });
}

/** A gateway body without its delivery members (CONTRACT §13: `stream`, `stream_options`, `background` are not intent). */
function gatewayIntent(op: string, body: unknown): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return canon({ op, body: body ?? null });
  const { stream: _s, stream_options: _o, background: _b, ...intent } = body as Record<string, unknown>;
  return canon({ op, body: intent });
}

function storedCanon(job: DbJob): string {
  return canon({ route: job.route, input: job.input, metadata: job.metadata ?? null });
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join('');
}

/** What the fake replied to a call: its scripted reply, else the last user message (an echo). */
export function fakeReplyText(call: ProviderCall): string {
  const reply = call.behaviour?.reply;
  if (reply !== undefined) return typeof reply === 'string' ? reply : JSON.stringify(reply);
  const messages = (call.body as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m?.role === 'user') return contentText(m.content);
  }
  return '';
}

/**
 * A stored `content` is the provider's text (or, on a contract route, the
 * parsed JSON value of it, CONTRACT §4): the same output as `text`.
 */
export function sameOutput(content: unknown, text: string): boolean {
  if (typeof content === 'string') return content === text;
  try {
    return canon(JSON.parse(text)) === canon(content);
  } catch {
    return false;
  }
}

/**
 * The text a gateway answer carries for a stored result: its `content`
 * (a string as is, any other value as its JSON text); a resolved result
 * without `content` is the content itself.
 */
export function answerTextOf(result: unknown): string {
  const normalized = typeof result === 'object' && result !== null && !Array.isArray(result) && Object.hasOwn(result, 'content') ? (result as { content: unknown }).content : result;
  return typeof normalized === 'string' ? normalized : JSON.stringify(normalized ?? null);
}

/** Two texts of one output (an answer, a stored result) are the same: equal, or equal JSON values. */
function sameText(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return canon(JSON.parse(a)) === canon(JSON.parse(b));
  } catch {
    return false;
  }
}

/** Whether `value` passes the chaos contract's schema (chaos/cluster.ts CONTRACTS.summary): `{"summary": string}`, nothing else. */
export function passesSummaryContract(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { summary?: unknown }).summary === 'string' && Object.keys(value).length === 1;
}

/** Creates on the gateway endpoints: the job is named by Onejob-Job-Id, the request is the whole body. */
const GATEWAY_OPS = new Set(['chat', 'messages', 'responses']);
/** Entries whose answer is a gateway answer (text or stream) of a job: the creates, and `GET /v1/responses/{id}`. */
const ANSWER_OPS = new Set([...GATEWAY_OPS, 'response_get']);
/** A Response's `status` for a job that ended (docs/responses-api.md, Status): `completed` / `incomplete` carry its result. */
const RESPONSE_STATE: Readonly<Record<string, string>> = { completed: 'succeeded', incomplete: 'succeeded', failed: 'failed', cancelled: 'cancelled' };

interface Observation {
  readonly entry: HistoryEntry;
  readonly jobId: string;
  readonly state: string;
  readonly completedBy: string | null;
  readonly result: string;
}

/** Job bodies carried by an answer: the job itself, `job` of a resolve, `data` of a list. */
function jobsIn(entry: HistoryEntry): { id: string; state: string; completed_by: unknown; result: unknown }[] {
  if (entry.status === null || entry.status >= 300) return [];
  const r = entry.response as Record<string, unknown> | null | undefined;
  if (r === null || typeof r !== 'object') return [];
  const isJob = (x: unknown): x is { id: string; state: string; completed_by: unknown; result: unknown } =>
    typeof x === 'object' && x !== null && typeof (x as { id?: unknown }).id === 'string' && (x as { id: string }).id.startsWith('job_') && typeof (x as { state?: unknown }).state === 'string';
  if (entry.op === 'list' && Array.isArray(r.data)) return r.data.filter(isJob);
  if (entry.op === 'resolve') return isJob(r.job) ? [r.job] : [];
  if (entry.op === 'create' || entry.op === 'get' || entry.op === 'cancel' || entry.op === 'peek') return isJob(r) ? [r] : [];
  return [];
}

/** The compact form of a history entry for an excerpt. */
export function brief(entry: HistoryEntry): Record<string, unknown> {
  const r = entry.response as Record<string, unknown> | undefined;
  const job = (entry.op === 'resolve' ? r?.job : r) as Record<string, unknown> | undefined;
  return {
    h: entry.id, client: entry.client, owner: entry.owner, op: entry.op, req: `${entry.method} ${entry.path}`,
    ...(entry.key === undefined ? {} : { key: entry.key }),
    ...(entry.body === undefined ? {} : { body: entry.body }),
    sent: Math.round(entry.sentAt), recv: Math.round(entry.recvAt), status: entry.status ?? entry.outcome,
    ...(r?.code === undefined ? {} : { code: r.code }),
    ...(job?.id === undefined ? {} : { job: job.id, state: job.state, completed_by: job.completed_by, result: job.result }),
    ...(entry.op === 'resolve' && r?.state !== undefined ? { attempt_state: r.state } : {}),
    ...(ANSWER_OPS.has(entry.op) && r?.job_id !== undefined ? { job: r.job_id } : {}),
    ...(ANSWER_OPS.has(entry.op) && typeof r?.response_status === 'string' ? { response_status: r.response_status } : {}),
    ...(ANSWER_OPS.has(entry.op) && typeof r?.text === 'string' ? { text: r.text } : {}),
    ...(entry.replayed === true ? { replayed: true } : {}),
    ...(r?.stream !== undefined ? { stream: r.stream } : {}),
  };
}

/**
 * Checks one run. Never throws on odd data: anything it cannot make sense of
 * is itself reported.
 *
 * @example const report = checkRun(input); console.log(formatReport(report));
 */
export function checkRun(input: CheckInput): CheckReport {
  const violations: Violation[] = [];
  const notes: Record<string, number> = {};
  const note = (name: string, n = 1): void => {
    notes[name] = (notes[name] ?? 0) + n;
  };
  const add = (kind: ViolationKind, jobId: string | null, message: string, excerpt: readonly unknown[]): void => {
    violations.push({ kind, jobId, message, excerpt: excerpt.slice(0, 8) });
  };

  const { db } = input;
  const jobsById = new Map<string, DbJob>();
  const jobsByKey = new Map<string, DbJob[]>();
  for (const j of db.jobs) {
    jobsById.set(j.id, j);
    const k = `${j.owner_id}\u0000${j.idempotency_key}`;
    jobsByKey.set(k, [...(jobsByKey.get(k) ?? []), j]);
  }
  const attemptsByJob = new Map<string, DbAttempt[]>();
  const attemptsById = new Map<string, DbAttempt>();
  for (const a of db.attempts) {
    attemptsById.set(a.id, a);
    attemptsByJob.set(a.job_id, [...(attemptsByJob.get(a.job_id) ?? []), a]);
  }
  const historyByJob = new Map<string, HistoryEntry[]>();
  const historyByKey = new Map<string, HistoryEntry[]>();
  const remember = (map: Map<string, HistoryEntry[]>, k: string, e: HistoryEntry): void => {
    const list = map.get(k) ?? [];
    if (!list.includes(e)) list.push(e);
    map.set(k, list);
  };
  for (const e of input.history) {
    if (e.key !== undefined) remember(historyByKey, `${e.owner}\u0000${e.key}`, e);
    if (e.jobId !== undefined) remember(historyByJob, e.jobId, e);
    for (const j of jobsIn(e)) remember(historyByJob, j.id, e);
    const conflictJob = (e.response as { job_id?: unknown } | undefined)?.job_id;
    if (typeof conflictJob === 'string') remember(historyByJob, conflictJob, e);
    if (e.status !== null && e.status >= 500) note(`answers_${e.status}`);
    if (e.op === 'responses' || e.op === 'response_get') note(`ops_${e.op}`);
    if (e.outcome !== 'answered') note(`no_answer_${e.outcome}`);
  }
  const excerptOf = (jobId: string | null, extra: readonly unknown[] = []): unknown[] => {
    const hs = jobId === null ? [] : (historyByJob.get(jobId) ?? []);
    return [...extra, ...hs.slice(0, 8 - Math.min(extra.length, 4)).map(brief)];
  };

  // 1. One job per (owner, key); every id a client was told exists; 201 once; conflicts only for changed input.
  for (const [k, jobs] of jobsByKey) {
    if (jobs.length > 1) {
      add('duplicate_job', jobs[0]!.id, `${jobs.length} jobs for owner ${jobs[0]!.owner_id} key ${jobs[0]!.idempotency_key}: ${jobs.map((j) => j.id).join(', ')}`, (historyByKey.get(k) ?? []).map(brief));
    }
  }
  for (const [k, entries] of historyByKey) {
    const creates = entries.filter((e) => e.op === 'create' && e.status !== null);
    const stored = jobsByKey.get(k)?.[0];
    const toldIds = new Set<string>();
    let created = 0;
    for (const e of creates) {
      const r = e.response as { id?: unknown; code?: unknown; job_id?: unknown } | undefined;
      if ((e.status === 200 || e.status === 201) && typeof r?.id === 'string') {
        toldIds.add(r.id);
        if (e.status === 201) created++;
        if (stored === undefined) {
          add('job_missing', r.id, `client ${e.client} was told job ${r.id} for key ${e.key}, but no job exists for (${e.owner}, ${e.key})`, [brief(e)]);
        } else if (stored.id !== r.id) {
          // reported below as duplicate_job (the ids disagree)
        } else if (requestCanon(e.body) !== storedCanon(stored)) {
          add('missed_conflict', stored.id, `answered ${e.status} (same job) to a request whose body differs from the stored one`, excerptOf(stored.id, [brief(e), { stored: JSON.parse(storedCanon(stored)) }]));
        }
      } else if (e.status === 409 && r?.code === 'idempotency_key_reused') {
        if (stored === undefined) {
          add('job_missing', typeof r.job_id === 'string' ? r.job_id : null, `409 idempotency_key_reused for (${e.owner}, ${e.key}) but no such job exists`, [brief(e)]);
        } else if (requestCanon(e.body) === storedCanon(stored)) {
          add('bad_conflict', stored.id, `409 idempotency_key_reused although the request equals the stored one`, excerptOf(stored.id, [brief(e)]));
        }
      }
    }
    if (toldIds.size > 1 || (stored !== undefined && toldIds.size === 1 && !toldIds.has(stored.id))) {
      add('duplicate_job', stored?.id ?? [...toldIds][0] ?? null, `clients were told ${toldIds.size} different ids for one (owner, key) [${[...toldIds].join(', ')}]; stored: ${stored?.id ?? 'none'}`, creates.map(brief));
    }
    if (created > 1) {
      add('created_twice', stored?.id ?? null, `key ${creates[0]?.key} answered 201 Created ${created} times`, creates.filter((e) => e.status === 201).map(brief));
    }

    // The gateway endpoints: the job is named by Onejob-Job-Id (`response.job_id`); the request is the whole body.
    const gateway = entries.filter((e) => GATEWAY_OPS.has(e.op) && e.status !== null);
    if (gateway.length === 0) continue;
    const gwIds = new Set<string>();
    const boundBodies = new Map<string, HistoryEntry>();
    let fresh = 0;
    for (const e of gateway) {
      const r = e.response as { job_id?: unknown; code?: unknown } | undefined;
      if (r?.code === 'idempotency_key_reused' || typeof r?.job_id !== 'string') continue;
      gwIds.add(r.job_id);
      // Fingerprinted with its endpoint (CONTRACT §3: the same body; the route name is part of it; delivery is not).
      const c = gatewayIntent(e.op, e.body);
      if (!boundBodies.has(c)) boundBodies.set(c, e);
      if (e.status === 200 && e.replayed !== true) fresh++;
      if (stored === undefined) add('job_missing', r.job_id, `client ${e.client} was told job ${r.job_id} (Onejob-Job-Id) for key ${e.key}, but no job exists for (${e.owner}, ${e.key})`, [brief(e)]);
      else if (stored.owner_id !== e.owner) add('cross_owner', r.job_id, `owner ${e.owner} was told job ${r.job_id} of owner ${stored.owner_id}`, [brief(e)]);
    }
    if (gwIds.size > 1 || (stored !== undefined && gwIds.size === 1 && !gwIds.has(stored.id)) || (toldIds.size > 0 && gwIds.size > 0 && [...gwIds].some((id) => !toldIds.has(id)))) {
      add('duplicate_job', stored?.id ?? [...gwIds][0] ?? null, `gateway clients were told ${gwIds.size} different ids for one (owner, key) [${[...gwIds].join(', ')}]; stored: ${stored?.id ?? 'none'}`, gateway.map(brief));
    }
    if (boundBodies.size > 1) {
      add('missed_conflict', stored?.id ?? null, `one key was answered with its job for ${boundBodies.size} different bodies`, [...boundBodies.values()].map(brief));
    }
    if (fresh > 1) {
      add('created_twice', stored?.id ?? null, `key ${gateway[0]?.key} was answered ${fresh} times without Idempotent-Replayed (each claims to have created the job)`, gateway.filter((e) => e.status === 200 && e.replayed !== true).map(brief));
    }
    for (const e of gateway) {
      const r = e.response as { code?: unknown } | undefined;
      if (e.status === 409 && r?.code === 'idempotency_key_reused' && boundBodies.has(gatewayIntent(e.op, e.body))) {
        add('bad_conflict', stored?.id ?? null, `409 idempotency_key_reused although the body equals the one the key's job was answered for`, [brief(e), brief(boundBodies.get(gatewayIntent(e.op, e.body))!)]);
      }
    }
  }
  for (const e of input.history) {
    for (const j of jobsIn(e)) {
      const stored = jobsById.get(j.id);
      if (stored === undefined) add('job_missing', j.id, `client ${e.client} was shown job ${j.id}, which does not exist`, [brief(e)]);
      else if (stored.owner_id !== e.owner) add('cross_owner', j.id, `owner ${e.owner} was shown job ${j.id} of owner ${stored.owner_id}`, [brief(e)]);
    }
    if (e.op === 'peek' && e.status !== null && e.status < 300) {
      add('cross_owner', e.jobId ?? null, `owner ${e.owner} read another owner's job (${e.status}), expected 404`, [brief(e)]);
    }
  }

  // 2. At most one winner; the result is the winner's output.
  const resolvedResults = new Map<string, unknown[]>();
  const resolvedFailed = new Set<string>();
  for (const e of input.history) {
    if (e.op !== 'resolve' || e.attemptId === undefined) continue;
    const b = e.body as { state?: string; result?: unknown } | undefined;
    if (b?.state === 'succeeded') resolvedResults.set(e.attemptId, [...(resolvedResults.get(e.attemptId) ?? []), b.result]);
    if (b?.state === 'failed') resolvedFailed.add(e.attemptId);
  }
  const doubtReplies = repliesByAttempt((input.doubt?.submits ?? []).filter((s) => s.fake === 'doubt'));
  // Trust (CONTRACT §15): no result is another attempt's work; nothing settled from outside but doubt.
  const trust = checkTrust(db.jobs, db.attempts, db.events, doubtReplies);
  for (const f of trust.findings) add(f.kind, f.jobId, f.message, excerptOf(f.jobId, [f.detail]));
  // Creates of the doubt fake that chose no scripted reply: the fake echoes the last user message.
  const doubtEchoes = new Set((input.doubt?.submits ?? []).filter((s) => s.fake === 'doubt' && s.replies.some((r) => r === null || r === undefined)).map((s) => s.attempt_id));
  const callsByKeyAfter = new Map<string, ProviderCall[]>();
  const callsByJobAfter = new Map<string, ProviderCall[]>();
  for (const c of input.callsAfter) {
    if (c.idempotencyKey === null) continue;
    callsByKeyAfter.set(c.idempotencyKey, [...(callsByKeyAfter.get(c.idempotencyKey) ?? []), c]);
    const m = /^(job_[^:]+):\d+$/.exec(c.idempotencyKey);
    if (m !== null) callsByJobAfter.set(m[1]!, [...(callsByJobAfter.get(m[1]!) ?? []), c]);
  }
  for (const job of db.jobs) {
    const attempts = attemptsByJob.get(job.id) ?? [];
    const winners = attempts.filter((a) => a.state === 'succeeded');
    if (winners.length > 1) {
      add('two_winners', job.id, `${winners.length} succeeded attempts: ${winners.map((a) => `#${a.number} ${a.id}`).join(', ')}`, excerptOf(job.id));
      continue;
    }
    if (job.state === 'succeeded') {
      const winner = job.completed_by === null ? undefined : attemptsById.get(job.completed_by);
      if (winner === undefined || winner.job_id !== job.id || winner.state !== 'succeeded') {
        add('two_winners', job.id, `job succeeded with completed_by ${job.completed_by}, which is not its succeeded attempt (${winners[0]?.id ?? 'none'})`, excerptOf(job.id));
        continue;
      }
      // A tool job's result is the tool server's, not a fake provider's: chaos/tool-checker.ts checks it against the server's log.
      if (job.route.startsWith('mcp:')) continue;
      const candidates: { from: string; ok: boolean }[] = [];
      for (const given of resolvedResults.get(winner.id) ?? []) candidates.push({ from: 'resolve', ok: canon(given) === canon(job.result) });
      // Work the doubt fake did for the winner (a response, a task, a stored completion: chaos/doubt-checker.ts).
      for (const text of doubtReplies.get(winner.id) ?? []) {
        const r = job.result as { content?: unknown; provider?: unknown } | null;
        candidates.push({ from: 'doubt fake', ok: r !== null && typeof r === 'object' && sameOutput(r.content, text) && r.provider === winner.provider });
      }
      if (doubtEchoes.has(winner.id)) {
        const messages = (job.input as { messages?: { role?: string; content?: unknown }[] } | null)?.messages ?? [];
        const echo = [...messages].reverse().find((m) => m.role === 'user')?.content;
        const r = job.result as { content?: unknown; provider?: unknown } | null;
        candidates.push({ from: 'doubt fake echo', ok: typeof echo === 'string' && r !== null && typeof r === 'object' && r.content === echo && r.provider === winner.provider });
      }
      for (const call of callsByKeyAfter.get(`${job.id}:${winner.number}`) ?? []) {
        if (call.result !== 'replied' && call.result !== 'raw') continue;
        const r = job.result as { content?: unknown; provider?: unknown } | null;
        candidates.push({ from: `call ${call.provider}#${call.seq}`, ok: r !== null && typeof r === 'object' && sameOutput(r.content, fakeReplyText(call)) && r.provider === winner.provider });
      }
      if (!candidates.some((c) => c.ok) && !trust.foreignJobs.has(job.id)) {
        const replies = (callsByKeyAfter.get(`${job.id}:${winner.number}`) ?? []).map((c) => ({ call: `${c.provider}#${c.seq}`, result: c.result, reply: fakeReplyText(c) }));
        add('result_mismatch', job.id, `result ${canon(job.result)} is not the output of winner #${winner.number} ${winner.id} (candidates: ${candidates.map((c) => c.from).join(', ') || 'none'})`, excerptOf(job.id, [{ provider_replies: replies, resolved_with: resolvedResults.get(winner.id) ?? [] }]));
      }
    } else if (job.completed_by !== null || winners.length > 0) {
      add('two_winners', job.id, `job is ${job.state} but completed_by=${job.completed_by} and ${winners.length} attempt(s) succeeded`, excerptOf(job.id));
    }
  }

  // 3. No result changed after the job became terminal (client observations over time, then the database).
  const observations = new Map<string, Observation[]>();
  for (const e of input.history) {
    for (const j of jobsIn(e)) {
      const o: Observation = { entry: e, jobId: j.id, state: j.state, completedBy: (j.completed_by as string | null) ?? null, result: canon(j.result) };
      observations.set(j.id, [...(observations.get(j.id) ?? []), o]);
    }
  }
  for (const [jobId, obs] of observations) {
    const terminal = obs.filter((o) => TERMINAL_JOB.has(o.state)).sort((a, b) => a.entry.recvAt - b.entry.recvAt);
    const first = terminal[0];
    if (first === undefined) continue;
    const same = (o: { state: string; completedBy: string | null; result: string }): boolean =>
      o.state === first.state && o.completedBy === first.completedBy && o.result === first.result;
    const bad = obs.find((o) => o !== first && (TERMINAL_JOB.has(o.state) ? !same(o) : o.entry.sentAt > first.entry.recvAt));
    if (bad !== undefined) {
      add('result_changed', jobId, `job was ${first.state} (completed_by ${first.completedBy}, result ${first.result}) at h${first.entry.id}, later seen ${bad.state} (completed_by ${bad.completedBy}, result ${bad.result}) at h${bad.entry.id}`, [brief(first.entry), brief(bad.entry)]);
      continue;
    }
    const stored = jobsById.get(jobId);
    if (stored !== undefined && !same({ state: stored.state, completedBy: stored.completed_by, result: canon(stored.result) })) {
      add('result_changed', jobId, `job was seen ${first.state} (result ${first.result}) at h${first.entry.id}, the database now says ${stored.state} (result ${canon(stored.result)})`, [brief(first.entry), { stored: { state: stored.state, completed_by: stored.completed_by, result: stored.result } }]);
    }
  }

  // 4. No attempt started while another of its job was starting or unknown (event log, by id).
  const eventsByJob = new Map<string, DbEvent[]>();
  for (const ev of [...db.events].sort((a, b) => a.id - b.id)) eventsByJob.set(ev.job_id, [...(eventsByJob.get(ev.job_id) ?? []), ev]);
  const hedged = new Set(input.hedgedRoutes);
  const ATTEMPT_END = new Set(['attempt.succeeded', 'attempt.failed', 'attempt.cancelled', 'attempt.superseded']);
  for (const [jobId, events] of eventsByJob) {
    const job = jobsById.get(jobId);
    const state = new Map<string, string>();
    // One transaction's events share one timestamp; the store writes a failover's
    // `attempt.started` before the failure that caused it, so within a batch the
    // endings are applied first.
    const batches: DbEvent[][] = [];
    for (const ev of events) {
      const last = batches[batches.length - 1];
      if (last !== undefined && last[0]!.at === ev.at) last.push(ev);
      else batches.push([ev]);
    }
    for (const batch of batches) {
      const ordered = [...batch.filter((e) => ATTEMPT_END.has(e.type)), ...batch.filter((e) => !ATTEMPT_END.has(e.type))];
      for (const ev of ordered) {
        const a = ev.attempt_id;
        if (a === null) continue;
        if (ev.type === 'attempt.started') {
          const kind = String(ev.data.kind ?? attemptsById.get(a)?.kind ?? '?');
          const blockers = [...state].filter(([other, s]) => other !== a && (s === 'starting' || s === 'unknown'));
          const running = [...state].filter(([other, s]) => other !== a && s === 'running');
          const hedgeOk = job !== undefined && hedged.has(job.route) && (kind === 'hedge' || kind === 'manual');
          if (blockers.length > 0 || (running.length > 0 && !hedgeOk)) {
            const why = [...blockers, ...(hedgeOk ? [] : running)].map(([other, s]) => `${other} was ${s}`).join(', ');
            add('attempt_overlap', jobId, `attempt ${a} (${kind}) started at event ${ev.id} while ${why}`, excerptOf(jobId, [{ events: events.filter((x) => x.id <= ev.id).slice(-8).map((x) => `${x.id} ${x.type} ${x.attempt_id ?? ''} ${JSON.stringify(x.data)}`) }]));
          }
          state.set(a, 'starting');
        } else if (ev.type === 'attempt.running') {
          if (state.get(a) === 'starting' || !state.has(a)) state.set(a, 'running');
        } else if (ev.type === 'attempt.unknown') {
          state.set(a, 'unknown');
        } else if (ATTEMPT_END.has(ev.type)) {
          const before = state.get(a);
          const actor = String(ev.data.actor ?? '');
          const code = (ev.data.error as { code?: unknown } | undefined)?.code;
          // CONTRACT §2: `unknown` may later become `failed` by a late answer, but only a definite one (a 429,
          // a 4xx refusal: provably not executed); the provider-call check below holds every failed attempt to that.
          if (ev.type === 'attempt.failed' && actor !== 'api' && typeof code === 'string' && AMBIGUOUS_CODES.has(code)) {
            const how = before === 'unknown' ? `went unknown → failed with the ambiguous code ${code}` : `recorded failed with the ambiguous code ${code}`;
            add('timeout_failed', jobId, `attempt ${a} ${how} by ${actor} (event ${ev.id}); only a definite answer or a resolve may decide it`, excerptOf(jobId));
          }
          state.set(a, 'done');
        }
      }
    }
  }

  // 5. Provider executions per job never exceed its attempts; each attempt at most once, on its own provider.
  const callsByJob = new Map<string, ProviderCall[]>();
  for (const c of input.callsBefore) {
    const m = c.idempotencyKey === null ? null : /^(job_[^:]+):(\d+)$/.exec(c.idempotencyKey);
    if (m === null) {
      note('calls_without_onejob_key');
      continue;
    }
    callsByJob.set(m[1]!, [...(callsByJob.get(m[1]!) ?? []), c]);
  }
  for (const [jobId, calls] of callsByJob) {
    const attempts = attemptsByJob.get(jobId) ?? [];
    const callList = calls.map((c) => ({ call: `${c.provider}#${c.seq}`, key: c.idempotencyKey, result: c.result, status: c.status }));
    if (calls.length > attempts.length) {
      add('extra_execution', jobId, `${calls.length} provider calls for a job with ${attempts.length} attempt(s)`, excerptOf(jobId, [{ calls: callList }]));
      continue;
    }
    const perKey = new Map<string, number>();
    for (const c of calls) perKey.set(c.idempotencyKey!, (perKey.get(c.idempotencyKey!) ?? 0) + 1);
    for (const [key, n] of perKey) {
      const number = Number(key.slice(key.lastIndexOf(':') + 1));
      const attempt = attempts.find((a) => a.number === number);
      if (n > 1) add('extra_execution', jobId, `attempt ${key} was executed ${n} times`, excerptOf(jobId, [{ calls: callList }]));
      else if (attempt === undefined) add('extra_execution', jobId, `a provider executed ${key}, but the job has no attempt #${number}`, excerptOf(jobId, [{ calls: callList }]));
      else if (calls.some((c) => c.idempotencyKey === key && c.provider !== attempt.provider)) {
        add('extra_execution', jobId, `attempt ${key} is for ${attempt.provider} but was executed by another provider`, excerptOf(jobId, [{ calls: callList }]));
      }
    }
  }

  // 6. No timeout ever `failed`: a failed attempt needs a definite refusal, an error before sending, or a resolve.
  for (const a of db.attempts) {
    if (a.state !== 'failed' || resolvedFailed.has(a.id)) continue;
    const code = a.error?.code;
    if (typeof code === 'string' && AMBIGUOUS_CODES.has(code)) {
      add('timeout_failed', a.job_id, `attempt ${a.id} (#${a.number}) is failed with the ambiguous code ${code}`, excerptOf(a.job_id, [{ attempt: a }]));
      continue;
    }
    const calls = callsByKeyAfter.get(`${a.job_id}:${a.number}`) ?? [];
    // CONTRACT §7: an error event mid-stream is the provider's own verdict (the attempt is `failed`); §5: a reply
    // that breaks the route's contract is a `failed` attempt (`contract_violation`, checked on its own below).
    const contractFailed = code === 'contract_violation';
    const maybeExecuted = calls.filter((c) => !(c.result === 'rejected' || c.result === 'stream-error' || (c.result === 'error' && DEFINITE_FAILURE_STATUS(c.status)) || (contractFailed && (c.result === 'replied' || c.result === 'raw'))));
    const failedByApi = (eventsByJob.get(a.job_id) ?? []).some((ev) => ev.attempt_id === a.id && ev.type === 'attempt.failed' && ev.data.actor === 'api');
    if (maybeExecuted.length > 0 && !failedByApi) {
      add('timeout_failed', a.job_id, `attempt ${a.id} (#${a.number}) is failed (${code}) but the provider may have executed it (${maybeExecuted.map((c) => `${c.result}${c.status === null ? '' : ` ${c.status}`}`).join(', ')})`, excerptOf(a.job_id, [{ attempt: a, calls: maybeExecuted.map((c) => ({ seq: c.seq, result: c.result, status: c.status, behaviour: c.behaviour })) }]));
    }
  }

  // 8. Streams (CONTRACT §7): one stream owner at a time per job, and the winner is the owner.
  const DEFINITE_END = new Set(['failed', 'cancelled', 'superseded']);
  for (const [jobId, events] of eventsByJob) {
    /** Attempt id → its last state from the event log ('done:<state>' once ended). */
    const ended = new Map<string, string>();
    let holder: string | null = null;
    const claimed = new Set<string>();
    for (const ev of events) {
      const a = ev.attempt_id;
      if (a === null) continue;
      if (ev.type === 'attempt.stream_claimed') {
        const holderEnd = holder === null ? undefined : ended.get(holder);
        if (holder !== null && holder !== a && (holderEnd === undefined || !DEFINITE_END.has(holderEnd))) {
          add('stream_owner', jobId, `attempt ${a} claimed the job's stream (event ${ev.id}) while attempt ${holder} held it and had not ended definitely (${holderEnd ?? 'still active'})`, excerptOf(jobId, [{ events: events.filter((x) => x.id <= ev.id).slice(-8).map((x) => `${x.id} ${x.type} ${x.attempt_id ?? ''}`) }]));
        }
        note(holder === null ? 'stream_claims' : 'stream_claims_after_failover');
        holder = a;
        claimed.add(a);
      } else if (ev.type.startsWith('attempt.') && ['succeeded', 'failed', 'cancelled', 'superseded', 'unknown'].includes(ev.type.slice(8))) {
        const st = ev.type.slice(8);
        ended.set(a, st);
        if (st === 'succeeded' && holder !== null && holder !== a) {
          const holderEnd = ended.get(holder);
          if (holderEnd === undefined || !DEFINITE_END.has(holderEnd)) {
            add('stream_owner', jobId, `attempt ${a} won the job (event ${ev.id}) while attempt ${holder} held its stream (${holderEnd ?? 'still active'})`, excerptOf(jobId, [{ events: events.filter((x) => x.id <= ev.id).slice(-8).map((x) => `${x.id} ${x.type} ${x.attempt_id ?? ''}`) }]));
          }
        }
      }
    }
    const job = jobsById.get(jobId);
    const stored = job?.stream_attempt_id ?? null;
    if (stored !== null && !claimed.has(stored)) {
      add('stream_owner', jobId, `jobs.stream_attempt_id is ${stored}, which never claimed the stream in the event log`, excerptOf(jobId));
    } else if (stored !== null && stored !== holder) {
      add('stream_owner', jobId, `jobs.stream_attempt_id is ${stored}, but the last claim in the event log is ${holder}`, excerptOf(jobId));
    }
  }

  // 9. What a gateway client received: one attempt's text, never a mix; an ended stream is the stored result.
  for (const e of input.history) {
    if (!ANSWER_OPS.has(e.op)) continue;
    if (e.resume !== undefined) continue; // a piece of a resumed stream: checked whole below
    const r = e.response as { job_id?: unknown; text?: unknown; response_status?: unknown; stream?: { text: string; end: string; error_code: string | null; bad_sequence?: string | null } } | undefined;
    const jobId = typeof r?.job_id === 'string' ? r.job_id : e.op === 'response_get' ? (e.jobId ?? null) : null;
    const job = jobId === null ? undefined : jobsById.get(jobId);
    if (e.op === 'response_get' && job !== undefined) {
      // Polling one's own Response: never another owner's, never 404 while its job exists.
      if (e.status === 200 && job.owner_id !== e.owner) add('cross_owner', jobId, `owner ${e.owner} was shown Response resp_${jobId} of owner ${job.owner_id}`, [brief(e)]);
      else if (e.status === 404 && job.owner_id === e.owner) add('job_missing', jobId, `client ${e.client} polled its Response resp_${jobId} and was answered 404, but the job exists`, excerptOf(jobId, [brief(e)]));
    }
    if (e.status !== 200) continue;
    if (r?.stream === undefined && typeof r?.response_status === 'string') {
      // A Response: `queued` / `in_progress` carry no answer yet; a final status must be the job's state.
      const expected = RESPONSE_STATE[r.response_status];
      note(`responses_${r.response_status}`);
      if (expected === undefined) continue;
      if (job === undefined || job.state !== expected) {
        add('answer_mismatch', jobId, `client ${e.client} was shown a Response ${r.response_status}, but the job is ${job?.state ?? 'missing'}`, excerptOf(jobId, [brief(e)]));
        continue;
      }
      if (expected !== 'succeeded') continue;
    }
    if (r?.stream === undefined) {
      if (typeof r?.text !== 'string') continue;
      note('gateway_answers');
      if (job === undefined || job.state !== 'succeeded' || !sameText(r.text, answerTextOf(job.result))) {
        add('answer_mismatch', jobId, `client ${e.client} was answered ${JSON.stringify(r.text)}, but the job is ${job?.state ?? 'missing'} with result ${canon(job?.result ?? null)}`, excerptOf(jobId, [brief(e)]));
      }
      continue;
    }
    const st = r.stream;
    note(`streams_${st.end}${st.end !== 'done' && st.text !== '' ? '_after_text' : ''}`);
    if (typeof st.bad_sequence === 'string') {
      add('stream_end', jobId, `a Responses stream of client ${e.client} numbered its events out of order (event index:sequence_number ${st.bad_sequence})`, excerptOf(jobId, [brief(e)]));
    }
    if (st.end === 'garbled' || (st.end === 'eof' && e.outcome === 'answered')) {
      add('stream_end', jobId, `a stream of client ${e.client} ${st.end === 'garbled' ? 'carried an event that is not JSON' : 'ended with neither its terminator nor event: error'}`, excerptOf(jobId, [brief(e)]));
      continue;
    }
    if (st.end === 'done') {
      if (job === undefined || job.state !== 'succeeded' || !sameText(st.text, answerTextOf(job.result))) {
        add('answer_mismatch', jobId, `a stream of client ${e.client} ended complete with ${JSON.stringify(st.text)}, but the job is ${job?.state ?? 'missing'} with result ${canon(job?.result ?? null)}`, excerptOf(jobId, [brief(e)]));
      }
      continue;
    }
    // Broken off (event: error, or the connection): not an answer, but its text is the start of one attempt's output.
    if (st.text === '' || jobId === null) continue;
    const outputs = [
      ...(job?.state === 'succeeded' ? [answerTextOf(job.result)] : []),
      ...(callsByJobAfter.get(jobId) ?? []).map((c) => fakeReplyText(c)),
    ];
    if (!outputs.some((out) => out.startsWith(st.text))) {
      add('answer_mismatch', jobId, `a stream of client ${e.client} broke off (${st.end}${st.error_code === null ? '' : ` ${st.error_code}`}) after ${JSON.stringify(st.text)}, which begins no single attempt's output`, excerptOf(jobId, [brief(e), { outputs }]));
    }
  }

  // 9b. Streams resumed across reconnects: assembled, they are the stored result (chaos/resume-check.ts).
  const winnerOf = (jobId: string): number | null => {
    const by = jobsById.get(jobId)?.completed_by;
    return (by === null || by === undefined ? undefined : attemptsById.get(by))?.number ?? null;
  };
  const outputsOf = (jobId: string, number: number): string[] => [
    ...(winnerOf(jobId) === number ? [answerTextOf(jobsById.get(jobId)!.result)] : []),
    ...(callsByKeyAfter.get(`${jobId}:${number}`) ?? []).map((c) => fakeReplyText(c)),
  ];
  for (const v of checkResumedStreams({ history: input.history, jobsById, outputsOf, winnerOf, resultText: answerTextOf, sameText, note })) add('resume_mismatch', v.jobId, v.message, v.entries.map(brief));

  // 10. Contracts: a contract route's winner conforms; a conforming provider output never fails as a violation.
  const contractRoutes = new Set(input.contractRoutes ?? []);
  for (const a of db.attempts) {
    const job = jobsById.get(a.job_id);
    if (job === undefined) continue;
    const code = a.error?.code;
    if (a.state === 'failed' && code === 'contract_violation') {
      const calls = (callsByKeyAfter.get(`${a.job_id}:${a.number}`) ?? []).filter((c) => c.result === 'replied' || c.result === 'raw');
      const conforming = calls.filter((c) => {
        try {
          return passesSummaryContract(JSON.parse(fakeReplyText(c)));
        } catch {
          return false;
        }
      });
      if (!contractRoutes.has(job.route) || (calls.length > 0 && conforming.length === calls.length)) {
        add('contract_verdict', a.job_id, `attempt ${a.id} (#${a.number}) failed as contract_violation ${contractRoutes.has(job.route) ? `although its provider replied ${fakeReplyText(conforming[0]!)}` : `on route ${job.route}, which has no contract`}`, excerptOf(a.job_id, [{ attempt: a }]));
      }
    }
  }
  for (const job of db.jobs) {
    if (!contractRoutes.has(job.route) || job.state !== 'succeeded' || job.completed_by === null) continue;
    if (resolvedResults.has(job.completed_by)) continue; // a resolve's result is taken as given (CONTRACT §3)
    const content = (job.result as { content?: unknown } | null)?.content;
    if (!passesSummaryContract(content)) {
      add('contract_verdict', job.id, `job on contract route ${job.route} succeeded with content ${canon(content ?? null)}, which its schema refuses`, excerptOf(job.id));
    }
  }

  // 7. Liveness: after the faults stopped, everything reaches an end, and nothing runs unowned.
  if (input.liveness !== undefined) {
    const { boundMs, rescueSlackMs } = input.liveness;
    const quiet = Date.parse(input.liveness.quietSince);
    const taken = db.takenAt === undefined ? Number.NaN : Date.parse(db.takenAt);
    if (Number.isNaN(quiet) || Number.isNaN(taken)) {
      add('stuck_job', null, `the liveness check has no usable times (quietSince ${input.liveness.quietSince}, snapshot ${db.takenAt ?? 'none'})`, []);
    } else {
      note('liveness_window_ms', Math.max(0, taken - quiet));
      for (const job of db.jobs) {
        if (job.state !== 'queued' && job.state !== 'running') continue;
        const created = job.created_at === undefined ? Number.NaN : Date.parse(job.created_at);
        const since = Number.isNaN(created) ? quiet : Math.max(quiet, created);
        if (taken - since > boundMs) {
          const attempts = (attemptsByJob.get(job.id) ?? []).map((a) => ({ id: a.id, number: a.number, state: a.state, lease_owner: a.lease_owner ?? null, lease_expires_at: a.lease_expires_at ?? null }));
          add('stuck_job', job.id, `job is still ${job.state} ${Math.round((taken - since) / 1000)} s after the faults stopped (or it was created); every job must be terminal or unknown within ${Math.round(boundMs / 1000)} s`, excerptOf(job.id, [{ attempts }]));
        }
      }
      for (const a of db.attempts) {
        if (a.state !== 'starting' && a.state !== 'running') continue;
        const owner = a.lease_owner ?? null;
        const expires = a.lease_expires_at === undefined || a.lease_expires_at === null ? Number.NaN : Date.parse(a.lease_expires_at);
        const detail = { attempt: a.id, number: a.number, state: a.state, lease_owner: owner, lease_expires_at: a.lease_expires_at ?? null };
        if (owner === null) {
          if (a.state === 'running') {
            add('ownerless_attempt', a.job_id, `attempt ${a.id} (#${a.number}) is running with no lease: nobody will ever settle or rescue it`, excerptOf(a.job_id, [detail]));
            continue;
          }
          // Unclaimed `starting` (a failover, a manual attempt): an executor must claim it in time.
          const started = a.started_at === undefined ? Number.NaN : Date.parse(a.started_at);
          const since = Number.isNaN(started) ? quiet : Math.max(quiet, started);
          if (taken - since > boundMs) add('ownerless_attempt', a.job_id, `attempt ${a.id} (#${a.number}) has waited unclaimed for ${Math.round((taken - since) / 1000)} s after the faults stopped`, excerptOf(a.job_id, [detail]));
        } else if (!Number.isNaN(expires) && taken - Math.max(expires, quiet) > rescueSlackMs) {
          add('ownerless_attempt', a.job_id, `attempt ${a.id} (#${a.number}) is ${a.state} under a lease of ${owner} that expired ${Math.round((taken - expires) / 1000)} s before the snapshot and was never rescued`, excerptOf(a.job_id, [detail]));
        }
      }
    }
  }

  // 11. Doubt (CONTRACT §11): askable doubt ends within its window after the faults stopped; no work is sent twice.
  if (input.doubt !== undefined && input.liveness !== undefined && db.takenAt !== undefined) {
    const doubt = checkDoubt(input.doubt, db.attempts, input.liveness.quietSince, db.takenAt);
    for (const f of doubt.findings) add(f.kind, f.jobId, f.message, excerptOf(f.jobId, [f.detail]));
    for (const [k, n] of Object.entries(doubt.notes)) note(k, n);
  }

  for (const j of db.jobs) note(`jobs_${j.state}`);
  note('superseded_attempts', db.attempts.filter((a) => a.state === 'superseded').length);
  return { operations: input.history.length, faults: input.faults.length, violations, notes };
}

/**
 * The report as text: each violation with its excerpt, the notes, then exactly
 * one last line `operations: N, faults: M, violations: V`.
 */
export function formatReport(report: CheckReport): string {
  const lines: string[] = [];
  for (const [i, v] of report.violations.entries()) {
    lines.push(`VIOLATION ${i + 1} [${v.kind}] job ${v.jobId ?? '-'}: ${v.message}`);
    for (const x of v.excerpt) lines.push(`    ${JSON.stringify(x)}`);
  }
  const notes = Object.entries(report.notes).sort(([a], [b]) => a.localeCompare(b));
  if (notes.length > 0) lines.push(`notes: ${notes.map(([k, n]) => `${k}=${n}`).join(' ')}`);
  lines.push(`operations: ${report.operations}, faults: ${report.faults}, violations: ${report.violations.length}`);
  return lines.join('\n');
}

export type { CheckInput } from './records.ts';
