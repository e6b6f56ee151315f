/**
 * A finished line's output line (CONTRACT §17), in OpenAI's batch shape:
 * `{"id", "custom_id", "response": {"status_code", "request_id", "body"},
 * "error"}`. The body is what the line's endpoint answers for that job, made
 * by the endpoint's own functions (no copy of them here). See docs/batches.md.
 */
import type { OnejobConfig } from '../config/config.ts';
import type { JobWithAttempts } from '../core/types.ts';
import { chatCompletionOf, withOpenAiError } from '../http/chat-completion.ts';
import { jobFailedError } from '../http/chat-job.ts';
import { toProblem } from '../http/problem-details.ts';
import { anthropicErrorOf, messageId } from '../http/routes/messages-routes.ts';
import { responseOfJob } from '../http/routes/responses-routes.ts';
import { chatResultToMessagesResponse } from '../protocols/anthropic-messages.ts';
import { responsesRecordOf } from '../protocols/openai-responses.ts';
import type { BatchEndpoint } from './batch-lines.ts';

/** Why a line ended without an answer (OpenAI's codes for cancelled and expired lines). */
export type LineEndCode = 'batch_cancelled' | 'batch_expired' | 'idempotency_key_reused';

/** A rendered line and the file it belongs to. */
export interface OutputLine {
  readonly outcome: 'output' | 'error';
  readonly text: string;
}

function line(id: string, customId: string, response: { status_code: number; request_id: string; body: unknown } | null, error: { code: string; message: string } | null): string {
  return JSON.stringify({ id, custom_id: customId, response, error });
}

/** The id of a line's output line: names its job. */
export function batchRequestId(jobId: string): string {
  return `batch_req_${jobId}`;
}

/** The success body of `endpoint` for a succeeded job. */
function successBody(endpoint: BatchEndpoint, job: JobWithAttempts, config: OnejobConfig): unknown {
  switch (endpoint) {
    case '/v1/chat/completions':
      return chatCompletionOf(job, config);
    case '/v1/messages':
      return chatResultToMessagesResponse(job.result, { id: messageId(job.id), model: job.route });
    case '/v1/responses': {
      const record = responsesRecordOf(job.metadata);
      return record === null ? job.result : responseOfJob(job, record);
    }
  }
}

/**
 * The output line of a finished job: `succeeded` → the output file with
 * status 200 and the endpoint's body; `failed` → the error file with the
 * endpoint's `502 job_failed` problem; `cancelled` → the error file with no
 * response and `error.code` `batch_cancelled` (or `batch_expired` when the
 * batch expired).
 */
export function outputLineOf(endpoint: BatchEndpoint, customId: string, job: JobWithAttempts, config: OnejobConfig, cancelledAs: 'batch_cancelled' | 'batch_expired'): OutputLine {
  const id = batchRequestId(job.id);
  if (job.state === 'succeeded') {
    return { outcome: 'output', text: line(id, customId, { status_code: 200, request_id: job.id, body: successBody(endpoint, job, config) }, null) };
  }
  if (job.state === 'failed') {
    const problem = toProblem(jobFailedError(job));
    const body = endpoint === '/v1/messages' ? anthropicErrorOf(problem.body) : withOpenAiError(problem.body);
    return { outcome: 'error', text: line(id, customId, { status_code: problem.status, request_id: job.id, body }, null) };
  }
  const message = cancelledAs === 'batch_expired'
    ? `line ${customId} was not started before the batch's completion window ended`
    : `line ${customId} was cancelled with its batch (job ${job.id})`;
  return { outcome: 'error', text: line(id, customId, null, { code: cancelledAs, message }) };
}

/** The error line of a line whose key was held by another job (it was not run by this batch). */
export function keyTakenLineOf(customId: string, key: string): OutputLine {
  return {
    outcome: 'error',
    text: line(`batch_req_${customId}`, customId, null, {
      code: 'idempotency_key_reused',
      message: `the key ${JSON.stringify(key)} of this line already names a job that is not this batch's; the line was not run`,
    }),
  };
}
