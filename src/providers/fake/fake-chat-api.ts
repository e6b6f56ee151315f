/**
 * The fake provider's chat endpoints (`POST /v1/chat/completions`, `POST
 * /v1/messages`): one call recorded in the call log, checked as the real API
 * would, given its behaviour, and run against its wire protocol
 * (`fake-chat-completions.ts`, `fake-anthropic-messages.ts`). The behaviour's
 * steps are the same on both wires: wait for the `gate`, wait `delayMs`,
 * then one action: `hang`, `reset`, an error `status`, `malformed`,
 * `rawBody`, or the reply (stored first when asked, `loseAnswer`, streamed
 * with its timing, gate, error or cut).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { abortableSleep } from '../abortable-sleep.ts';
import type { FakeApiContext, FakeCallSource } from './fake-api-context.ts';
import type { FakeBehaviour } from './fake-behaviour.ts';
import { FINAL_RESULTS, type FakeCallLog, type MutableCall } from './fake-call.ts';
import { defaultErrorHeaders, flattenHeaders, readBody, sendJson, sendText, startEventStream, written } from './fake-http.ts';
import type { FakeStoredCompletions } from './fake-stored-completions.ts';
import { sseEvent, type FakeWireProtocol } from './fake-wire-protocol.ts';

/**
 * The chat endpoints.
 *
 * @example await chat.handle(req, res, fakeChatCompletions, 'POST', '/v1/chat/completions');
 */
export class FakeChatApi {
  readonly #context: FakeApiContext;
  readonly #log: FakeCallLog;
  readonly #stored: FakeStoredCompletions;

  constructor(context: FakeApiContext, log: FakeCallLog, stored: FakeStoredCompletions) {
    this.#context = context;
    this.#log = log;
    this.#stored = stored;
  }

  /** One request to a chat endpoint of `wire`. */
  async handle(req: IncomingMessage, res: ServerResponse, wire: FakeWireProtocol, method: string, path: string): Promise<void> {
    if (method !== 'POST') return wire.sendError(res, 405, { message: `${method} is not allowed here` });
    const protocol = wire.protocol;
    const text = await readBody(req);
    let body: unknown = text;
    let bodyIsJson = true;
    try {
      body = JSON.parse(text ?? '');
    } catch {
      bodyIsJson = false;
      body = text ?? '';
    }
    const headers = flattenHeaders(req);
    const call = this.#log.add({
      protocol,
      method,
      path,
      headers,
      idempotencyKey: headers['idempotency-key'] ?? null,
      jobId: headers['onejob-job-id'] ?? null,
      attemptId: headers['onejob-attempt-id'] ?? null,
      body,
      receivedAt: new Date().toISOString(),
      source: null,
      behaviour: null,
      result: 'pending',
      status: null,
      finishedAt: null,
      stream: typeof body === 'object' && body !== null && (body as { stream?: unknown }).stream === true,
      chunksSent: 0,
    });
    if (method === 'POST') this.#context.noteSubmit(headers);
    // Stops a pending gate or delay when the client goes away or the server closes.
    const controller = new AbortController();
    const closing = this.#context.closing;
    const onClosing = () => controller.abort();
    closing.addEventListener('abort', onClosing, { once: true });
    res.on('close', () => {
      closing.removeEventListener('abort', onClosing);
      controller.abort();
      if (!FINAL_RESULTS.has(call.result)) this.#log.finish(call, closing.aborted ? 'server-closed' : 'client-closed');
    });

    const rejection = text === null
      ? { status: 413, message: 'request body too large' }
      : !bodyIsJson
        ? { status: 400, message: 'request body is not valid JSON' }
        : this.#context.checkAuth(protocol, headers) ?? wire.validate(body);
    if (rejection !== null) {
      wire.sendError(res, rejection.status, { message: rejection.message, type: rejection.status === 401 ? undefined : 'invalid_request_error' });
      return this.#log.finish(call, 'rejected', rejection.status);
    }

    let chosen: { behaviour: FakeBehaviour; source: FakeCallSource };
    try {
      chosen = this.#context.choose(protocol, headers, body);
    } catch (err) {
      wire.sendError(res, 400, { message: `fake provider: ${(err as Error).message}`, type: 'invalid_request_error' });
      return this.#log.finish(call, 'rejected', 400);
    }
    call.source = chosen.source;
    call.behaviour = chosen.behaviour;
    this.#context.noteSubmit(headers, chosen.behaviour);
    await this.#act(wire, call, chosen.behaviour, req, res, controller.signal);
  }

  async #act(wire: FakeWireProtocol, call: MutableCall, b: FakeBehaviour, req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    if (b.gate !== undefined && !(await this.#context.waitGate(b.gate, signal))) return;
    if (b.delayMs !== undefined && b.delayMs > 0 && !(await abortableSleep(b.delayMs, signal))) return;
    if (signal.aborted || res.destroyed) return;

    if (b.hang === true) {
      call.result = 'hanging';
      return; // the 'close' listener records how it ended
    }
    const extraHeaders = { ...wire.requestIdHeader(call.seq), ...(b.headers ?? {}) };

    if (b.reset === 'before-headers') {
      this.#log.finish(call, 'reset');
      req.socket.resetAndDestroy();
      return;
    }
    if (b.reset !== undefined) {
      const full = JSON.stringify(wire.completion(call, b));
      res.writeHead(b.status ?? 200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(full)), ...extraHeaders });
      if (b.reset === 'mid-body') await written(res, full.slice(0, Math.floor(full.length / 2)));
      else res.flushHeaders();
      this.#log.finish(call, 'reset', b.status ?? 200);
      // end() (not destroy()) so what was written reaches the client before the FIN.
      res.socket?.end();
      return;
    }
    if (b.status !== undefined && b.status >= 300) {
      const headers = { ...defaultErrorHeaders(b.status), ...extraHeaders };
      wire.sendError(res, b.status, { ...b.error }, headers);
      return this.#log.finish(call, 'error', b.status);
    }
    const status = b.status ?? 200;
    if (b.malformed === true) {
      const full = JSON.stringify(wire.completion(call, b));
      sendText(res, status, full.slice(0, Math.max(1, Math.floor(full.length / 2))), extraHeaders);
      return this.#log.finish(call, 'malformed', status);
    }
    if (b.rawBody !== undefined) {
      sendText(res, status, b.rawBody, extraHeaders);
      return this.#log.finish(call, 'raw', status);
    }
    // The work is done: a request with `store: true` is stored, whether or not its answer arrives.
    const completion = wire.completion(call, b);
    if (wire.protocol === 'openai') this.#stored.keep(completion, call.body);
    if (b.loseAnswer === true) {
      this.#log.finish(call, 'reset');
      req.socket.resetAndDestroy();
      return;
    }
    if (call.stream) return this.#stream(wire, call, b, res, status, extraHeaders, signal);
    sendJson(res, status, completion, extraHeaders);
    this.#log.finish(call, 'replied', status);
  }

  /** Sends the reply as the protocol's event stream, with the behaviour's timing, gate, error or cut. */
  async #stream(wire: FakeWireProtocol, call: MutableCall, b: FakeBehaviour, res: ServerResponse, status: number, headers: Record<string, string>, signal: AbortSignal): Promise<void> {
    const plan = wire.streamPlan(call, b);
    startEventStream(res, status, headers);
    call.status = status;
    let first = true;
    // A cut ends the socket itself, past the response's own buffer: it waits for the events written so far
    // to reach the socket (Node 26 holds a write in the response until the next tick; ending at once lost it).
    let lastWrite: Promise<void> = Promise.resolve();
    for (const step of plan) {
      if (step.kind !== 'framing') {
        const n = call.chunksSent;
        // At a content event: after exactly `afterChunks`; at the end event: any count not reached yet.
        const due = (after: number) => (step.kind === 'content' ? n === after : after >= n);
        if (b.streamGate !== undefined && due(b.streamGate.afterChunks) && !(await this.#context.waitGate(b.streamGate.gate, signal))) return;
        if (b.streamError !== undefined && due(b.streamError.afterChunks)) {
          res.end(sseEvent(wire.errorEvent(b.streamError)));
          return this.#log.finish(call, 'stream-error', status);
        }
        if (b.streamCut !== undefined && due(b.streamCut.afterChunks)) {
          await lastWrite;
          this.#log.finish(call, 'reset', status);
          // end() (not destroy()) so the events written so far reach the client before the FIN; the body stays unterminated.
          res.socket?.end();
          return;
        }
      }
      if (!first && b.chunkDelayMs !== undefined && b.chunkDelayMs > 0 && !(await abortableSleep(b.chunkDelayMs, signal))) return;
      first = false;
      if (signal.aborted || res.destroyed) return;
      lastWrite = written(res, sseEvent(step.event));
      if (step.kind === 'content') call.chunksSent += 1;
    }
    res.end();
    this.#log.finish(call, 'replied', status);
  }
}
