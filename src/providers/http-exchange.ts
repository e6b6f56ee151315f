/**
 * One JSON POST over undici, reporting exactly how far it got, so that the
 * adapters can tell "never sent" from "sent, then lost".
 *
 * It uses undici's dispatcher API directly, with no retries, redirects or
 * timeouts of its own. Connections are kept alive and reused per provider
 * origin (the agent of {@link createProviderAgent}, one per provider, closed
 * by the provider's `close()`): a call no longer pays a TCP (and TLS)
 * handshake.
 *
 * A reused socket the provider has just closed is not an ambiguous outcome
 * as long as its close reached us before the request was written: undici
 * (7.30, GHSA-35p6-xmwp-9g52) yields one event-loop turn before writing on
 * an idle kept-alive socket, so a FIN or RST already pending on it is read
 * first; the socket is then dropped and the request, still queued and never
 * written (`onRequestStart` not called), goes out on a fresh connection. It
 * is sent exactly once. A close that crosses the request on the wire (the
 * provider closes while our bytes are in flight) stays `lost`: those bytes
 * may have reached the provider, and nothing on our side can prove they were
 * not read. The client's idle timeout (`keepAliveTimeout`, and the
 * provider's own `Keep-Alive: timeout=` hint minus a margin) makes that
 * window rare with servers that close idle sockets on a timer. See
 * docs/provider-connections.md.
 *
 * "Sent" means undici has started writing the request on an open connection
 * (its `onRequestStart` hook, which it calls right before writing the
 * headers and body synchronously). Everything that fails before that point
 * (refused, DNS, connect timeout, TLS, an abort while connecting) is
 * reported as `not_sent`.
 */
import { Agent, type Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';

/** How far one exchange got. */
export type HttpExchange =
  /** A whole response arrived. */
  | { readonly kind: 'response'; readonly status: number; readonly headers: IncomingHttpHeaders; readonly body: string }
  /** Nothing was written: the provider cannot have it. */
  | { readonly kind: 'not_sent'; readonly aborted: boolean; readonly cause: unknown }
  /** Written, then no complete response: aborted by the caller, the connection broke, or the body was too large. */
  | {
      readonly kind: 'lost';
      readonly phase: 'after_send' | 'after_headers';
      readonly aborted: boolean;
      readonly status?: number | undefined;
      readonly headers?: IncomingHttpHeaders | undefined;
      readonly cause: unknown;
    };

/** Parameters of {@link postJson}. */
export interface PostJsonParams {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
  /** `GET` sends no body (a lookup); default `POST`. */
  readonly method?: 'POST' | 'GET' | undefined;
  readonly signal: AbortSignal;
  /** Called once, right after the request has been written (on a microtask after undici's `onRequestStart`). */
  readonly onDispatched?: (() => void) | undefined;
  /** A response body larger than this is cut off and reported as lost. Default 32 MiB. */
  readonly maxResponseBytes?: number | undefined;
  /**
   * Streaming: called once the status and headers of a 2xx response have
   * arrived. Return a sink to receive the body's chunks as they arrive
   * (they are then not buffered, and the exchange's `body` is `''`), or null
   * to buffer the body as usual. A sink that returns `false` stops the
   * exchange: the connection is closed and the exchange settles as a
   * `response` at once (the consumer has what it needs, e.g. an error event).
   */
  readonly onBody?: ((status: number, headers: IncomingHttpHeaders) => ((chunk: Buffer) => boolean) | null) | undefined;
}

/** The reason given to undici when a body sink stopped reading. */
export class BodySinkStoppedError extends Error {
  override readonly name = 'BodySinkStoppedError';
}

/** Raised (as a cause) when a response body exceeds `maxResponseBytes`. */
export class ResponseTooLargeError extends Error {
  override readonly name = 'ResponseTooLargeError';
  readonly code = 'ONEJOB_RESPONSE_TOO_LARGE';
}

/** Options of {@link createProviderAgent}. */
export interface ProviderAgentOptions {
  /** How long establishing a connection may take; failing it is a definite failure. Default 10000. */
  readonly connectTimeoutMs?: number | undefined;
  /** How long an idle kept-alive connection is kept when the provider gives no `Keep-Alive: timeout=` hint. Default 4000. */
  readonly keepAliveTimeoutMs?: number | undefined;
}

/**
 * The undici dispatcher providers use: one pool of kept-alive connections
 * per origin, no timeouts after connecting (the caller's signal is the
 * deadline), a bounded connect timeout. Idle connections are closed by us
 * before the provider would close them: after `keepAliveTimeoutMs`, or the
 * provider's `Keep-Alive: timeout=` hint less one second.
 */
export function createProviderAgent(options: ProviderAgentOptions = {}): Agent {
  return new Agent({
    connect: { timeout: options.connectTimeoutMs ?? 10_000 },
    headersTimeout: 0,
    bodyTimeout: 0,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000,
    keepAliveMaxTimeout: 600_000,
    keepAliveTimeoutThreshold: 1_000,
    pipelining: 1,
  });
}

const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * POSTs `body` as JSON and reports how far it got. Never rejects.
 *
 * @example const ex = await postJson(agent, { url: new URL('http://127.0.0.1:4010/v1/chat/completions'), headers: {}, body, signal });
 */
export function postJson(dispatcher: Dispatcher, params: PostJsonParams): Promise<HttpExchange> {
  const { signal } = params;
  if (signal.aborted) return Promise.resolve({ kind: 'not_sent', aborted: true, cause: signal.reason });
  const method = params.method ?? 'POST';
  const payload = method === 'GET' ? null : Buffer.from(JSON.stringify(params.body), 'utf8');
  const maxBytes = params.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;

  return new Promise<HttpExchange>((resolve) => {
    let settled = false;
    let sent = false;
    let dispatchedCalled = false;
    let controller: Dispatcher.DispatchController | null = null;
    let status: number | undefined;
    let headers: IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let sink: ((chunk: Buffer) => boolean) | null = null;

    const settle = (exchange: HttpExchange) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      resolve(exchange);
    };
    const lost = (aborted: boolean, cause: unknown): HttpExchange => ({
      kind: 'lost',
      phase: status === undefined ? 'after_send' : 'after_headers',
      aborted,
      status,
      headers,
      cause,
    });
    const notifyDispatched = () => {
      if (dispatchedCalled) return;
      dispatchedCalled = true;
      try {
        params.onDispatched?.();
      } catch {
        // The callback's failure is the caller's business; the exchange goes on.
      }
    };
    const onAbort = () => {
      const reason: unknown = signal.reason;
      if (!sent) {
        // Not yet written: when undici gets to it, onRequestStart aborts it unsent.
        settle({ kind: 'not_sent', aborted: true, cause: reason });
        return;
      }
      settle(lost(true, reason));
      controller?.abort(reason instanceof Error ? reason : new Error('aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (settled) {
          c.abort(signal.reason instanceof Error ? signal.reason : new Error('aborted before send'));
          return;
        }
        sent = true;
        // undici writes the request synchronously after this hook returns.
        queueMicrotask(notifyDispatched);
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        if (statusCode < 200) return; // 1xx informational
        notifyDispatched();
        status = statusCode;
        headers = responseHeaders;
        if (params.onBody !== undefined && statusCode >= 200 && statusCode < 300) sink = params.onBody(statusCode, responseHeaders);
      },
      onResponseData(c, chunk) {
        size += chunk.length;
        if (size > maxBytes) {
          const err = new ResponseTooLargeError(`response body exceeds ${maxBytes} bytes`);
          settle(lost(false, err));
          c.abort(err);
          return;
        }
        if (sink === null) {
          chunks.push(chunk);
          return;
        }
        if (settled) return;
        let more = true;
        try {
          more = sink(chunk);
        } catch {
          more = false;
        }
        if (!more) {
          settle({ kind: 'response', status: status ?? 0, headers: headers ?? {}, body: '' });
          c.abort(new BodySinkStoppedError('the body sink stopped reading'));
        }
      },
      onResponseEnd() {
        settle({ kind: 'response', status: status ?? 0, headers: headers ?? {}, body: Buffer.concat(chunks).toString('utf8') });
      },
      onResponseError(_c, err) {
        settle(sent ? lost(false, err) : { kind: 'not_sent', aborted: false, cause: err });
      },
    };

    try {
      dispatcher.dispatch(
        {
          origin: params.url.origin,
          path: `${params.url.pathname}${params.url.search}`,
          method,
          headers: payload === null ? { ...params.headers } : { ...params.headers, 'content-type': 'application/json' },
          body: payload,
          // Kept alive (no `reset`); never pipelined behind another request (`idempotent: false`).
          idempotent: false,
          blocking: true,
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        handler,
      );
    } catch (err) {
      settle({ kind: 'not_sent', aborted: false, cause: err });
    }
  });
}
