/**
 * Domain records → API bodies (snake_case, ISO timestamps), CONTRACT §3.
 */
import type { Attempt, Job, RecordedError } from '../core/types.ts';
import { microsToUsd } from '../core/usage.ts';

/** Token counts as the API shows them (CONTRACT §8). */
export interface UsageBody {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

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
  usage: UsageBody | null;
  cost_usd: number | null;
  /** The provider's own id of the request (CONTRACT §11), or null. */
  provider_request_id: string | null;
  /** Who ended the attempt's doubt (CONTRACT §11), or null. */
  resolved_by: string | null;
  /** When the attempt became `unknown`, or null. */
  unknown_at: string | null;
  /** When the provider was last asked about it, or null. */
  last_checked_at: string | null;
  /** When the provider is asked next (while in doubt on a provider that can be asked), or null. */
  next_check_at: string | null;
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
  cost_usd: number | null;
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
    usage: a.usage ? { prompt_tokens: a.usage.promptTokens, completion_tokens: a.usage.completionTokens, total_tokens: a.usage.totalTokens } : null,
    cost_usd: microsToUsd(a.costMicros ?? null),
    provider_request_id: a.providerRequestId,
    resolved_by: a.resolvedBy,
    unknown_at: a.unknownAt?.toISOString() ?? null,
    last_checked_at: a.lookupLastAt?.toISOString() ?? null,
    next_check_at: a.state === 'unknown' ? (a.lookupNextAt?.toISOString() ?? null) : null,
  };
}

/** A job's cost: the sum of its attempts' integer micro-dollars, null when none is priced. */
export function jobCostMicros(attempts: readonly Attempt[]): number | null {
  let sum: number | null = null;
  for (const a of attempts) if (a.costMicros !== null && a.costMicros !== undefined) sum = (sum ?? 0) + a.costMicros;
  return sum;
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
    cost_usd: microsToUsd(jobCostMicros(j.attempts ?? [])),
  };
}

