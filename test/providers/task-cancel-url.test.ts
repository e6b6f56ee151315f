/**
 * A `task` attempt is stopped at the `urls.cancel` its task answered, when it
 * answered one (CONTRACT §15), on the service's own origin; else (none given,
 * or another origin) at `{baseUrl}/{id}/cancel`. A real HTTP task service.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TaskProvider } from '../../src/providers/task/task-provider.ts';

/** A task service whose create answers `urls` (built from its own URL), and that records every request. */
async function service(urls: (base: string, id: string) => Record<string, string> | undefined) {
  const seen: string[] = [];
  let base = '';
  const server: Server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    const id = 'task_1';
    const body = { id, status: 'processing', ...(urls(base, id) === undefined ? {} : { urls: urls(base, id) }) };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, seen, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

/** Runs an attempt until its first poll, stops listening (the job was won elsewhere), then stops the task upstream. */
async function runAndStop(provider: TaskProvider, seen: string[]): Promise<void> {
  const abort = new AbortController();
  const outcome = provider.call({ input: { prompt: 'x' } as never, jobId: 'job_1', attemptId: 'att_1', attemptNumber: 1, signal: abort.signal });
  for (let i = 0; i < 200 && !seen.some((s) => s.startsWith('GET')); i++) await new Promise((r) => setTimeout(r, 10));
  abort.abort();
  expect((await outcome).kind).toBe('ambiguous');
  await provider.stopUpstream({ attemptId: 'att_1', providerRequestId: 'task_1', signal: AbortSignal.timeout(5_000) });
}

describe('task: the stop goes to urls.cancel', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((c) => c()));
  });

  it('the create answered urls.cancel: the stop is POSTed there', async () => {
    const s = await service((base, id) => ({ get: `${base}/v2/predictions/${id}`, cancel: `${base}/v2/predictions/${id}/stop` }));
    closers.push(s.close);
    const provider = new TaskProvider('render', { type: 'task', baseUrl: `${s.base}/v1/tasks`, pollIntervalMs: 20 });
    closers.push(() => provider.close());
    await runAndStop(provider, s.seen);
    expect(s.seen[0]).toBe('POST /v1/tasks');
    expect(s.seen).toContain('GET /v2/predictions/task_1');
    expect(s.seen.at(-1)).toBe('POST /v2/predictions/task_1/stop');
    expect(s.seen).not.toContain('POST /v1/tasks/task_1/cancel');
  });

  it('none given, or on another origin: the default {baseUrl}/{id}/cancel', async () => {
    for (const urls of [() => undefined, (_: string, id: string) => ({ cancel: `http://example.invalid/steal/${id}` })]) {
      const s = await service(urls);
      closers.push(s.close);
      const provider = new TaskProvider('render', { type: 'task', baseUrl: `${s.base}/v1/tasks`, pollIntervalMs: 20 });
      closers.push(() => provider.close());
      await runAndStop(provider, s.seen);
      expect(s.seen.at(-1)).toBe('POST /v1/tasks/task_1/cancel');
    }
  });
});
