/**
 * Following one background Response by streaming (the `openai-responses`
 * provider's `follow: "stream"`, CONTRACT §11): the create's own event
 * stream, then, after a cut, `GET {baseUrl}/responses/{id}?stream=true&starting_after=<cursor>`
 * until the response ends. The work is submitted once; a resume only reads.
 *
 * The steps of one attempt:
 * 1. create (`POST …/responses` with `background`, `stream`, `store`); the
 *    id arrives in `response.created` and is reported at once
 *    (`onProviderRequestId`), before anything else is awaited;
 * 2. relay every event's deltas (`onDelta`) and every event as a sign of
 *    life (`onEvent`, the caller's `idleTimeoutMs`);
 * 3. a connection that ends before `response.completed` / `.failed` /
 *    `.incomplete` (a cut, an `error` event, a clean end too early) is
 *    resumed after the last `sequence_number` applied; events at or before
 *    it are skipped, so nothing is relayed twice;
 * 4. the end: `completed` → success; `failed`/`incomplete` → a definite
 *    `provider_task_failed`; the caller's signal, no id, or
 *    {@link MAX_RESUMES_WITHOUT_PROGRESS} resumes that brought nothing new →
 *    ambiguous (the attempt is `unknown`; the lookup asks by the id).
 *
 * A server that ignores `stream: true` and answers the Response as JSON is
 * handed back to the caller (`whole`), which follows it by polling.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { createParser } from 'eventsource-parser';
import type { Dispatcher } from 'undici';
import { abortableSleep } from '../abortable-sleep.ts';
import { ambiguous, failure, outcomeFromExchange } from '../classify-outcome.ts';
import { CompletionAccumulator } from '../completion-accumulator.ts';
import { postJson, type HttpExchange } from '../http-exchange.ts';
import type { ChatDelta, ChatDeltaListener, ProviderErrorDetails, ProviderOutcome, ProviderRequest } from '../provider.ts';
import { ResponsesStreamReader, type ResponsesStreamStep } from './responses-upstream.ts';

/** Resumes in a row that receive no new event before the attempt is given up as `unknown` (the lookup takes over). */
export const MAX_RESUMES_WITHOUT_PROGRESS = 5;

/** Parameters of {@link followResponseStream}. */
export interface FollowResponseStreamParams {
  /** The provider's name and model (the completion's `provider`, its fallback `model`). */
  readonly name: string;
  readonly model: string;
  /** The API root (`…/v1`), without a trailing slash. */
  readonly base: string;
  readonly dispatcher: Dispatcher;
  /** The create's body (`stream: true` included). */
  readonly body: object;
  /** Headers of the create (auth, configured, the attempt's identity). */
  readonly createHeaders: Readonly<Record<string, string>>;
  /** Headers of a resume (auth, configured). */
  readonly resumeHeaders: Readonly<Record<string, string>>;
  readonly request: ProviderRequest;
  /** Receives each delta as it arrives; null for a job that is not streamed (the answer is still followed by streaming). */
  readonly onDelta: ChatDeltaListener | null;
  /** The pause between two resumes that brought nothing (the first resume is at once). */
  readonly resumeWaitMs: number;
  /** A 2xx create answered as JSON (a server that does not stream background responses): the caller follows it by polling. */
  readonly whole: (exchange: Extract<HttpExchange, { kind: 'response' }>) => Promise<ProviderOutcome>;
}

/** Why a connection stopped being read. */
type End = Extract<ResponsesStreamStep, { kind: 'completed' | 'failed' | 'error' | 'malformed' }>;

/**
 * Creates the response with `stream: true` and follows it to its end. Never rejects.
 *
 * @example const outcome = await followResponseStream({ name, model, base, dispatcher, body, createHeaders, resumeHeaders, request, onDelta, resumeWaitMs: 1000, whole });
 */
export async function followResponseStream(p: FollowResponseStreamParams): Promise<ProviderOutcome> {
  const { request, name } = p;
  const acc = new CompletionAccumulator();
  const reader = new ResponsesStreamReader();
  let id: string | null = null;
  let end: End | null = null;
  let streamed = false;

  const emit = (delta: ChatDelta) => {
    acc.add(delta);
    if (p.onDelta === null) return;
    try {
      p.onDelta(delta);
    } catch {
      // The listener's failure is the caller's business; the stream goes on.
    }
  };
  const sink = (_status: number, headers: IncomingHttpHeaders): ((chunk: Buffer) => boolean) | null => {
    if (!isEventStream(headers)) return null;
    streamed = true;
    const text = new TextDecoder('utf-8');
    const parser = createParser({
      onEvent: (event) => {
        if (end !== null) return;
        try {
          request.onEvent?.();
        } catch {
          // The caller's failure is its own business.
        }
        const step = reader.read(event.data);
        if (step.kind === 'seen') return;
        if (step.kind === 'event') {
          if (step.responseId !== undefined && id === null) {
            id = step.responseId;
            try {
              request.onProviderRequestId?.(id);
            } catch {
              // The listener's failure is the caller's business.
            }
          }
          for (const d of step.deltas) emit(d);
          return;
        }
        if (step.kind === 'completed') for (const d of step.deltas) emit(d);
        end = step;
      },
    });
    return (chunk) => {
      parser.feed(text.decode(chunk, { stream: true }));
      return end === null;
    };
  };

  const created = await postJson(p.dispatcher, {
    url: new URL(`${p.base}/responses`),
    headers: { ...p.createHeaders, accept: 'text/event-stream' },
    body: p.body,
    signal: request.signal,
    onDispatched: request.onDispatched,
    onBody: sink,
  });
  if (!streamed) {
    if (created.kind === 'response' && created.status >= 200 && created.status < 300) return p.whole(created);
    // Not sent, an error status, or lost before any event: classified as any exchange is.
    return outcomeFromExchange(created, name, () => ({ malformed: 'not a stream' }));
  }

  const partial = () => (acc.hasOutput ? acc.result(name, p.model) : undefined);
  const withPartial = (o: ProviderOutcome): ProviderOutcome => {
    const part = partial();
    return o.kind === 'success' || part === undefined ? o : { ...o, partial: part };
  };
  const details = (): ProviderErrorDetails => ({ provider: name, phase: 'after_headers', ...(id === null ? {} : { provider_request_id: id }) });

  let progress = reader.cursor;
  let tries = 0;
  for (;;) {
    const ended = end as End | null;
    if (ended?.kind === 'completed') {
      return { kind: 'success', completion: acc.result(name, p.model), raw: ended.response, ...(id === null ? {} : { providerRequestId: id }) };
    }
    if (ended?.kind === 'failed') {
      const outcome = failure('provider_task_failed', `${name}: response ${id ?? '(no id)'} ended ${ended.status}`, { ...details(), phase: 'after_body' });
      return withPartial(outcome.kind === 'failure' ? { ...outcome, error: { ...outcome.error, details: { ...outcome.error.details, status: ended.status, response_error: ended.details } as never } } : outcome);
    }
    if (ended?.kind === 'malformed') return withPartial(ambiguous('malformed_response', `${name} sent a stream that cannot be read: ${ended.reason}`, details()));
    if (request.signal.aborted) {
      return withPartial(ambiguous('aborted_after_send', `${name}: stopped following response ${id ?? '(no id yet)'}; it may still complete${id === null ? '' : ' (the lookup asks again)'}`, details()));
    }
    if (id === null) return withPartial(ambiguous('connection_lost', `${name}: the stream broke before the response's id arrived; it cannot be resumed or asked about`, details()));
    // The connection ended before the response did: resume after the last event applied.
    if (reader.cursor > progress) {
      progress = reader.cursor;
      tries = 0;
    }
    if (tries >= MAX_RESUMES_WITHOUT_PROGRESS) {
      return withPartial(ambiguous('connection_lost', `${name}: the stream of response ${id} broke and ${tries} resumes brought nothing new (the lookup asks again)`, details()));
    }
    if (tries > 0 && !(await abortableSleep(p.resumeWaitMs, request.signal))) continue;
    tries += 1;
    end = null;
    const url = new URL(`${p.base}/responses/${encodeURIComponent(id)}`);
    url.searchParams.set('stream', 'true');
    if (reader.cursor >= 0) url.searchParams.set('starting_after', String(reader.cursor));
    await postJson(p.dispatcher, { url, method: 'GET', headers: { ...p.resumeHeaders, accept: 'text/event-stream' }, body: null, signal: request.signal, onBody: sink });
  }
}

function isEventStream(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && type.toLowerCase().includes('text/event-stream');
}
