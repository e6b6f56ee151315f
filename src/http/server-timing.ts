/**
 * `Server-Timing` on the answers of `POST /v1/chat/completions` and
 * `POST /v1/jobs`, and the `onejob_gateway_overhead_seconds` histogram: how
 * much of a request's time onejob itself added, in the user's own traffic.
 *
 * ```
 * Server-Timing: onejob;dur=3.1, provider;dur=412.6
 * ```
 *
 * - `onejob` is the time in onejob: from Fastify receiving the request
 *   (`reply.elapsedTime`) to the answer being serialized, minus `provider`.
 * - `provider` is the time this process spent waiting on a provider for the
 *   answer's job (`onejob-job-id`) within the request's own window: from
 *   sending the provider request to its complete answer, overlapping
 *   attempts (a hedge) counted once, attempts before this request began (a
 *   replay that joined a finished job) not at all. It comes from
 *   `src/core/provider-waits.ts`, which the HTTP providers write; neither
 *   the executor nor the routes pass anything along.
 * - When the job's attempt ran in another process, this process has no
 *   record of it: the header then carries `onejob` only, as the whole time
 *   (`desc="provider time not known here"`), and the histogram is not
 *   observed (it would count the provider's time as ours).
 * - `POST /v1/jobs` waits on no provider: `provider;dur=0` and all of its
 *   time is overhead.
 *
 * A streamed answer (its payload a stream) is left alone: its headers leave
 * before the provider has finished.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { providerWaitWithin } from '../core/provider-waits.ts';
import type { Metrics } from './metrics.ts';

/** The response header carrying the job id of a chat completion (CONTRACT). */
const JOB_ID_HEADER = 'onejob-job-id';

type TimedRoute = 'chat_completions' | 'jobs_create';

function timedRoute(request: FastifyRequest): TimedRoute | null {
  if (request.method !== 'POST') return null;
  const url = request.routeOptions.url;
  if (url === '/v1/chat/completions') return 'chat_completions';
  if (url === '/v1/jobs') return 'jobs_create';
  return null;
}

function isStream(payload: unknown): boolean {
  return typeof payload === 'object' && payload !== null && typeof (payload as { pipe?: unknown }).pipe === 'function';
}

const ms = (x: number) => x.toFixed(1);

/** The `Server-Timing` value and the overhead (ms) of one answer, or null for routes not timed. */
export function serverTiming(request: FastifyRequest, reply: FastifyReply): { header: string; overheadMs: number | null; route: TimedRoute } | null {
  const route = timedRoute(request);
  if (route === null) return null;
  const totalMs = reply.elapsedTime;
  if (route === 'jobs_create') return { header: `onejob;dur=${ms(totalMs)}, provider;dur=0`, overheadMs: totalMs, route };
  const jobId = reply.getHeader(JOB_ID_HEADER);
  // Refused before it reached a job (400, 401, 422…): no provider was waited on.
  if (typeof jobId !== 'string') return { header: `onejob;dur=${ms(totalMs)}, provider;dur=0`, overheadMs: totalMs, route };
  const now = performance.now();
  const providerMs = providerWaitWithin(jobId, now - totalMs, now);
  if (providerMs === null) {
    // No provider call of this process for this job: either none happened during the request (a replay,
    // a refused request) or another process made it. Only the first is overhead we know of.
    return { header: `onejob;dur=${ms(totalMs)};desc="provider time not known here"`, overheadMs: null, route };
  }
  const overheadMs = Math.max(0, totalMs - providerMs);
  return { header: `onejob;dur=${ms(overheadMs)}, provider;dur=${ms(providerMs)}`, overheadMs, route };
}

/**
 * Adds the `onSend` hook. Call once on the root instance, before the routes.
 *
 * @example registerServerTiming(app, metrics);
 */
export function registerServerTiming(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (isStream(payload)) return payload;
    const timing = serverTiming(request, reply);
    if (timing === null) return payload;
    reply.header('server-timing', timing.header);
    if (timing.overheadMs !== null) metrics.gatewayOverhead.observe({ route: timing.route }, timing.overheadMs / 1000);
    return payload;
  });
}
