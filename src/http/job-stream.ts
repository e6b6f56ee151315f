/**
 * The SSE answer of a streaming request (CONTRACT §7, §13), shared by
 * `POST /v1/chat/completions` and `POST /v1/messages` (and any other
 * encoder: {@link StreamEncoder}): relays the job's stream, the same events
 * for the first request, its duplicates, a resume on any process and a replay
 * after the end, each with an SSE `id:`.
 *
 * - **Where the events come from**: {@link JobStreamFollower}: this
 *   process's hub while the attempt runs here, else the stored stream
 *   (`stream_events`), live as its batches are announced. A job that
 *   succeeded without a stored stream (not streamed, a contract route's one
 *   burst) replays its result.
 * - **Ids**: `"<attempt number>-<n>"`: the n-th SSE event (1, 2, …) of the
 *   stream of that attempt, as the encoder turns its events into SSE events.
 *   Encoders are deterministic, so every reader numbers the same events the
 *   same way. `Last-Event-ID` (a duplicate's; {@link StreamJobResponseOptions.cursor})
 *   skips the events up to it: the encoder still sees them (its state), the
 *   client does not. An answer that ends before any attempt's stream began
 *   (only keep-alives went out) numbers its error as the stream of attempt
 *   {@link NO_ATTEMPT_STREAM} (`0-1`, …): every event has an id, and a resume
 *   after those names no attempt's stream.
 * - Nothing is written until there is something to send: until then the
 *   caller keeps its ordinary (non-streaming) answers, status codes and
 *   problem bodies. The first byte (an event, or a `: keep-alive` comment)
 *   commits `200 text/event-stream`; after that a break ends with
 *   `event: error` (`{"error": {"code", "message", "job_id"}}`) and no
 *   terminator. A client that goes away stops only the relay: the attempt
 *   runs on and its result is stored.
 *
 * See docs/streaming.md and docs/chat-completions.md.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isJobTerminal } from '../core/states.ts';
import type { JobWithAttempts } from '../core/types.ts';
import { defaultStreamHub, type StreamEvent, type StreamHub } from '../executor/stream-hub.ts';
import { isStreamingInput } from '../executor/executor.ts';
import type { ChatDelta } from '../providers/provider.ts';
import { MessagesStreamEncoder, messagesSseEvent } from '../protocols/anthropic-messages.ts';
import { ChatChunkEncoder, chatSseEvent } from '../protocols/openai-chat-stream.ts';
import { responsesSseEvent, type ResponsesStreamEncoder } from '../protocols/openai-responses-stream.ts';
import type { AppContext } from './app-context.ts';
import { writeSseHead } from './sse.ts';
import { chatCompletionId } from './chat-completion.ts';
import { requestOwner } from './request-owner.ts';
import { JobStreamFollower } from './stream-follower.ts';
import { DEFAULT_STREAM_FOLLOWERS_PER_OWNER } from '../config/config.ts';
import { OwnerSlots } from './owner-slots.ts';

/** Default of {@link StreamJobResponseOptions.keepAliveMs}: comments at least every 15 s while nothing was sent (CONTRACT §7). */
export const DEFAULT_KEEP_ALIVE_MS = 15_000;

/** How long a stream whose job ended waits for the end of its stored stream (written just after the job's outcome) before it gives up on it. */
export const STORED_END_GRACE_MS = 3_000;

/** The error of a stream that cannot go on, as sent in `event: error`. */
export interface StreamFailure {
  readonly code: string;
  readonly message: string;
}

/**
 * One protocol's SSE events for one attempt's stream: each method returns
 * whole SSE events (`event: …\ndata: …\n\n`, or `data: …\n\n`), without
 * `id:` (the relay adds it). Must be deterministic: the same calls give the
 * same events, on every process. A fresh encoder per stream.
 */
export interface StreamEncoder {
  /** The events that open a stream (Anthropic's `message_start`), before its first delta. */
  start(): string[];
  delta(d: ChatDelta): string[];
  /** The end of a successful stream, terminator included; `result` is the job's stored result. */
  finish(result: unknown): string[];
  /** A stored result, whole (start and terminator included): the job has no stored stream. */
  replay(result: unknown): string[];
  /** The last event of a stream that broke. */
  error(e: StreamFailure): string[];
}

/**
 * Where a resume starts: after the `ordinal`-th event of attempt
 * `attemptNumber`'s stream (null: whichever stream the job has, as a
 * `starting_after` that names no attempt). See {@link parseStreamEventId}.
 */
export interface StreamCursor {
  readonly attemptNumber: number | null;
  readonly ordinal: number;
}

/**
 * The attempt number in the ids of an answer that ended before any attempt's stream began: its error events are `0-1`,
 * `0-2`, …; a cursor naming it names no attempt's stream (its client has received no output).
 */
export const NO_ATTEMPT_STREAM = 0;

/** The SSE id of the `ordinal`-th event of attempt `attemptNumber`'s stream. @example streamEventId(1, 7) // '1-7' */
export function streamEventId(attemptNumber: number, ordinal: number): string {
  return `${attemptNumber}-${ordinal}`;
}

/** The cursor an SSE id names (`"<attempt>-<n>"`), or null for anything else. @example parseStreamEventId('1-7') // { attemptNumber: 1, ordinal: 7 } */
export function parseStreamEventId(id: unknown): StreamCursor | null {
  if (typeof id !== 'string') return null;
  const m = /^\s*(\d{1,9})-(\d{1,12})\s*$/.exec(id);
  return m ? { attemptNumber: Number(m[1]), ordinal: Number(m[2]) } : null;
}

/** The cursor of a request's `Last-Event-ID` header, or null. */
export function lastEventIdCursor(request: FastifyRequest): StreamCursor | null {
  return parseStreamEventId(request.headers['last-event-id']);
}

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
   * Anthropic's `message_start` … `message_stop`, the Responses API's events
   * (`response.created` … `response.completed`, see {@link responses}), or
   * any other (a fresh {@link StreamEncoder} per stream).
   */
  readonly encoder: 'chat' | 'messages' | 'responses' | (() => StreamEncoder);
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
  /**
   * A resume: only the events after this one are sent (CONTRACT §13). Give it
   * for a duplicate only (a job just created has no events to skip):
   * `created.replayed === 'true' ? lastEventIdCursor(request) : null`.
   */
  readonly cursor?: StreamCursor | null | undefined;
  /**
   * A resume whose cursor lies in a stream the job has ends inside that stream (its `error` numbered after the
   * cursor) even when every event of it so far was skipped, instead of handing back for the caller's answer: for
   * `GET /v1/responses/{id}?stream=true`, which answers events, never a problem document.
   */
  readonly endInStream?: boolean | undefined;
  /**
   * This request follows a job it did not create (a duplicate, a resume, `GET
   * /v1/responses/{id}?stream=true`): it counts against the owner's
   * `eventFeeds.maxFollowersPerOwner` on this process (`429
   * too_many_requests` past it, before anything is written).
   */
  readonly follower?: boolean | undefined;
}

/** The followers' slots of each app (one count per process and owner). */
const followerSlots = new WeakMap<AppContext, OwnerSlots>();

function followerSlotsOf(ctx: AppContext): OwnerSlots {
  let slots = followerSlots.get(ctx);
  if (slots === undefined) {
    slots = new OwnerSlots('stream followers', ctx.config.eventFeeds.maxFollowersPerOwner ?? DEFAULT_STREAM_FOLLOWERS_PER_OWNER, 'eventFeeds.maxFollowersPerOwner');
    followerSlots.set(ctx, slots);
  }
  return slots;
}

/**
 * What happened: `streamed` (the response was written, or the client went
 * away), or not, with the job as last read: the caller answers it as it
 * would without streaming (its error answers: in doubt, failed, cancelled,
 * still running when the wait ended).
 */
export type StreamJobResponseResult = { readonly streamed: true } | { readonly streamed: false; readonly job: JobWithAttempts };

function encoderOf(o: StreamJobResponseOptions, jobId: string): () => StreamEncoder {
  if (typeof o.encoder === 'function') return o.encoder;
  if (o.encoder === 'responses') {
    const enc = o.responses;
    if (enc === undefined) throw new TypeError('the responses encoder needs its ResponsesStreamEncoder');
    const events = (es: readonly Parameters<typeof responsesSseEvent>[0][]): string[] => es.map(responsesSseEvent);
    const wrapped: StreamEncoder = {
      start: () => events(enc.start()),
      delta: (d) => events(enc.delta(d)),
      finish: (result) => events(enc.finish(result)),
      replay: (result) => events(enc.replay(result)),
      // A failed job ends as Responses streams end: `response.failed`; any other break is the `error` event.
      error: (e) => events(e.code === 'job_failed' ? enc.failed(e.message) : enc.error(e)),
    };
    return () => wrapped;
  }
  if (o.encoder === 'chat') {
    const created = Math.floor(Date.now() / 1000);
    return () => {
      const enc = new ChatChunkEncoder({ id: o.id ?? chatCompletionId(jobId), model: o.model, created, includeUsage: o.includeUsage === true });
      return {
        start: () => [],
        delta: (d) => enc.delta(d).map(chatSseEvent),
        finish: () => [...enc.finish().map(chatSseEvent), 'data: [DONE]\n\n'],
        replay: (result) => [...enc.replay(result).map(chatSseEvent), 'data: [DONE]\n\n'],
        error: (e) => [`event: error\ndata: ${JSON.stringify({ error: { code: e.code, message: e.message, job_id: jobId } })}\n\n`],
      };
    };
  }
  return () => {
    const enc = new MessagesStreamEncoder({ id: o.id ?? `msg_${jobId}`, model: o.model });
    return {
      // message_start waits for the first content (or the end): the provider's `model` delta comes
      // first, and message_start must carry it, as the answer without a stream does.
      start: () => [],
      delta: (d) => enc.delta(d).map(messagesSseEvent),
      finish: () => enc.finish().map(messagesSseEvent),
      replay: (result) => enc.replay(result).map(messagesSseEvent),
      // Anthropic's error event shape, with the members CONTRACT §7 names inside `error`.
      error: (e) => [messagesSseEvent({ type: 'error', error: { type: 'api_error', code: e.code, message: e.message, job_id: jobId } })],
    };
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

/** The number of the attempt that won `job`, or 0. */
function winnerNumber(job: JobWithAttempts): number {
  return job.attempts.find((a) => a.id === job.completedBy)?.number ?? 0;
}

/**
 * Answers a streaming request of `job` (see the module comment).
 *
 * @example
 * const r = await streamJobResponse({ ctx, request, reply, job, encoder: 'chat', model: body.model, includeUsage, buffered: false, maxWaitMs, cursor });
 * if (!r.streamed) return answer(request, reply, r.job, replayed); // the non-streaming answer
 */
export async function streamJobResponse(o: StreamJobResponseOptions): Promise<StreamJobResponseResult> {
  const { ctx, request, reply, job } = o;
  const hub = o.hub ?? defaultStreamHub;
  const raw = reply.raw;
  const keepAliveMs = o.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  const newEncoder = encoderOf(o, job.id);
  const cursor = o.cursor ?? null;
  const ownerId = requestOwner(request);
  let committed = false;
  if (o.follower === true) {
    const release = followerSlotsOf(ctx).take(ownerId);
    raw.once('close', release);
  }

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

  /** The SSE events of one attempt's stream, numbered; those up to the cursor are counted, not sent. */
  let stream: { readonly attempt: number; readonly enc: StreamEncoder; n: number; begun: boolean; readonly skipTo: number } | null = null;
  /** Whether any event (not only comments) was written. */
  let dataSent = false;
  const openStream = (attempt: number): NonNullable<typeof stream> => {
    const skipTo = cursor !== null && (cursor.attemptNumber === null || cursor.attemptNumber === attempt) ? cursor.ordinal : 0;
    stream = { attempt, enc: newEncoder(), n: 0, begun: false, skipTo };
    return stream;
  };
  const emit = (events: readonly string[]): void => {
    const s = stream!;
    let text = '';
    for (const e of events) {
      s.n += 1;
      if (s.n > s.skipTo) text += `id: ${streamEventId(s.attempt, s.n)}\n${e}`;
    }
    if (text !== '') {
      dataSent = true;
      write(text);
    }
  };
  /** The job's stored result as a stream (it has no stored stream). */
  const replayResult = (j: JobWithAttempts): void => {
    const s = openStream(winnerNumber(j));
    s.begun = true;
    emit(s.enc.replay(j.result));
  };

  if (o.buffered && job.state === 'succeeded') {
    replayResult(job);
    commit(); // a resume after the last event: an empty stream
    raw.end();
    return { streamed: true };
  }
  if ((isJobTerminal(job.state) || job.state === 'unknown') && cursor === null && job.state !== 'succeeded') return { streamed: false, job };
  if (ctx.closing.aborted) return { streamed: false, job };

  return new Promise<StreamJobResponseResult>((resolve) => {
    let done = false;
    let latest = job;
    let offJob = (): void => {};
    let graceTimer: NodeJS.Timeout | undefined;
    /** The resume names an attempt's stream: its client has events of it, so its break is reported, never skipped. */
    const resumedAttempt = cursor === null || cursor.attemptNumber === NO_ATTEMPT_STREAM ? null : cursor.attemptNumber;
    /** The job had ended (or is in doubt) when the request came: its stored stream is read once, by {@link settleFromJob}. */
    const endedAtEntry = isJobTerminal(job.state) || job.state === 'unknown';

    const follower = o.buffered
      ? null
      : new JobStreamFollower({
          store: ctx.store, hub, ownerId, jobId: job.id, attemptNumber: resumedAttempt,
          // A resume by position (`starting_after`) may hold the beginning of a stream that broke: it is owed that error.
          brokenIfNoOther: cursor !== null && cursor.attemptNumber === null,
          // A job just created here has nothing stored yet: its stream comes live or is announced.
          readNow: o.start === undefined && !endedAtEntry,
          recheckMs: ctx.waitRecheckMs,
          onEvent: (e) => onEvent(e),
          onError: (error) => request.log.warn({ err: error }, 'stored stream read failed; trying again at the next announcement'),
        });

    const cleanup = (): void => {
      done = true;
      clearInterval(keepAlive);
      clearTimeout(maxWait);
      clearTimeout(graceTimer);
      follower?.close();
      offJob();
      raw.off('close', onClose);
      ctx.closing.removeEventListener('abort', onWaitEnd);
    };
    const end = (): void => {
      cleanup();
      if (!raw.destroyed) {
        commit(); // a resume after the last event: an empty stream
        raw.end();
      }
      resolve({ streamed: true });
    };
    /** The job ended other than in success, or the wait ended: the caller's answer, or `event: error` once committed. */
    const giveBack = (j: JobWithAttempts, why: string): void => {
      if (!committed && !(o.endInStream === true && stream !== null)) {
        cleanup();
        resolve({ streamed: false, job: j });
        return;
      }
      // No attempt's stream began (only keep-alives went out): the protocol's own error event (a Responses client reads
      // `type` and `sequence_number`, an Anthropic one its `error` event), numbered as the stream of no attempt (CONTRACT §13).
      const s = stream ?? openStream(NO_ATTEMPT_STREAM);
      emit(s.enc.error(failureOf(j, why)));
      end();
    };
    const onClose = (): void => {
      if (done) return;
      // The client went away: stop relaying, cancel nothing (the attempt runs on; its result is stored).
      request.log.info({ relaying: stream?.attempt ?? null, data_sent: dataSent }, 'stream client went away; the job goes on');
      if (!committed) {
        committed = true;
        reply.hijack();
      }
      cleanup();
      resolve({ streamed: true });
    };
    const onWaitEnd = (): void => {
      if (done || stream !== null) return;
      giveBack(latest, ctx.closing.aborted ? 'the server is shutting down' : `the wait ended after ${o.maxWaitMs} ms`);
    };

    const onEvent = (e: StreamEvent): void => {
      if (done) return;
      const s = stream ?? openStream(e.attemptNumber);
      if (!s.begun) {
        s.begun = true;
        emit(s.enc.start());
      }
      if (e.type === 'delta') return emit(s.enc.delta(e.delta));
      if (e.ok) {
        // The job's result (an encoder such as the Responses one repeats it at the end): the hub has it, the stored end does not.
        const finish = (result: unknown): void => {
          if (done) return;
          emit(s.enc.finish(result));
          end();
        };
        if (e.result !== undefined) return finish(e.result);
        if (latest.state === 'succeeded') return finish(latest.result);
        void ctx.store.getJob(ownerId, job.id).then(
          (j) => finish(j?.result ?? null),
          (error: unknown) => giveBack(latest, `the job could not be read (${String(error)})`),
        );
        return;
      }
      // The client has events of this stream (sent now, or before: the cursor reached into it): it ends with its error.
      if (dataSent || resumedAttempt === e.attemptNumber || s.skipTo > 0) {
        emit(s.enc.error(e.error));
        return end();
      }
      // Nothing of this stream reached the client: wait for what the job does next (a failover's stream, or its end).
      stream = null;
      follower?.skip();
      ctx.jobs.refresh(ownerId, job.id);
    };

    /**
     * The job ended while no stream decided this answer: read the stored
     * stream once more; without one, answer from the job; with one whose end
     * is not stored yet (written just after the outcome), wait a little for it.
     */
    const settleFromJob = async (j: JobWithAttempts): Promise<void> => {
      if (follower !== null) await follower.refresh();
      if (done) return;
      const started = follower?.started === true;
      if (!started && j.state === 'succeeded' && (o.buffered || !isStreamingInput(j.input))) {
        replayResult(j);
        return end();
      }
      if (!started && j.state !== 'succeeded' && resumedAttempt === null) return giveBack(j, 'the job ended');
      graceTimer ??= setTimeout(() => {
        if (done) return;
        if (follower?.started === true || resumedAttempt !== null) return giveBack(latest, 'its stored stream has no end');
        if (latest.state === 'succeeded') {
          replayResult(latest);
          return end();
        }
        giveBack(latest, 'the job ended');
      }, STORED_END_GRACE_MS);
    };

    /** The job as committed, pushed or read (see JobWatch); a stream decides how this answer ends, the row is for requests without one. */
    const onJob = (j: JobWithAttempts | null): void => {
      if (done) return;
      if (j === null) return giveBack(latest, 'the job is gone');
      latest = j;
      if (!isJobTerminal(j.state) && j.state !== 'unknown') return;
      void settleFromJob(j).catch((error) => request.log.warn({ err: error }, 'stream settle failed'));
    };

    const keepAlive = setInterval(() => {
      if (!dataSent && !done) write(': keep-alive\n\n');
    }, keepAliveMs);
    const maxWait = setTimeout(onWaitEnd, o.maxWaitMs);
    raw.on('close', onClose);
    ctx.closing.addEventListener('abort', onWaitEnd);
    // Watching first, reading second: a stream or an outcome that came in between is not missed.
    follower?.start();
    offJob = ctx.jobs.watch(ownerId, job.id, {
      onJob,
      onError: (error) => request.log.warn({ err: error }, 'stream re-read failed; trying again at the next change'),
    }, { readNow: o.start === undefined && !isJobTerminal(job.state), state: job.state });
    if (endedAtEntry) onJob(job);
    o.start?.();
  });
}
