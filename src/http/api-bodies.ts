/**
 * Domain records → API bodies (snake_case, ISO timestamps), CONTRACT §3.
 */
import type { Attempt, Job, RecordedError } from '../core/types.ts';

/** An attempt as the API shows it. */
export interface AttemptBody {
  id: string;
  job_id: string;
  number: number;
  provider: string;
  kind: string;
  state: string;
  started_at: string;
  deadline_at: string | null;
  finished_at: string | null;
  error: RecordedError | null;
}

/** A job as the API shows it. */
export interface JobBody {
  id: string;
  idempotency_key: string;
  route: string;
  input: unknown;
  metadata: Record<string, unknown> | null;
  providers: string[];
  state: string;
  version: number;
  completed_by: string | null;
  result: unknown;
  error: RecordedError | null;
  attempts: AttemptBody[];
  skipped: { provider: string; reason: string }[];
  created_at: string;
  updated_at: string;
}

/** The API body of an attempt. */
export function attemptBody(a: Attempt): AttemptBody {
  return {
    id: a.id,
    job_id: a.jobId,
    number: a.number,
    provider: a.provider,
    kind: a.kind,
    state: a.state,
    started_at: a.startedAt.toISOString(),
    deadline_at: a.deadlineAt?.toISOString() ?? null,
    finished_at: a.finishedAt?.toISOString() ?? null,
    error: a.error,
  };
}

/** The API body of a job with its attempts (oldest first). */
export function jobBody(j: Job & { readonly attempts?: readonly Attempt[] }): JobBody {
  return {
    id: j.id,
    idempotency_key: j.idempotencyKey,
    route: j.route,
    input: j.input,
    metadata: j.metadata,
    providers: [...j.providers],
    state: j.state,
    version: j.version,
    completed_by: j.completedBy,
    result: j.result ?? null,
    error: j.error,
    attempts: (j.attempts ?? []).map(attemptBody),
    skipped: j.skipped.map((s) => ({ provider: s.provider, reason: s.reason })),
    created_at: j.createdAt.toISOString(),
    updated_at: j.updatedAt.toISOString(),
  };
}

