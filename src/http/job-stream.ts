/**
 * The SSE answer of a streaming request (CONTRACT §7), shared by
 * `POST /v1/chat/completions` and `POST /v1/messages`: relays the job's live
 * stream from the in-process {@link StreamHub} (from its first event, for the
 * first request and its duplicates alike), or, when the stream is not here
 * (another process runs the attempt, it already ended, a contract route
 * sends one burst), the stored result once the job has succeeded.
 *
 * Nothing is written until there is something to send: until then the
 * caller keeps its ordinary (non-streaming) answers, status codes and
 * problem bodies. The first byte (a delta, a replay, or a `: keep-alive`
 * comment) commits `200 text/event-stream`; after that a break ends with
 * `event: error` (`{"error": {"code", "message", "job_id"}}`) and no
 * terminator. A client that goes away stops only the relay: the attempt
 * runs on and its result is stored. See docs/chat-completions.md.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isJobTerminal } from '../core/states.ts';
import type { JobWithAttempts } from '../core/types.ts';
import { defaultStreamHub, type StreamEvent, type StreamHub } from '../executor/stream-hub.ts';
import type { ChatDelta } from '../providers/provider.ts';
import { MessagesStreamEncoder, messagesSseEvent } from '../protocols/anthropic-messages.ts';
import { ChatChunkEncoder, chatSseEvent } from '../protocols/openai-chat-stream.ts';
import { responsesSseEvent, type ResponsesStreamEncoder } from '../protocols/openai-responses-stream.ts';
import type { AppContext } from './app-context.ts';
import { writeSseHead } from './sse.ts';
import { chatCompletionId } from './chat-completion.ts';
import { requestOwner } from './request-owner.ts';

/** Default of {@link StreamJobResponseOptions.keepAliveMs}: comments at least every 15 s while nothing was sent (CONTRACT §7). */
export const DEFAULT_KEEP_ALIVE_MS = 15_000;

/** Options of {@link streamJobResponse}. */
export interface StreamJobResponseOptions {
  readonly ctx: AppContext;
  readonly request: FastifyRequest;
  /** Its headers set so far (`Onejob-Job-Id`, `Idempotent-Replayed`, …) go out with the 200. */
  readonly reply: FastifyReply;
  /** The job as created or joined. */
  readonly job: JobWithAttempts;
  /**
   * The event vocabulary: OpenAI `chat.completion.chunk`s + `data: [DONE]`,
   * Anthropic's `message_start` … `message_stop`, or the Responses API's
   * events (`response.created` … `response.completed`, see {@link responses}).
   */
  readonly encoder: 'chat' | 'messages' | 'responses';
  /**
   * Responses: the encoder of this answer (one per request, kept across a
   * failover so its sequence numbers go on; `starting_after` is its option).
   */
  readonly responses?: ResponsesStreamEncoder | undefined;
  /** The model reported until the provider names its own (the request's `model`). */
  readonly model: string;
  /** Chat: `stream_options.include_usage` (a last chunk with `usage`). */
  readonly includeUsage?: boolean | undefined;
  /** The completion / message id. Default `chatcmpl-<jobId>` / `msg_<jobId>`. */
  readonly id?: string | undefined;
  /**
   * The route's contract has an `outputSchema`: the whole output is checked
   * first, so nothing is relayed live; the stored result is sent in one burst
   * once the job succeeded (a violation never reaches the client as text).
   */
  readonly buffered: boolean;
  /** The longest wait for the stream's first event or the job's end; then the caller answers. */
  readonly maxWaitMs: number;
  /** Comment lines while nothing was sent. Default {@link DEFAULT_KEEP_ALIVE_MS}. */
  readonly keepAliveMs?: number | undefined;
  /** Default: the process's {@link defaultStreamHub} (the executor's, in `onejob serve`). */
  readonly hub?: StreamHub | undefined;
  /** The fast path's start of the job's first attempt here ({@link ChatJob.start}): run once the relay watches. */
  readonly start?: (() => void) | undefined;
}

/**
 * What happened: `streamed` (the response was written, or the client went
 * away), or not, with the job as last read: the caller answers it as it
 * would without streaming (its error answers: in doubt, failed, cancelled,
 * still running when the wait ended).
 */
export type StreamJobResponseResult = { readonly streamed: true } | { readonly streamed: false; readonly job: JobWithAttempts };

/** The error of a stream that cannot go on, as sent in `event: error`. */
interface StreamFailure {
  readonly code: string;
  readonly message: string;
}

/** Deltas → SSE text in one protocol. */
interface SseWriter {
  start(): string;
  delta(d: ChatDelta): string;
  /** The end of a successful stream, terminator included; `result` is the job's stored result. */
  finish(result: unknown): string;
  /** A stored result, whole, terminator included. */
  replay(result: unknown): string;
  error(e: StreamFailure): string;
}

function sseWriter(o: StreamJobResponseOptions, jobId: string): SseWriter {
  if (o.encoder === 'responses') {
    const enc = o.responses;
    if (enc === undefined) throw new TypeError('the responses encoder needs its ResponsesStreamEncoder');
    const text = (events: readonly Parameters<typeof responsesSseEvent>[0][]): string => events.map(responsesSseEvent).join('');
    return {
      start: () => text(enc.start()),
      delta: (d) => text(enc.delta(d)),
      finish: (result) => text(enc.finish(result)),
      replay: (result) => text(enc.replay(result)),
      // A failed job ends as Responses streams end: `response.failed`; any other break is the `error` event.
      error: (e) => text(e.code === 'job_failed' ? enc.failed(e.message) : enc.error(e)),
    };
  }
  if (o.encoder === 'chat') {
    const enc = new ChatChunkEncoder({ id: o.id ?? chatCompletionId(jobId), model: o.model, created: Math.floor(Date.now() / 1000), includeUsage: o.includeUsage === true });
    return {
      start: () => '',
      delta: (d) => enc.delta(d).map(chatSseEvent).join(''),
      finish: () => `${enc.finish().map(chatSseEvent).join('')}data: [DONE]\n\n`,
      replay: (result) => `${enc.replay(result).map(chatSseEvent).join('')}data: [DONE]\n\n`,
      error: (e) => `event: error\ndata: ${JSON.stringify({ error: { code: e.code, message: e.message, job_id: jobId } })}\n\n`,
    };
  }
  const enc = new MessagesStreamEncoder({ id: o.id ?? `msg_${jobId}`, model: o.model });
  return {
    start: () => enc.start().map(messagesSseEvent).join(''),
    delta: (d) => enc.delta(d).map(messagesSseEvent).join(''),
    finish: () => enc.finish().map(messagesSseEvent).join(''),
    replay: (result) => enc.replay(result).map(messagesSseEvent).join(''),
    // Anthropic's error event shape, with the members CONTRACT §7 names inside `error`.
    error: (e) => messagesSseEvent({ type: 'error', error: { type: 'api_error', code: e.code, message: e.message, job_id: jobId } }),
  };
}

/** Why a job that did not succeed ends a stream that already sent bytes. */
function failureOf(job: JobWithAttempts, why: string): StreamFailure {
  switch (job.state) {
    case 'failed':
      return { code: 'job_failed', message: `job ${job.id} failed: ${job.error?.message ?? 'every provider failed'}` };
    case 'unknown':
      return { code: 'attempt_in_doubt', message: `an attempt of job ${job.id} is unknown: the provider may have run it; retry with the same key later, or resolve it` };
    case 'cancelled':
      return { code: 'job_finished', message: `job ${job.id} was cancelled` };
    default:
      return { code: 'attempt_in_flight', message: `job ${job.id} is still ${job.state} (${why}); retry with the same Idempotency-Key` };
  }
}

/**
 * Answers a streaming request of `job` (see the module comment).
 *
 * @example
 * const r = await streamJobResponse({ ctx, request, reply, job, encoder: 'chat', model: body.model, includeUsage, buffered: false, maxWaitMs });
 * if (!r.streamed) return answer(request, reply, r.job, replayed); // the non-streaming answer
 */
export async function streamJobResponse(o: StreamJobResponseOptions): Promise<StreamJobResponseResult> {
  const { ctx, request, reply, job } = o;
  const hub = o.hub ?? defaultStreamHub;
  const raw = reply.raw;
  const keepAliveMs = o.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  let committed = false;

  const commit = (): void => {
    if (committed) return;
    committed = true;
    reply.hijack();
    const headers: Record<string, string | number | string[]> = {};
    for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
    writeSseHead(raw, headers);
  };
  const write = (text: string): void => {
    if (text === '' || raw.destroyed) return;
    commit();
    raw.write(text);
  };

  if (job.state === 'succeeded') {
    write(sseWriter(o, job.id).replay(job.result));
    raw.end();
    return { streamed: true };
  }
  if (isJobTerminal(job.state) || job.state === 'unknown' || ctx.closing.aborted) return { streamed: false, job };

  return new Promise<StreamJobResponseResult>((resolve) => {
    let done = false;
    let latest = job;
    /** The attempt whose stream is being relayed, or null. */
    let relaying: string | null = null;
    /** Whether any event (not only comments) was written. */
    let dataSent = false;
    let sse = sseWriter(o, job.id);
    let unwatch = (): void => {};

    const cleanup = (): void => {
      done = true;
      clearInterval(keepAlive);
      clearTimeout(maxWait);
      unwatch();
      offJob();
      raw.off('close', onClose);
      ctx.closing.removeEventListener('abort', onWaitEnd);
    };
    const end = (): void => {
      cleanup();
      if (!raw.destroyed) raw.end();
      resolve({ streamed: true });
    };
    /** The job ended other than in success, or the wait ended: the caller's answer, or `event: error` once committed. */
    const giveBack = (j: JobWithAttempts, why: string): void => {
      if (!committed) {
        cleanup();
        resolve({ streamed: false, job: j });
        return;
      }
      write(sse.error(failureOf(j, why)));
      end();
    };
    const onClose = (): void => {
      if (done) return;
      // The client went away: stop relaying, cancel nothing (the attempt runs on; its result is stored).
      request.log.info({ relaying, data_sent: dataSent }, 'stream client went away; the job goes on');
      if (!committed) {
        committed = true;
        reply.hijack();
      }
      cleanup();
      resolve({ streamed: true });
    };
    const onWaitEnd = (): void => {
      if (done || relaying !== null) return;
      giveBack(latest, ctx.closing.aborted ? 'the server is shutting down' : `the wait ended after ${o.maxWaitMs} ms`);
    };

    const onEvent = (e: StreamEvent): void => {
      if (done) return;
      if (e.type === 'delta') {
        if (relaying === null) {
          relaying = e.attemptId;
          write(sse.start());
        }
        if (e.attemptId !== relaying) return;
        const text = sse.delta(e.delta);
        if (text !== '') {
          dataSent = true;
          write(text);
        }
        return;
      }
      if (e.attemptId !== relaying) return;
      if (e.ok) {
        write(sse.finish(e.result));
        end();
      } else if (dataSent) {
        write(sse.error(e.error));
        end();
      } else {
        // Nothing of this stream reached the client: read the job again and wait for what it does next (a failover's stream, or its end).
        relaying = null;
        sse = sseWriter(o, job.id);
        ctx.jobs.refresh(requestOwner(request), job.id);
      }
    };

    /** The job as committed, pushed or read (see JobWatch); a live stream decides how this answer ends, the row is for requests without one. */
    const onJob = (j: JobWithAttempts | null): void => {
      if (done || relaying !== null) return;
      if (j === null) return giveBack(latest, 'the job is gone');
      latest = j;
      if (j.state === 'succeeded') {
        write(sse.replay(j.result));
        return end();
      }
      if (isJobTerminal(j.state) || j.state === 'unknown') giveBack(j, 'the job ended');
    };

    const keepAlive = setInterval(() => {
      if (!dataSent && !done) write(': keep-alive\n\n');
    }, keepAliveMs);
    const maxWait = setTimeout(onWaitEnd, o.maxWaitMs);
    raw.on('close', onClose);
    ctx.closing.addEventListener('abort', onWaitEnd);
    // Watching first, reading second: a stream or an outcome that came in between is not missed.
    if (!o.buffered) unwatch = hub.watch(job.id, onEvent);
    const offJob = ctx.jobs.watch(requestOwner(request), job.id, {
      onJob,
      onError: (error) => request.log.warn({ err: error }, 'stream re-read failed; trying again at the next change'),
    }, { readNow: o.start === undefined, state: job.state });
    o.start?.();
  });
}
