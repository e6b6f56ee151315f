/**
 * The head of every server-sent-events answer (the job streams of CONTRACT
 * §7 and the dashboard's event feed), in one place: the type, no caching or
 * transformation by a proxy, no buffering by nginx-style proxies.
 */
import type { ServerResponse } from 'node:http';

/** Writes `200 text/event-stream` with `headers` (the reply's own so far) on `res`. */
export function writeSseHead(res: ServerResponse, headers: Record<string, string | number | string[]>): void {
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
}
