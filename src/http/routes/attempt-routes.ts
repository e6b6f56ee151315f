/**
 * Attempt routes: list a job's attempts, start one (the fallback button),
 * resolve one (the explicit way out of doubt).
 */
import type { FastifyInstance } from 'fastify';
import { OnejobError } from '../../core/errors.ts';
import type { RecordedError } from '../../core/types.ts';
import type { AttemptOutcome } from '../../store/store.ts';
import { attemptBody, jobBody } from '../api-bodies.ts';
import {
  bearerSecurity, errorResponses, idParams, resolveAttemptBody, startAttemptBody,
  type IdParams, type ResolveAttemptBody, type StartAttemptBody,
} from '../api-schemas.ts';
import { bindLog, type AppContext } from '../app-context.ts';
import { requestOwner, requestWriter } from '../request-owner.ts';
import { countDoubtResolved } from '../metrics.ts';

/**
 * The recorded error of a resolution: an object with string `code` and
 * `message` is kept as is; any other JSON is wrapped as its `details`.
 */
export function resolutionError(given: unknown, state: 'failed' | 'cancelled'): RecordedError {
  if (given !== null && typeof given === 'object' && !Array.isArray(given)) {
    const { code, message, ...rest } = given as Record<string, unknown>;
    if (typeof code === 'string' && typeof message === 'string') {
      const details = 'details' in rest ? rest.details : Object.keys(rest).length > 0 ? rest : undefined;
      return details === undefined ? { code, message } : { code, message, details };
    }
  }
  const base = { code: state === 'failed' ? 'resolved_failed' : 'resolved_cancelled', message: `resolved ${state} through the API` };
  return given === undefined ? base : { ...base, details: given };
}

/** Registers the attempt routes. */
export function registerAttemptRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { store, config, metrics } = ctx;

  app.get<{ Params: IdParams }>('/v1/jobs/:id/attempts', {
    schema: {
      tags: ['attempts'],
      summary: "List a job's attempts, oldest first",
      security: bearerSecurity,
      params: idParams,
      response: {
        200: {
          description: 'The attempts.',
          type: 'object',
          required: ['data'],
          properties: { data: { type: 'array', items: { $ref: 'Attempt#' } } },
        },
        ...errorResponses,
      },
    },
    handler: async (request, reply) => {
      const job = await store.getJob(requestOwner(request), request.params.id);
      if (job === null) throw new OnejobError('job_not_found', `no job ${request.params.id}`, { details: { job_id: request.params.id } });
      bindLog(request, reply, { job_id: job.id });
      return { data: job.attempts.map(attemptBody) };
    },
  });

  app.post<{ Params: IdParams; Body: StartAttemptBody | undefined }>('/v1/jobs/:id/attempts', {
    schema: {
      tags: ['attempts'],
      summary: 'Start an attempt (manual fallback)',
      description:
        'Starts a new attempt on `provider`, or by default on the first provider of the chain that has no attempt yet. Refused with 422 `provider_unknown`, then 409 `attempt_in_doubt`, `attempt_in_flight`, `job_finished`, `provider_not_certified` (that provider has not passed the route contract; it is refused, not skipped), in that order; `chain_exhausted` when every provider of the chain has an attempt.',
      security: bearerSecurity,
      params: idParams,
      body: startAttemptBody,
      response: { 201: { description: 'The new attempt (`starting`).', $ref: 'Attempt#' }, ...errorResponses },
    },
    handler: async (request, reply) => {
      const jobId = request.params.id;
      bindLog(request, reply, { job_id: jobId });
      const provider = request.body?.provider;
      if (provider !== undefined && !Object.hasOwn(config.providers, provider)) {
        throw new OnejobError('provider_unknown', `no provider named ${JSON.stringify(provider)} is configured`, { details: { provider } });
      }
      const job = await store.getJob(requestOwner(request), jobId);
      if (job === null) throw new OnejobError('job_not_found', `no job ${jobId}`, { details: { job_id: jobId } });
      const route = Object.hasOwn(config.routes, job.route) ? config.routes[job.route] : undefined;
      const attempt = await store.startAttempt({
        ownerId: requestWriter(request),
        jobId,
        kind: 'manual',
        provider,
        hedgeAfterMs: route?.hedgeAfterMs ?? null,
        eligible: ctx.eligible(job.route),
      });
      bindLog(request, reply, { attempt_id: attempt.id });
      metrics.attempts.inc({ state: attempt.state });
      request.log.info({ provider: attempt.provider, number: attempt.number }, 'attempt started');
      return reply.code(201).header('location', `/v1/jobs/${jobId}/attempts`).send(attemptBody(attempt));
    },
  });

  app.post<{ Params: IdParams; Body: ResolveAttemptBody }>('/v1/attempts/:id/resolve', {
    schema: {
      tags: ['attempts'],
      summary: 'Resolve an attempt explicitly',
      description:
        "Moves a `starting`, `running` or `unknown` attempt to `succeeded` (through the job's compare-and-swap: `superseded` if another attempt already won), `failed` or `cancelled`. 409 `attempt_finished` otherwise.",
      security: bearerSecurity,
      params: idParams,
      body: resolveAttemptBody,
      response: {
        200: {
          description: 'The attempt after resolution, with its job.',
          type: 'object',
          allOf: [{ $ref: 'Attempt#' }],
          required: ['job'],
          properties: { job: { $ref: 'Job#' } },
        },
        ...errorResponses,
      },
    },
    handler: async (request, reply) => {
      const attemptId = request.params.id;
      bindLog(request, reply, { attempt_id: attemptId });
      const body = request.body;
      let outcome: AttemptOutcome;
      if (body.state === 'succeeded') outcome = { state: 'succeeded', result: body.result };
      else if (body.state === 'failed') outcome = { state: 'failed', error: resolutionError(body.error, 'failed') };
      else outcome = { state: 'cancelled', error: body.error === undefined ? undefined : resolutionError(body.error, 'cancelled') };
      // A failed or cancelled resolution may fail over: through the route's certification gate, as any failover.
      const found = await store.getAttempt(requestOwner(request), attemptId);
      const route = found ? (await store.getJob(requestOwner(request), found.jobId))?.route : undefined;
      const settled = await store.settleAttempt({
        ownerId: requestWriter(request), attemptId, outcome, actor: 'api', eligible: route === undefined ? undefined : ctx.eligible(route), reason: body.reason, resolvedBy: 'operator',
      });
      countDoubtResolved(metrics, settled.attempt);
      bindLog(request, reply, { job_id: settled.job.id });
      metrics.attempts.inc({ state: settled.attempt.state });
      if (settled.failover) metrics.attempts.inc({ state: settled.failover.state });
      if (settled.attempt.state === 'superseded') {
        metrics.racesLost.inc();
        request.log.warn({ completed_by: settled.job.completedBy }, 'resolution lost the race: attempt superseded, job result untouched');
      } else {
        request.log.info({ state: settled.attempt.state, job_state: settled.job.state }, 'attempt resolved');
      }
      return { ...attemptBody(settled.attempt), job: jobBody(settled.job) };
    },
  });

  app.post<{ Params: IdParams }>('/v1/attempts/:id/check', {
    schema: {
      tags: ['attempts'],
      summary: 'Ask the provider now what became of an attempt',
      description:
        "Asks the attempt's provider (its lookup, CONTRACT §11) and applies the answer as the reconciler would: an output through the compare-and-swap (`superseded` if another attempt already won), a definite failure down the chain, \"still running\" changes nothing. An outcome found this way is `resolved_by: \"lookup\"`. 422 `lookup_unsupported` for a provider without a lookup; only an attempt in doubt (`unknown`) is asked about: 409 `attempt_in_flight` while it is `starting` or `running` (its executor decides), 409 `attempt_finished` once it ended.",
      security: bearerSecurity,
      params: idParams,
      response: {
        200: {
          description: 'The attempt after the answer was applied, with its job and what the provider said (`succeeded`, `failed`, `running`, `not_found`, `error`).',
          type: 'object',
          allOf: [{ $ref: 'Attempt#' }],
          required: ['job', 'lookup'],
          properties: {
            job: { $ref: 'Job#' },
            lookup: {
              type: 'object',
              required: ['outcome'],
              properties: { outcome: { type: 'string', enum: ['succeeded', 'failed', 'running', 'not_found', 'error'] }, message: { type: 'string' } },
            },
          },
        },
        ...errorResponses,
      },
    },
    handler: async (request, reply) => {
      const attemptId = request.params.id;
      bindLog(request, reply, { attempt_id: attemptId });
      const owner = requestWriter(request);
      const attempt = await store.getAttempt(owner, attemptId);
      if (attempt === null) throw new OnejobError('attempt_not_found', `no attempt ${attemptId}`, { details: { attempt_id: attemptId } });
      bindLog(request, reply, { job_id: attempt.jobId });
      if (ctx.reconciler === null || !ctx.reconciler.canLookUp(attempt.provider)) {
        throw new OnejobError('lookup_unsupported', `provider ${attempt.provider} has no lookup: onejob cannot ask it what became of a request (resolve the attempt instead)`, { details: { provider: attempt.provider } });
      }
      // Only an attempt in doubt (CONTRACT §15): 409 attempt_in_flight while its executor runs it, attempt_finished once it ended.
      const { answer, settled } = await ctx.reconciler.check(attempt);
      // Counted by the reconciler's events (lookups by outcome, doubt resolved: see instrumentReconciler).
      request.log.info({ lookup: answer.kind, state: settled?.attempt.state ?? attempt.state }, 'attempt checked at its provider');
      const job = settled?.job ?? (await store.getJob(owner, attempt.jobId));
      const after = settled?.attempt ?? job?.attempts.find((a) => a.id === attempt.id) ?? attempt;
      return {
        ...attemptBody(after),
        job: job === null ? null : jobBody(job),
        lookup: { outcome: answer.kind, ...(answer.kind === 'error' ? { message: answer.message } : {}) },
      };
    },
  });
}
