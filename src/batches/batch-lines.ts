/**
 * One line of a batch input file (CONTRACT §17): checked at upload
 * ({@link checkBatchLine}) and turned into its job at line creation
 * ({@link lineJobOf}), by the same translations the line's endpoint uses, so
 * a line runs exactly as that request would. Pure. See docs/batches.md.
 */
import type { OnejobConfig } from '../config/config.ts';
import { fingerprint } from '../core/fingerprint.ts';
import { chatRouteOf } from '../http/chat-completion.ts';
import { messagesRequestToChatInput } from '../protocols/anthropic-messages.ts';
import { RESPONSES_RECORD_KEY, responsesRequestToChatInput } from '../protocols/openai-responses.ts';

/** The endpoints a batch line may name, and the fingerprint endpoint of each (as the gateway's). */
export const BATCH_ENDPOINTS = {
  '/v1/chat/completions': 'chat.completions',
  '/v1/responses': 'responses',
  '/v1/messages': 'messages',
} as const;

export type BatchEndpoint = keyof typeof BATCH_ENDPOINTS;

/** Most lines of one input file. */
export const MAX_BATCH_LINES = 50_000;
/** Most bytes of one input file: 200 MB. */
export const MAX_BATCH_FILE_BYTES = 200 * 1_000_000;

/** A line that passed {@link checkBatchLine}. */
export interface CheckedLine {
  readonly customId: string;
  readonly url: BatchEndpoint;
  /** The configured route `body.model` names. */
  readonly route: string;
}

export function isBatchEndpoint(v: unknown): v is BatchEndpoint {
  return typeof v === 'string' && Object.hasOwn(BATCH_ENDPOINTS, v);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The job a line becomes: its input and metadata, as its endpoint would create it. */
export type LineJob =
  | { readonly ok: true; readonly model: string; readonly input: unknown; readonly metadata: Record<string, unknown> | null; readonly fingerprint: string }
  | { readonly ok: false; readonly message: string };

/**
 * The job of a line's body on its endpoint (the translations of
 * `chat-routes.ts`, `messages-routes.ts`, `responses-routes.ts`), or why it
 * cannot be one. A batch line is answered in a file, never streamed, and
 * continues no earlier Response.
 */
export function lineJobOf(url: BatchEndpoint, body: Record<string, unknown>): LineJob {
  if (body.stream === true) return { ok: false, message: 'body.stream must be false or absent: a batch line is answered in the output file' };
  const print = fingerprint({ endpoint: BATCH_ENDPOINTS[url], body });
  switch (url) {
    case '/v1/chat/completions': {
      if (typeof body.model !== 'string' || body.model === '') return { ok: false, message: 'body.model must name a route' };
      if (!Array.isArray(body.messages) || body.messages.length === 0) return { ok: false, message: 'body.messages must be a non-empty array' };
      if (body.n !== undefined && body.n !== null && body.n !== 1) return { ok: false, message: 'body.n must be 1 or absent: a job has one result' };
      const { model, stream: _stream, ...input } = body;
      return { ok: true, model, input, metadata: null, fingerprint: print };
    }
    case '/v1/messages': {
      const t = messagesRequestToChatInput(body);
      if (!t.ok) return { ok: false, message: `body.${t.member}: ${t.message}` };
      return { ok: true, model: t.model, input: t.input, metadata: null, fingerprint: print };
    }
    case '/v1/responses': {
      if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
        return { ok: false, message: 'body.previous_response_id is not supported in a batch line: each line is a request of its own' };
      }
      if (body.background === true) return { ok: false, message: 'body.background must be false or absent in a batch line' };
      const t = responsesRequestToChatInput(body, null);
      if (!t.ok) return { ok: false, message: `body.${t.member}: ${t.message}` };
      return { ok: true, model: t.model, input: t.input, metadata: { [RESPONSES_RECORD_KEY]: t.record }, fingerprint: print };
    }
  }
}

/**
 * Checks one line of an input file: JSON, `{"custom_id", "method": "POST",
 * "url", "body"}`, a `custom_id` not in `seen`, and a body its endpoint
 * accepts whose `model` names a configured route. Answers the checked line
 * or why it is refused (the upload's 400 names the line).
 */
export function checkBatchLine(text: string, seen: ReadonlySet<string>, routes: OnejobConfig['routes']): CheckedLine | { readonly error: string } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { error: 'is not valid JSON' };
  }
  if (!isRecord(v)) return { error: 'must be a JSON object {"custom_id", "method", "url", "body"}' };
  if (typeof v.custom_id !== 'string' || v.custom_id === '') return { error: 'custom_id must be a non-empty string' };
  if (v.custom_id.length > 200) return { error: 'custom_id must be at most 200 characters' };
  if (seen.has(v.custom_id)) return { error: `custom_id ${JSON.stringify(v.custom_id)} is used by an earlier line: each line needs its own` };
  if (v.method !== 'POST') return { error: 'method must be "POST"' };
  if (!isBatchEndpoint(v.url)) return { error: `url must be one of ${Object.keys(BATCH_ENDPOINTS).join(', ')}` };
  if (!isRecord(v.body)) return { error: 'body must be a JSON object' };
  const job = lineJobOf(v.url, v.body);
  if (!job.ok) return { error: job.message };
  const route = chatRouteOf(job.model, routes);
  if (route === null) return { error: `body.model ${JSON.stringify(job.model)} names no configured route` };
  return { customId: v.custom_id, url: v.url, route };
}
