/**
 * The fake provider's HTTP plumbing, shared by its protocols
 * (`src/providers/fake/`): reading a request, answering JSON, writing an
 * event stream. Node's `http` only; nothing here knows a protocol.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The largest request body the fake reads (a larger one is answered 413). */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Request headers as one string each, names lower-cased. */
export function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The request body as text, or null when it exceeds {@link MAX_BODY_BYTES}. */
export function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Answers `value` as JSON (nothing when the response is already gone). */
export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  sendText(res, status, JSON.stringify(value), headers);
}

/** Answers exactly `text`, typed as JSON (nothing when the response is already gone). */
export function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** Starts an event stream: the status and SSE headers, flushed at once. */
export function startEventStream(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
  res.flushHeaders();
}

/** Writes `chunk` to the response; resolves once it has been handed to the socket (or the response is gone). */
export function written(res: ServerResponse, chunk: string): Promise<void> {
  return new Promise((resolve) => {
    res.write(chunk, () => resolve());
  });
}

/** The `retry-after` the real APIs send with a 429, 503 or 529. */
export function defaultErrorHeaders(status: number): Record<string, string> {
  return status === 429 || status === 503 || status === 529 ? { 'retry-after': '1' } : {};
}

/** Answers `405` (OpenAI's error shape) unless the request's `method` is `allowed`; true when it answered. */
export function refusedMethod(res: ServerResponse, method: string, allowed: 'GET' | 'POST'): boolean {
  if (method === allowed) return false;
  sendJson(res, 405, { error: { message: `${method} is not allowed here` } });
  return true;
}

/**
 * The headers of a request to one of the fake's JSON APIs (responses, tasks), or null once it was answered with
 * the `401` that `checkAuth` gave.
 */
export function authorizedHeaders(req: IncomingMessage, res: ServerResponse, checkAuth: (headers: Record<string, string>) => { readonly status: number; readonly message: string } | null): Record<string, string> | null {
  const headers = flattenHeaders(req);
  const auth = checkAuth(headers);
  if (auth === null) return headers;
  sendJson(res, auth.status, { error: { message: auth.message } });
  return null;
}
