/**
 * `POST /v1/files`, `GET /v1/files/{id}`, `GET /v1/files/{id}/content`
 * (CONTRACT §17): batch input files, uploaded as multipart and streamed
 * into the database line by line (`batches/file-upload.ts`), and the
 * output and error files of batches. Owner-scoped: another owner's file is
 * `404`. See docs/batches.md.
 */
import { Readable } from 'node:stream';
import multipart from '@fastify/multipart';
import type { FastifyInstance } from 'fastify';
import { fileObject, storeUploadLines, DEFAULT_UPLOAD_LIMITS, type UploadLimits } from '../../batches/file-upload.ts';
import { OnejobError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';
import { requestOwner, requestWriter } from '../request-owner.ts';

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } } as const;

function fileNotFound(id: string): OnejobError {
  return new OnejobError('not_found', `no file ${JSON.stringify(id)} for this API token`, { details: { file_id: id } });
}

/** Registers the file routes; `limits` override the 200 MB / 50,000 lines (tests). */
export function registerFileRoutes(app: FastifyInstance, ctx: AppContext, limits: UploadLimits = DEFAULT_UPLOAD_LIMITS): void {
  app.register(async (scope) => {
    // The file part is a stream (never buffered); its size is bounded by `limits.maxBytes` as it is read.
    await scope.register(multipart, { limits: { files: 1, fields: 10, fieldSize: 1024, fileSize: limits.maxBytes + 1 }, throwFileSizeLimit: false });

    scope.post('/v1/files', {
      schema: {
        tags: ['batches'],
        summary: 'Upload a batch input file (OpenAI-compatible)',
        description: [
          'multipart/form-data with `purpose` = `batch` and `file`: JSONL, one `{"custom_id", "method": "POST", "url", "body"}` per line,',
          '`url` one of /v1/chat/completions, /v1/responses, /v1/messages, `body.model` a route. At most 200 MB and 50,000 lines.',
          'Streamed into the database line by line; a malformed line, a duplicate custom_id or an unknown route is 400 naming the line',
          '(`line`), and nothing is stored. 200: the File object.',
        ].join(' '),
        security: bearerSecurity,
        response: { ...errorResponses },
      },
      handler: async (request, reply) => {
        const ownerId = requestWriter(request);
        if (!request.isMultipart()) throw new OnejobError('invalid_request', 'send the file as multipart/form-data with the fields purpose=batch and file');
        const fileId = newId('file');
        let purpose: string | undefined;
        let stored: { bytes: number; lineCount: number; endpoints: string[] } | null = null;
        let filename = 'input.jsonl';
        let begun = false;
        try {
          for await (const part of request.parts()) {
            if (part.type === 'field') {
              if (part.fieldname === 'purpose') purpose = String(part.value);
              continue;
            }
            if (part.fieldname !== 'file' || stored !== null) {
              part.file.resume();
              continue;
            }
            if (purpose !== undefined && purpose !== 'batch') throw purposeRefused(purpose);
            filename = part.filename || filename;
            await ctx.store.batches.beginFile({ ownerId, id: fileId, filename });
            begun = true;
            try {
              stored = await storeUploadLines({ batches: ctx.store.batches, config: ctx.config, ownerId, fileId, source: part.file, limits });
            } finally {
              part.file.resume();
            }
            if (part.file.truncated) throw new OnejobError('payload_too_large', `the file is larger than ${limits.maxBytes} bytes (the most one batch takes); nothing was stored`);
          }
          if (purpose !== 'batch') throw purposeRefused(purpose);
          if (stored === null) throw new OnejobError('invalid_request', 'the form has no file part named "file"', { details: { field: 'file' } });
          const file = await ctx.store.batches.publishFile({ ownerId, id: fileId, ...stored });
          request.log.info({ file_id: fileId, lines: stored.lineCount, bytes: stored.bytes }, 'batch file uploaded');
          return reply.code(200).send(fileObject(file));
        } catch (e) {
          if (begun) await ctx.store.batches.discardFile(ownerId, fileId).catch((err: unknown) => request.log.warn({ err, file_id: fileId }, 'a refused upload could not be deleted; retention deletes it'));
          throw e;
        }
      },
    });
  });

  app.get<{ Params: { id: string } }>('/v1/files/:id', {
    schema: { tags: ['batches'], summary: 'A file (OpenAI File object)', security: bearerSecurity, params: idParams, response: { ...errorResponses } },
    handler: async (request) => {
      const file = await ctx.store.batches.getFile(requestOwner(request), request.params.id);
      if (file === null) throw fileNotFound(request.params.id);
      return fileObject(file);
    },
  });

  app.get<{ Params: { id: string } }>('/v1/files/:id/content', {
    schema: {
      tags: ['batches'],
      summary: "A file's content",
      description: 'An input file as uploaded (its lines), or a batch output/error file: one JSON line per finished request, in line order.',
      security: bearerSecurity,
      params: idParams,
      response: { ...errorResponses },
    },
    handler: async (request, reply) => {
      const file = await ctx.store.batches.getFile(requestOwner(request), request.params.id);
      if (file === null) throw fileNotFound(request.params.id);
      return reply.type('application/octet-stream').send(Readable.from(ctx.store.batches.fileContent(file)));
    },
  });
}

function purposeRefused(purpose: string | undefined): OnejobError {
  return new OnejobError('invalid_request', `purpose must be "batch"${purpose === undefined ? ' (the form has no purpose field)' : `, not ${JSON.stringify(purpose)}`}`, { details: { field: 'purpose' } });
}
