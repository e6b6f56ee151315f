/**
 * Normalized {@link ChatDelta}s → the Responses API's server-sent events
 * (CONTRACT §12), for `POST /v1/responses` with `stream: true` and
 * `GET /v1/responses/{id}?stream=true`: `response.created`,
 * `response.in_progress`, then per output item `response.output_item.added`,
 * `response.content_part.added`, `response.output_text.delta` (or
 * `response.refusal.delta`, `response.function_call_arguments.delta`), their
 * `.done` events, `response.output_item.done`, and at the end
 * `response.completed` (or `response.incomplete`, `response.failed`, or an
 * `error` event when the stream breaks). Every event carries
 * `sequence_number`, 0, 1, 2, … in the order written; a live relay and the
 * replay of a stored result number the events of the same deltas alike.
 *
 * This module maps the job stream relay's events (`src/http/job-stream.ts`)
 * to Responses events and nothing else: the SSE `id:` of a resumable stream
 * is the relay's. Pure.
 */
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { completionDeltas } from '../providers/completion-accumulator.ts';
import type { ChatDelta } from '../providers/provider.ts';
import { normalizedOf } from './anthropic-messages.ts';
import { functionCallItemId, messageItemId, responseOf, type OnejobResponse, type ResponseJobView } from './openai-responses.ts';

/** Options of {@link ResponsesStreamEncoder}. */
export interface ResponsesStreamEncoderOptions {
  /** The job as the stream starts (its state is reported as `in_progress` until the end). */
  readonly job: Omit<ResponseJobView, 'state' | 'result' | 'error' | 'completedAt'>;
  /** When the job's winning attempt finished, when it already has (a replay's `completed_at`). Default: when {@link ResponsesStreamEncoder.finish} is called. */
  readonly completedAt?: Date | null | undefined;
  /** Only events whose `sequence_number` is greater are returned (`starting_after`). Default: all. */
  readonly startingAfter?: number | undefined;
}

/** A Responses stream event, or the `error` event with the members CONTRACT §7 names inside `error`. */
export type ResponsesSseEvent =
  | ResponseStreamEvent
  | { readonly type: 'error'; readonly sequence_number: number; readonly code: string; readonly message: string; readonly param: null; readonly error: { readonly code: string; readonly message: string; readonly job_id: string } };

/** The output item a {@link ResponsesStreamEncoder} has open. */
type OpenItem =
  | { readonly kind: 'message'; readonly id: string; readonly index: number; part: { readonly kind: 'text' | 'refusal'; readonly index: number; text: string } | null; readonly parts: unknown[] }
  | { readonly kind: 'call'; readonly id: string; readonly index: number; readonly tool: number; readonly callId: string; readonly name: string; args: string };

/**
 * Encodes deltas as Responses events with increasing sequence numbers.
 * {@link start} once (idempotent), {@link delta} per delta, {@link finish}
 * with the job's stored result at the end; each returns the events to send.
 * A stored result replays with {@link replay}.
 *
 * @example
 * const enc = new ResponsesStreamEncoder({ job: { jobId, createdAt, record } });
 * for (const e of [...enc.start(), ...enc.delta({ type: 'text', text: 'Hi' }), ...enc.finish(result)]) res.write(responsesSseEvent(e));
 */
export class ResponsesStreamEncoder {
  readonly #o: ResponsesStreamEncoderOptions;
  #seq = 0;
  #started = false;
  #open: OpenItem | null = null;
  #outputs = 0;
  #messageSeen = false;

  constructor(options: ResponsesStreamEncoderOptions) {
    this.#o = options;
  }

  /** `response.created` and `response.in_progress` (once). */
  start(): ResponsesSseEvent[] {
    if (this.#started) return [];
    this.#started = true;
    const snapshot = this.#snapshot('running');
    return [this.#emit({ type: 'response.created', response: snapshot }), this.#emit({ type: 'response.in_progress', response: snapshot })].filter(this.#after);
  }

  /** The events of one delta (none for `model`, `finish`, `usage`, `logprobs`: the final Response carries them). */
  delta(d: ChatDelta): ResponsesSseEvent[] {
    if (d.type !== 'text' && d.type !== 'refusal' && d.type !== 'tool_call') return [];
    const out: ResponsesSseEvent[] = [...this.start()];
    if (d.type === 'text' || d.type === 'refusal') {
      const kind = d.type === 'text' ? 'text' : 'refusal';
      if (this.#open?.kind !== 'message') out.push(...this.#close(), ...this.#openMessage());
      const m = this.#open as Extract<OpenItem, { kind: 'message' }>;
      if (m.part?.kind !== kind) out.push(...this.#closePart(m), ...this.#openPart(m, kind));
      if (d.text === '') return out.filter(this.#after);
      m.part!.text += d.text;
      out.push(
        kind === 'text'
          ? this.#emit({ type: 'response.output_text.delta', item_id: m.id, output_index: m.index, content_index: m.part!.index, delta: d.text, logprobs: [] })
          : this.#emit({ type: 'response.refusal.delta', item_id: m.id, output_index: m.index, content_index: m.part!.index, delta: d.text }),
      );
      return out.filter(this.#after);
    }
    if (this.#open?.kind !== 'call' || this.#open.tool !== d.index) {
      out.push(...this.#close());
      const index = this.#outputs++;
      const call: OpenItem = { kind: 'call', id: functionCallItemId(this.#o.job.jobId, d.index), index, tool: d.index, callId: d.id ?? `call_${this.#o.job.jobId}_${d.index}`, name: d.name ?? '', args: '' };
      this.#open = call;
      out.push(this.#emit({ type: 'response.output_item.added', output_index: index, item: { id: call.id, type: 'function_call', call_id: call.callId, name: call.name, arguments: '', status: 'in_progress' } }));
    }
    const call = this.#open as Extract<OpenItem, { kind: 'call' }>;
    if (d.arguments !== undefined && d.arguments !== '') {
      call.args += d.arguments;
      out.push(this.#emit({ type: 'response.function_call_arguments.delta', item_id: call.id, output_index: call.index, delta: d.arguments }));
    }
    return out.filter(this.#after);
  }

  /**
   * Closes the open item (an answer with no output at all gets its empty
   * message, as the stored Response has), then `response.completed` (or
   * `response.incomplete`) with the Response of the job's stored `result`:
   * what `GET /v1/responses/{id}` answers (its `completed_at` is
   * `completedAt`, by default the option's, else when the relay saw the end).
   */
  finish(result: unknown, completedAt: Date = this.#o.completedAt ?? new Date()): ResponsesSseEvent[] {
    const out: ResponsesSseEvent[] = [...this.start()];
    if (this.#outputs === 0) out.push(...this.delta({ type: 'text', text: '' }));
    out.push(...this.#close());
    const response = responseOf({ ...this.#o.job, state: 'succeeded', result, error: null, completedAt });
    out.push(this.#emit(response.status === 'incomplete' ? { type: 'response.incomplete', response } : { type: 'response.completed', response }));
    return out.filter(this.#after);
  }

  /** Every event of a stored result (a replay), from `response.created` to `response.completed`. */
  replay(result: unknown, completedAt?: Date): ResponsesSseEvent[] {
    const c = normalizedOf(result, this.#o.job.record.model);
    return [...this.start(), ...completionDeltas(c).flatMap((d) => this.delta(d)), ...this.finish(result, completedAt)];
  }

  /** `response.failed`: the job failed (every provider failed definitely), with its error. */
  failed(message: string): ResponsesSseEvent[] {
    const response = responseOf({ ...this.#o.job, state: 'failed', result: null, error: { code: 'job_failed', message }, completedAt: null });
    return [...this.start().filter(this.#after), this.#ending(this.#emit({ type: 'response.failed', response }))];
  }

  /** The `error` event of a stream that breaks (CONTRACT §7: `error.code`, `error.message`, `error.job_id`); no terminal event follows. */
  error(e: { readonly code: string; readonly message: string }): ResponsesSseEvent[] {
    // The start first, so that the error is numbered after it.
    const start = this.start().filter(this.#after);
    const event = this.#emit({ type: 'error', code: e.code, message: e.message, param: null, error: { code: e.code, message: e.message, job_id: this.#o.job.jobId } } as never);
    return [...start, this.#ending(event)];
  }

  /**
   * A stream's ending event is always sent to a resume, even below its cursor: `starting_after` names no attempt, so
   * a cursor taken from an attempt that failed over can lie past everything the job's stream now has; dropping the
   * ending would leave that client an empty 200 with neither a terminator nor an `error` (CONTRACT §7: a break ends
   * in an `error` event). Below the cursor it takes the number after it, so the client's numbers still increase.
   */
  #ending(event: ResponsesSseEvent): ResponsesSseEvent {
    const after = this.#o.startingAfter;
    return after === undefined || event.sequence_number > after ? event : { ...event, sequence_number: after + 1 };
  }

  readonly #after = (e: ResponsesSseEvent): boolean => this.#o.startingAfter === undefined || e.sequence_number > this.#o.startingAfter;

  #emit<E extends ResponsesSseEvent>(event: Omit<E, 'sequence_number'> | Record<string, unknown>): E {
    return { ...(event as object), sequence_number: this.#seq++ } as E;
  }

  #snapshot(state: 'running'): OnejobResponse {
    return responseOf({ ...this.#o.job, state, result: null, error: null, completedAt: null });
  }

  #openMessage(): ResponsesSseEvent[] {
    const index = this.#outputs++;
    const id = this.#messageSeen ? `${messageItemId(this.#o.job.jobId)}_${index}` : messageItemId(this.#o.job.jobId);
    this.#messageSeen = true;
    this.#open = { kind: 'message', id, index, part: null, parts: [] };
    return [this.#emit({ type: 'response.output_item.added', output_index: index, item: { id, type: 'message', role: 'assistant', status: 'in_progress', content: [] } })];
  }

  #openPart(m: Extract<OpenItem, { kind: 'message' }>, kind: 'text' | 'refusal'): ResponsesSseEvent[] {
    m.part = { kind, index: m.parts.length, text: '' };
    m.parts.push(null);
    const part = kind === 'text' ? { type: 'output_text', text: '', annotations: [], logprobs: [] } : { type: 'refusal', refusal: '' };
    return [this.#emit({ type: 'response.content_part.added', item_id: m.id, output_index: m.index, content_index: m.part.index, part })];
  }

  #closePart(m: Extract<OpenItem, { kind: 'message' }>): ResponsesSseEvent[] {
    const p = m.part;
    if (p === null) return [];
    m.part = null;
    const part = p.kind === 'text' ? { type: 'output_text', text: p.text, annotations: [], logprobs: [] } : { type: 'refusal', refusal: p.text };
    m.parts[p.index] = part;
    const base = { item_id: m.id, output_index: m.index, content_index: p.index };
    return [
      p.kind === 'text'
        ? this.#emit({ type: 'response.output_text.done', ...base, text: p.text, logprobs: [] })
        : this.#emit({ type: 'response.refusal.done', ...base, refusal: p.text }),
      this.#emit({ type: 'response.content_part.done', ...base, part }),
    ];
  }

  #close(): ResponsesSseEvent[] {
    const open = this.#open;
    if (open === null) return [];
    this.#open = null;
    if (open.kind === 'message') {
      const out = this.#closePart(open);
      out.push(this.#emit({ type: 'response.output_item.done', output_index: open.index, item: { id: open.id, type: 'message', role: 'assistant', status: 'completed', content: open.parts } }));
      return out;
    }
    return [
      this.#emit({ type: 'response.function_call_arguments.done', item_id: open.id, output_index: open.index, name: open.name, arguments: open.args }),
      this.#emit({
        type: 'response.output_item.done',
        output_index: open.index,
        item: { id: open.id, type: 'function_call', call_id: open.callId, name: open.name, arguments: open.args, status: 'completed' },
      }),
    ];
  }
}

/**
 * One Responses event as SSE text: `event: <type>` and `data: <json>`.
 *
 * @example responsesSseEvent({ type: 'response.output_text.delta', … }) // 'event: response.output_text.delta\ndata: {…}\n\n'
 */
export function responsesSseEvent(event: ResponsesSseEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}
