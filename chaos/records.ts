/**
 * The records a chaos run leaves behind, shared by the workload (which writes
 * histories), the fault scheduler (faults), the snapshot (database rows and
 * provider call logs) and the checker (which reads all of them).
 *
 * Everything is plain JSON so a run directory can be checked again offline:
 * `node --import tsx chaos/check.ts tmp/chaos/<run>`.
 */

import type { DoubtInput } from './doubt-checker.ts';

/** What a client meant by a request. */
export type OpKind =
  | 'create'
  | 'get'
  | 'list'
  | 'attempts'
  | 'manual'
  | 'resolve'
  | 'cancel'
  | 'peek'
  /** `POST /v1/chat/completions` (streamed or not). */
  | 'chat'
  /** `POST /v1/messages` (streamed or not). */
  | 'messages'
  /** `POST /v1/responses` (plain, streamed, or background). */
  | 'responses'
  /** `GET /v1/responses/{id}` (polling a background Response). */
  | 'response_get';

/**
 * What a client read from an SSE answer (`response.stream` of a `chat` /
 * `messages` / `responses` entry): the text deltas in order
 * (`response.output_text.delta` for responses) and how the stream ended:
 * `done` (`data: [DONE]` / `message_stop` / `response.completed`), `error`
 * (`event: error` with its `code`, or `response.failed`: `response_failed`),
 * `eof` (the body ended, or broke off, with neither), `garbled` (an event
 * that is not JSON).
 */
export interface StreamRecord {
  readonly text: string;
  readonly end: 'done' | 'error' | 'eof' | 'garbled';
  readonly error_code: string | null;
  /** Events received (comments not counted). */
  readonly events: number;
  /** `: keep-alive` comments received. */
  readonly keepalives: number;
  /**
   * Responses streams only: the first event whose `sequence_number` was not
   * the one expected (0, 1, 2, … in order), as `index:got`; null when all were.
   */
  readonly bad_sequence?: string | null;
  /**
   * The SSE `id:` of every event with data, in order (`''` for an event
   * without one); recorded by the resuming clients (chaos/resuming-stream.ts).
   */
  readonly ids?: readonly string[];
}

/**
 * A connection that resumed a stream (chaos/resuming-stream.ts): the
 * connection before it in the same client's chain, and the cursor it sent.
 */
export interface ResumeRecord {
  /** The history id of the previous connection of the chain. */
  readonly of: number;
  /** `Last-Event-ID` sent, or null when `starting_after` was. */
  readonly last_event_id: string | null;
  /** `starting_after` sent (`GET /v1/responses/{id}?stream=true`), or null. */
  readonly starting_after: number | null;
  /** Where it was sent: `lb` or the API process's name. */
  readonly via: string;
}

/**
 * One request a client sent and what it was told (one JSON line in `history.jsonl`).
 * `status` is null when no answer arrived: `outcome` says why.
 */
export interface HistoryEntry {
  /** 1, 2, … in order of completion across all clients. */
  readonly id: number;
  readonly client: string;
  readonly owner: string;
  readonly op: OpKind;
  readonly method: string;
  readonly path: string;
  /** The Idempotency-Key sent, if any. */
  readonly key?: string | undefined;
  /** The job this request was about, when the client knew it. */
  readonly jobId?: string | undefined;
  /** The attempt this request was about (resolve). */
  readonly attemptId?: string | undefined;
  /** The JSON body sent. */
  readonly body?: unknown;
  /** Milliseconds since the run started: sent, and answered (or given up). */
  readonly sentAt: number;
  readonly recvAt: number;
  readonly status: number | null;
  /** `dropped`: the client closed the stream itself, mid-answer, to resume it (chaos/resuming-stream.ts). */
  readonly outcome: 'answered' | 'timeout' | 'network' | 'dropped';
  /** The parsed response body (JSON), when there was one. */
  readonly response?: unknown;
  /** The `Idempotent-Replayed` header was `true`. */
  readonly replayed?: boolean | undefined;
  /** Why no answer arrived. */
  readonly error?: string | undefined;
  /** Set when this connection resumed an earlier one's stream. */
  readonly resume?: ResumeRecord | undefined;
}

/** One injected fault (one JSON line in `faults.jsonl`). */
export interface FaultRecord {
  readonly at: number;
  readonly kind: string;
  readonly target: string;
  readonly detail?: string | undefined;
}

/** A `jobs` row as the checker needs it. */
export interface DbJob {
  readonly owner_id: string;
  readonly id: string;
  readonly idempotency_key: string;
  readonly route: string;
  readonly input: unknown;
  readonly metadata: unknown;
  readonly state: string;
  readonly version: number;
  readonly completed_by: string | null;
  readonly result: unknown;
  readonly error: unknown;
  /** ISO time (database clock); absent in runs recorded before the liveness check. */
  readonly created_at?: string;
  /** The attempt holding the job's stream (CONTRACT §7); absent in runs recorded before streams. */
  readonly stream_attempt_id?: string | null;
}

/** An `attempts` row as the checker needs it. */
export interface DbAttempt {
  readonly owner_id: string;
  readonly id: string;
  readonly job_id: string;
  readonly number: number;
  readonly provider: string;
  readonly kind: string;
  readonly state: string;
  readonly error: { code?: string } | null;
  /** ISO times (database clock) and the lease; absent in runs recorded before the liveness check. */
  readonly started_at?: string;
  readonly lease_owner?: string | null;
  readonly lease_expires_at?: string | null;
  /** Doubt (CONTRACT §11; absent in runs recorded before it): ISO times, the provider's id, who ended the doubt. */
  readonly unknown_at?: string | null;
  readonly finished_at?: string | null;
  readonly provider_request_id?: string | null;
  readonly resolved_by?: string | null;
}

/** A `job_events` row. */
export interface DbEvent {
  readonly id: number;
  readonly owner_id: string;
  readonly job_id: string;
  readonly attempt_id: string | null;
  readonly type: string;
  readonly data: Record<string, unknown>;
  /** ISO time. */
  readonly at: string;
}

/** One call a fake provider received (a subset of its `GET /calls` record). */
export interface ProviderCall {
  /** The configured provider name whose traffic reaches this fake (`p1`, `p2`). */
  readonly provider: string;
  readonly seq: number;
  readonly idempotencyKey: string | null;
  readonly jobId: string | null;
  readonly body: unknown;
  readonly behaviour: { readonly reply?: unknown } & Record<string, unknown> | null;
  readonly result: string;
  readonly status: number | null;
}

/** The database, read after the provider logs (so every logged call has its attempt row). */
export interface DbSnapshot {
  /** The database's clock when the snapshot was read (ISO), for the liveness check. */
  readonly takenAt?: string;
  readonly jobs: readonly DbJob[];
  readonly attempts: readonly DbAttempt[];
  readonly events: readonly DbEvent[];
}

/** Everything the checker reads. */
export interface CheckInput {
  readonly history: readonly HistoryEntry[];
  readonly faults: readonly FaultRecord[];
  readonly db: DbSnapshot;
  /** Provider calls read before the database: each has an attempt row in `db`. */
  readonly callsBefore: readonly ProviderCall[];
  /** Provider calls read after the database: the final word on each call's outcome. */
  readonly callsAfter: readonly ProviderCall[];
  /** Routes that allow hedges (a second attempt beside a running one). */
  readonly hedgedRoutes: readonly string[];
  /** Routes with the chaos contract (`{"summary": string}`); absent in runs recorded before contracts. */
  readonly contractRoutes?: readonly string[] | undefined;
  /** The liveness check's inputs; without them it is not run. */
  readonly liveness?: LivenessInput | undefined;
  /** The doubt rules' inputs (chaos/doubt-checker.ts); without them they are not run. */
  readonly doubt?: DoubtInput | undefined;
}

/** When the faults stopped, and how long a job may take to reach an end after that. */
export interface LivenessInput {
  /** The database's clock when the last fault was healed (ISO). */
  readonly quietSince: string;
  /**
   * How long after `max(quietSince, created_at)` every job must be terminal
   * or `unknown`: its deadlines (provider timeout, lease, rescue interval)
   * over the whole chain.
   */
  readonly boundMs: number;
  /** How long past its expiry a lease of a `starting`/`running` attempt may wait for the rescuer. */
  readonly rescueSlackMs: number;
}
