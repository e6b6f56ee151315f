/**
 * The fake provider's OpenAI Responses API (CONTRACT §11's `openai-responses`
 * upstream): `POST /v1/responses` in background mode, whole or streamed,
 * `GET /v1/responses/{id}` (the poll and the lookup), `GET
 * /v1/responses/{id}?stream=true&starting_after=<n>` (a resumed stream), and
 * `POST /v1/responses/{id}/cancel`.
 *
 * A response runs on its own, whoever listens: its events (`response.created`,
 * `response.in_progress`, the output items with their deltas, then
 * `response.completed` or `response.failed`), numbered by `sequence_number`,
 * are produced with the behaviour's timing (`task.runMs` before the output,
 * `chunkDelayMs` between events, `streamGate`), and every stream reads them
 * from the log: the create's stream from the start, a resume after
 * `starting_after`, live while the response runs. `streamCut` cuts the
 * create's connection (the work goes on), `streamError` fails the response,
 * `loseAnswer` loses every answer but the plain GET: a non-streamed create is
 * reset before its status line; a streamed one after its first events, and its
 * resumes are reset too, so only a lookup finds the work.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { abortableSleep } from '../abortable-sleep.ts';
import type { FakeApiContext } from './fake-api-context.ts';
import type { FakeBehaviour } from './fake-behaviour.ts';
import { authorizedHeaders, defaultErrorHeaders, readBody, refusedMethod, sendJson, startEventStream, written } from './fake-http.ts';
import { contentText, fittedBehaviour } from './fake-reply.ts';
import { argumentPieces, defaultChunks } from './fake-reply-pieces.ts';
import { sseEvent } from './fake-wire-protocol.ts';

/** A background response of the fake's Responses API (`POST /v1/responses`, `GET /v1/responses/{id}`, `POST …/cancel`). */
export interface FakeResponse {
  readonly id: string;
  /** `metadata.onejob_attempt_id` of the request (onejob's attempt). */
  readonly attemptId: string | null;
  readonly status: 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';
  readonly cancelRequested: boolean;
  /** Whether the create asked for a stream (`"stream": true`). */
  readonly stream: boolean;
  /** Streamed reads of it after the create (`GET …?stream=true`, resumes), and the `starting_after` of each (null: none given). */
  readonly resumes: readonly (number | null)[];
}

type Status = FakeResponse['status'];
type Event = { readonly type: string; readonly sequence_number: number; readonly [k: string]: unknown };

interface ResponseState {
  readonly id: string;
  readonly attemptId: string | null;
  readonly model: string;
  readonly stream: boolean;
  status: Status;
  /** Every event produced so far; `events[n].sequence_number === n`. */
  readonly events: Event[];
  /** The output items once completed. */
  output: unknown[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  error: { code: string; message: string } | null;
  cancelRequested: boolean;
  /** `loseAnswer` on a streamed create: every streamed read is cut. */
  lost: boolean;
  readonly resumes: (number | null)[];
  /** Wakes the streams waiting for the next event. */
  readonly waiters: Set<() => void>;
  /** Stops the work (a cancel, a reset, the server closing). */
  readonly stop: AbortController;
}

const FINAL = new Set<Status>(['completed', 'failed', 'cancelled']);
const CONTENT = new Set(['response.output_text.delta', 'response.function_call_arguments.delta', 'response.refusal.delta']);
const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete']);

/**
 * The fake Responses API.
 *
 * @example const api = new FakeResponsesApi(context); await api.handle(req, res, 'POST', undefined, false);
 */
export class FakeResponsesApi {
  readonly #context: FakeApiContext;
  readonly #responses = new Map<string, ResponseState>();

  constructor(context: FakeApiContext) {
    this.#context = context;
  }

  /** Every response created, oldest first. */
  get responses(): readonly FakeResponse[] {
    return [...this.#responses.values()].map((r) => ({ id: r.id, attemptId: r.attemptId, status: r.status, cancelRequested: r.cancelRequested, stream: r.stream, resumes: [...r.resumes] }));
  }

  /** Forgets every response (their work stops). */
  reset(): void {
    for (const r of this.#responses.values()) r.stop.abort();
    this.#responses.clear();
  }

  /** The route `…/responses(/{id}(/cancel)?)?`. */
  async handle(req: IncomingMessage, res: ServerResponse, method: string, id: string | undefined, cancel: boolean): Promise<void> {
    const headers = authorizedHeaders(req, res, (h) => this.#context.checkAuth('openai', h));
    if (headers === null) return;
    if (id === undefined) {
      if (refusedMethod(res, method, 'POST')) return;
      return this.#create(req, res, headers);
    }
    const r = this.#responses.get(id);
    if (r === undefined) return sendJson(res, 404, { error: { message: `No response found with id '${id}'.`, type: 'invalid_request_error' } });
    if (cancel) {
      if (refusedMethod(res, method, 'POST')) return;
      r.cancelRequested = true;
      if (!FINAL.has(r.status)) {
        r.status = 'cancelled';
        r.stop.abort();
        wake(r);
      }
      return sendJson(res, 200, responseBody(r));
    }
    if (refusedMethod(res, method, 'GET')) return;
    const query = new URL(req.url ?? '/', 'http://fake').searchParams;
    if (query.get('stream') === 'true') {
      const after = query.get('starting_after');
      const startingAfter = after === null || !/^-?\d+$/.test(after) ? null : Number(after);
      r.resumes.push(startingAfter);
      if (r.lost) {
        req.socket.resetAndDestroy();
        return;
      }
      return this.#pipe(r, res, startingAfter ?? -1, undefined);
    }
    this.#context.countLookup();
    return sendJson(res, 200, responseBody(r));
  }

  async #create(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>): Promise<void> {
    let body: { input?: unknown; model?: unknown; metadata?: { onejob_attempt_id?: unknown }; stream?: unknown };
    this.#context.noteSubmit(headers);
    try {
      body = JSON.parse((await readBody(req)) ?? '');
    } catch {
      return sendJson(res, 400, { error: { message: 'request body is not valid JSON' } });
    }
    let chosen: FakeBehaviour;
    try {
      chosen = this.#context.choose('openai', headers, { messages: [], ...body }).behaviour;
      if (chosen.fitRequest === true) chosen = fittedBehaviour(body, chosen);
    } catch (err) {
      return sendJson(res, 400, { error: { message: `fake provider: ${(err as Error).message}` } });
    }
    this.#context.noteSubmit(headers, chosen);
    if (chosen.status !== undefined && chosen.status >= 300) {
      return sendJson(res, chosen.status, { error: { message: 'scripted', ...chosen.error } }, { ...defaultErrorHeaders(chosen.status), ...(chosen.headers ?? {}) });
    }
    const stream = body.stream === true;
    const r: ResponseState = {
      id: `resp_fake_${this.#context.idPart}${this.#responses.size + 1}`,
      attemptId: typeof body.metadata?.onejob_attempt_id === 'string' ? body.metadata.onejob_attempt_id : null,
      model: chosen.model ?? (typeof body.model === 'string' ? body.model : 'fake-model'),
      stream, status: 'queued', events: [], output: [], usage: null, error: null,
      cancelRequested: false, lost: false, resumes: [], waiters: new Set(), stop: new AbortController(),
    };
    this.#responses.set(r.id, r);
    const closing = this.#context.closing;
    const onClose = () => r.stop.abort();
    closing.addEventListener('abort', onClose, { once: true });
    void this.#run(r, chosen, body.input).finally(() => closing.removeEventListener('abort', onClose));
    if (chosen.loseAnswer === true) {
      if (!stream) {
        req.socket.resetAndDestroy();
        return;
      }
      // The first events (the id) arrive, then the stream is lost, and so is every streamed read after it.
      r.lost = true;
      startEventStream(res, 200, chosen.headers ?? {});
      await written(res, r.events.slice(0, 2).map(sse).join(''));
      res.socket?.end();
      return;
    }
    if (stream) return this.#pipe(r, res, -1, chosen.streamCut?.afterChunks, chosen.headers ?? {});
    // Background mode answers at once, before the work is done.
    return sendJson(res, 200, responseBody(r), chosen.headers ?? {});
  }

  /** Produces the response's events, with the behaviour's timing; the streams read them from `r.events`. */
  async #run(r: ResponseState, b: FakeBehaviour, input: unknown): Promise<void> {
    const signal = r.stop.signal;
    const emit = (type: string, fields: Record<string, unknown>) => {
      r.events.push({ type, ...fields, sequence_number: r.events.length });
      wake(r);
    };
    emit('response.created', { response: responseBody(r) });
    r.status = 'in_progress';
    emit('response.in_progress', { response: responseBody(r) });
    const runMs = b.task?.runMs ?? 0;
    if (runMs > 0 && !(await abortableSleep(runMs, signal))) return;
    if (b.task?.status === 'canceled') {
      r.status = 'cancelled';
      return wake(r);
    }
    const fail = (message: string) => {
      r.status = 'failed';
      r.error = { code: 'server_error', message };
      emit('response.failed', { response: responseBody(r) });
    };
    if (b.task?.status === 'failed') return fail('the fake response failed (scripted)');

    const text = replyText(b, input);
    const pieces = b.chunks !== undefined ? [...b.chunks] : defaultChunks(text);
    const calls = (b.toolCalls ?? []).map((t, i) => ({
      id: `fc_${r.id}_${i}`,
      call_id: t.id ?? `call_fake_${r.id}_${i}`,
      name: t.name,
      arguments: t.arguments === undefined ? '{}' : typeof t.arguments === 'string' ? t.arguments : JSON.stringify(t.arguments),
    }));
    let content = 0;
    let first = true;
    /** Before an event: the pause, and at a content event (or the end) the gate and the scripted failure that are due. */
    const before = async (kind: 'framing' | 'content' | 'end'): Promise<boolean> => {
      if (kind !== 'framing') {
        const due = (after: number) => (kind === 'content' ? content === after : after >= content);
        if (b.streamGate !== undefined && due(b.streamGate.afterChunks) && !(await this.#context.waitGate(b.streamGate.gate, signal))) return false;
        if (b.streamError !== undefined && due(b.streamError.afterChunks)) {
          fail(b.streamError.message ?? 'The server had an error while processing your request.');
          return false;
        }
      }
      if (!first && b.chunkDelayMs !== undefined && b.chunkDelayMs > 0 && !(await abortableSleep(b.chunkDelayMs, signal))) return false;
      first = false;
      return !signal.aborted;
    };

    const output: unknown[] = [];
    if (pieces.length > 0 || calls.length === 0) {
      const item = { id: `msg_${r.id}`, type: 'message', role: 'assistant' };
      const index = output.length;
      if (!(await before('framing'))) return;
      emit('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress', content: [] } });
      if (!(await before('framing'))) return;
      emit('response.content_part.added', { item_id: item.id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      let sent = '';
      for (const piece of pieces) {
        if (!(await before('content'))) return;
        emit('response.output_text.delta', { item_id: item.id, output_index: index, content_index: 0, delta: piece, logprobs: [] });
        sent += piece;
        content += 1;
      }
      const part = { type: 'output_text', text: sent, annotations: [] };
      emit('response.output_text.done', { item_id: item.id, output_index: index, content_index: 0, text: sent, logprobs: [] });
      emit('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0, part });
      const done = { ...item, status: 'completed', content: [part] };
      emit('response.output_item.done', { output_index: index, item: done });
      output.push(done);
    }
    for (const call of calls) {
      const index = output.length;
      if (!(await before('framing'))) return;
      emit('response.output_item.added', { output_index: index, item: { type: 'function_call', ...call, arguments: '', status: 'in_progress' } });
      for (const piece of argumentPieces(call.arguments)) {
        if (!(await before('content'))) return;
        emit('response.function_call_arguments.delta', { item_id: call.id, output_index: index, delta: piece });
        content += 1;
      }
      emit('response.function_call_arguments.done', { item_id: call.id, output_index: index, name: call.name, arguments: call.arguments });
      const done = { type: 'function_call', ...call, status: 'completed' };
      emit('response.output_item.done', { output_index: index, item: done });
      output.push(done);
    }
    if (!(await before('end'))) return;
    const outputTokens = b.usage?.completion_tokens ?? Math.max(1, Math.ceil((text.length + calls.reduce((n, c) => n + c.name.length + c.arguments.length, 0)) / 4));
    const inputTokens = b.usage?.prompt_tokens ?? 5;
    r.output = output;
    r.usage = { input_tokens: inputTokens, output_tokens: outputTokens, total_tokens: inputTokens + outputTokens };
    r.status = 'completed';
    emit('response.completed', { response: responseBody(r) });
  }

  /**
   * Streams the response's events after `startingAfter` to one connection, live until the response ends.
   * `cutAfter`: cut this connection (not the work) once that many content events went out on it.
   */
  async #pipe(r: ResponseState, res: ServerResponse, startingAfter: number, cutAfter: number | undefined, headers: Record<string, string> = {}): Promise<void> {
    startEventStream(res, 200, headers);
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    let next = Math.max(0, startingAfter + 1);
    let content = 0;
    let lastWrite: Promise<void> = Promise.resolve();
    for (;;) {
      while (next < r.events.length) {
        const e = r.events[next]!;
        if (cutAfter !== undefined && (CONTENT.has(e.type) || TERMINAL.has(e.type)) && content >= cutAfter) {
          // end() (not destroy()) so the events written so far reach the client before the FIN; the body stays unterminated.
          await lastWrite;
          res.socket?.end();
          return;
        }
        if (res.destroyed) return;
        lastWrite = written(res, sse(e));
        next += 1;
        if (CONTENT.has(e.type)) content += 1;
        if (TERMINAL.has(e.type)) {
          res.end();
          return;
        }
      }
      if (FINAL.has(r.status)) {
        res.end();
        return;
      }
      if (!(await nextEvent(r, gone.signal))) return;
    }
  }
}

function wake(r: ResponseState): void {
  for (const w of r.waiters) w();
  r.waiters.clear();
}

/** Resolves true at the response's next event (or end), false when `signal` aborts first. */
function nextEvent(r: ResponseState, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onEvent = () => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    };
    const onAbort = () => {
      r.waiters.delete(onEvent);
      resolve(false);
    };
    r.waiters.add(onEvent);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function sse(e: Event): string {
  return sseEvent({ name: e.type, data: e });
}

/** The reply's text: `reply` (JSON text for a non-string), else `chunks` joined, else the last user input's text (an echo); none for a tool call only. */
function replyText(b: FakeBehaviour, input: unknown): string {
  if (b.reply !== undefined) return typeof b.reply === 'string' ? b.reply : JSON.stringify(b.reply);
  if (b.chunks !== undefined) return b.chunks.join('');
  if (b.toolCalls !== undefined) return '';
  if (typeof input === 'string') return input;
  const items = Array.isArray(input) ? (input as { role?: string; content?: unknown }[]) : [];
  const last = [...items].reverse().find((i) => i.role === 'user');
  return contentText(last?.content);
}

/** A Response object (OpenAI's shape) as it stands. */
function responseBody(r: ResponseState): Record<string, unknown> {
  const done = r.status === 'completed';
  return {
    id: r.id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: r.status,
    background: true,
    model: r.model,
    output: done ? r.output : [],
    error: r.status === 'failed' ? r.error ?? { code: 'server_error', message: 'the fake response failed (scripted)' } : null,
    incomplete_details: null,
    metadata: r.attemptId === null ? {} : { onejob_attempt_id: r.attemptId },
    usage: done ? r.usage : null,
  };
}
