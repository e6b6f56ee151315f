/**
 * `POST /v1/batches`, `GET /v1/batches/{id}`, `GET /v1/batches`,
 * `POST /v1/batches/{id}/cancel` (CONTRACT §17): the OpenAI Batch API over
 * onejob's own executors. Creating needs an Idempotency-Key with the rules
 * and codes of every create (§3). See docs/batches.md.
 */
import type { FastifyInstance } from 'fastify';
import { isBatchEndpoint } from '../../batches/batch-lines.ts';
import { fingerprint } from '../../core/fingerprint.ts';
import { OnejobError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import type { BatchRow } from '../../store/batch-queries.ts';
import type { BatchView } from '../../store/batch-store.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { requestOwner, requestWriter } from '../request-owner.ts';
import { IDEMPOTENCY_KEY_HEADER, idempotencyKeyOf } from './job-routes.ts';

/** `completion_window` values and their length. */
const WINDOWS: Readonly<Record<string, number>> = { '24h': 24 * 3_600_000 };

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } } as const;

const createBatchBody = {
  type: 'object',
  required: ['input_file_id', 'endpoint', 'completion_window'],
  additionalProperties: false,
  properties: {
    input_file_id: { type: 'string', minLength: 1, maxLength: 200 },
    endpoint: { type: 'string', enum: ['/v1/chat/completions', '/v1/responses', '/v1/messages'] },
    completion_window: { type: 'string', enum: Object.keys(WINDOWS) },
    metadata: { type: ['object', 'null'], maxProperties: 16, additionalProperties: { type: 'string', maxLength: 512 } },
    output_expires_after: { type: 'object' },
  },
} as const;

interface CreateBatchBody {
  input_file_id: string;
  endpoint: string;
  completion_window: string;
  metadata?: Record<string, string> | null;
}

const secs = (d: Date | null): number | null => (d === null ? null : Math.floor(d.getTime() / 1000));

/** The OpenAI Batch object of a batch, with onejob's own members under `onejob`. */
export function batchObject(v: BatchView): Record<string, unknown> {
  const b = v.batch;
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors: b.errors ?? null,
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: secs(b.createdAt),
    in_progress_at: secs(b.inProgressAt),
    expires_at: secs(b.expiresAt),
    finalizing_at: secs(b.finalizingAt),
    completed_at: secs(b.completedAt),
    failed_at: secs(b.failedAt),
    expired_at: secs(b.expiredAt),
    cancelling_at: secs(b.cancellingAt),
    cancelled_at: secs(b.cancelledAt),
    request_counts: { total: b.lineCount, completed: v.counts.outputs, failed: v.counts.errors },
    metadata: b.metadata,
    onejob: {
      lines_created: v.counts.lines,
      cost_usd: v.costMicros === null ? null : v.costMicros / 1_000_000,
      idempotency_key: b.idempotencyKey,
    },
  };
}

function batchNotFound(id: string): OnejobError {
  return new OnejobError('not_found', `no batch ${JSON.stringify(id)} for this API token`, { details: { batch_id: id } });
}

/** Registers the batch routes; `onCreated` wakes this process's batch runner. */
export function registerBatchRoutes(app: FastifyInstance, ctx: AppContext, onChange: () => void = () => undefined): void {
  const view = async (b: BatchRow) => batchObject(await ctx.store.batches.view(b));

  app.post<{ Body: CreateBatchBody }>('/v1/batches', {
    schema: {
      tags: ['batches'],
      summary: 'Create a batch (OpenAI-compatible, idempotent)',
      description: [
        'Every line of the input file becomes a job keyed `batch:<batch id>:<custom_id>`, run once by the executors behind interactive work.',
        'Idempotency-Key required, as on every create: 201 new batch; 200 with `Idempotent-Replayed: true` for the same key and body (the same',
        'batch); 409 `idempotency_key_reused` for the same key and another body. 400 when the file is unknown, not complete, or has a line whose',
        '`url` is not `endpoint`.',
      ].join(' '),
      security: bearerSecurity,
      body: createBatchBody,
      response: { ...errorResponses },
    },
    onRequest: async (request, reply) => {
      reply.header(IDEMPOTENCY_KEY_HEADER, idempotencyKeyOf(request));
    },
    handler: async (request, reply) => {
      const ownerId = requestWriter(request);
      const key = idempotencyKeyOf(request);
      const body = request.body;
      const { output_expires_after: _ignored, ...intent } = body as CreateBatchBody & { output_expires_after?: unknown };
      const print = fingerprint({ ...intent, metadata: intent.metadata ?? null });
      // A replay answers the key's batch before anything else is read: the file may be gone by then.
      const existing = await ctx.store.batches.createBatchReplay(ownerId, key, print);
      if (existing) return reply.code(200).header('idempotent-replayed', 'true').header('location', `/v1/batches/${existing.id}`).send(await view(existing));
      const file = await ctx.store.batches.getFile(ownerId, body.input_file_id);
      if (file === null || file.purpose !== 'batch') {
        throw new OnejobError('invalid_request', `input_file_id ${JSON.stringify(body.input_file_id)} names no batch input file of this API token (upload it with POST /v1/files, purpose batch)`, {
          details: { field: 'input_file_id' },
        });
      }
      const other = file.endpoints.find((u) => u !== body.endpoint);
      if (other !== undefined || !isBatchEndpoint(body.endpoint)) {
        throw new OnejobError('invalid_request', `the file has lines for ${other ?? body.endpoint}, but the batch's endpoint is ${body.endpoint}: every line's url must be the endpoint`, {
          details: { field: 'endpoint' },
        });
      }
      const now = new Date();
      const { batch, created } = await ctx.store.batches.createBatch({
        ownerId, id: newId('batch'), idempotencyKey: key, fingerprint: print, inputFileId: file.id, endpoint: body.endpoint,
        completionWindow: body.completion_window, metadata: body.metadata ?? null, lineCount: file.lineCount,
        createdAt: now, expiresAt: new Date(now.getTime() + WINDOWS[body.completion_window]!),
      });
      reply.header('location', `/v1/batches/${batch.id}`);
      if (!created) return reply.code(200).header('idempotent-replayed', 'true').send(await view(batch));
      request.log.info({ batch_id: batch.id, lines: batch.lineCount }, 'batch created');
      onChange();
      return reply.code(201).send(await view(batch));
    },
  });

  app.get<{ Params: { id: string } }>('/v1/batches/:id', {
    schema: { tags: ['batches'], summary: 'A batch (OpenAI Batch object)', security: bearerSecurity, params: idParams, response: { ...errorResponses } },
    handler: async (request) => {
      const batch = await ctx.store.batches.getBatch(requestOwner(request), request.params.id);
      if (batch === null) throw batchNotFound(request.params.id);
      return view(batch);
    },
  });

  app.get<{ Querystring: { after?: string; limit?: number } }>('/v1/batches', {
    schema: {
      tags: ['batches'],
      summary: "The owner's batches, newest first",
      description: 'OpenAI cursor pages: `after` (a batch id), `limit` (1–100, default 20); answers `{object: "list", data, first_id, last_id, has_more}`.',
      security: bearerSecurity,
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: { after: { type: 'string', minLength: 1, maxLength: 200 }, limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
      },
      response: { ...errorResponses },
    },
    handler: async (request) => {
      const ownerId = requestOwner(request);
      const limit = request.query.limit ?? 20;
      let after: { createdAt: Date; id: string } | undefined;
      if (request.query.after !== undefined) {
        const from = await ctx.store.batches.getBatch(ownerId, request.query.after);
        if (from === null) throw batchNotFound(request.query.after);
        after = { createdAt: from.createdAt, id: from.id };
      }
      const rows = await ctx.store.batches.listBatches({ ownerId, limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const data = [];
      for (const b of page) data.push(await view(b));
      return { object: 'list', data, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.length > limit };
    },
  });

  app.post<{ Params: { id: string } }>('/v1/batches/:id/cancel', {
    schema: {
      tags: ['batches'],
      summary: 'Cancel a batch',
      description: 'Unstarted lines are never started and running ones are cancelled (CONTRACT §3 cancel); `cancelling` until no line is undecided, then `cancelled`. A finished batch answers as it is.',
      security: bearerSecurity,
      params: idParams,
      response: { ...errorResponses },
    },
    handler: async (request) => {
      const batch = await ctx.store.batches.cancelBatch(requestWriter(request), request.params.id);
      if (batch === null) throw batchNotFound(request.params.id);
      onChange();
      return view(batch);
    },
  });
}
