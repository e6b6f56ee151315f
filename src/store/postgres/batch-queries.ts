/**
 * Named SQL of files and batches (PostgreSQL, migration 0015): see
 * `../batch-queries.ts` and docs/batches.md.
 */
import type { Job } from '../../core/types.ts';
import { BATCH_STATUS_COLUMN, TERMINAL_BATCH_STATUSES, type BatchQueries, type BatchRow, type BatchLineRow, type FileLineRow, type FileRow } from '../batch-queries.ts';
import { JOB_COLUMNS, jobFromRow, type JobRow } from './row-mappers.ts';
import type { Queryable } from './queryable.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';

const TERMINAL_BATCH_SQL = `(${TERMINAL_BATCH_STATUSES.map((s) => `'${s}'`).join(', ')})`;
const BATCH_COLUMNS = `owner_id, id, idempotency_key, fingerprint, input_file_id, endpoint, completion_window, metadata, status, line_count, lines_created,
  output_file_id, error_file_id, errors, created_at, expires_at, in_progress_at, finalizing_at, completed_at, failed_at, expired_at,
  cancelling_at, cancelled_at, finished_at`;
const FILE_COLUMNS = 'owner_id, id, purpose, filename, bytes, line_count, endpoints, status, batch_id, kind, created_at';

type Row = Record<string, unknown>;

const d = (v: unknown): Date | null => (v === null || v === undefined ? null : (v as Date));

function toFile(r: Row): FileRow {
  return {
    ownerId: String(r.owner_id), id: String(r.id), purpose: r.purpose as FileRow['purpose'], filename: String(r.filename),
    bytes: Number(r.bytes), lineCount: Number(r.line_count), endpoints: (r.endpoints as string[]) ?? [], status: r.status as FileRow['status'],
    batchId: (r.batch_id as string | null) ?? null, kind: r.kind as FileRow['kind'], createdAt: r.created_at as Date,
  };
}

function toBatch(r: Row): BatchRow {
  return {
    ownerId: String(r.owner_id), id: String(r.id), idempotencyKey: String(r.idempotency_key), fingerprint: String(r.fingerprint),
    inputFileId: String(r.input_file_id), endpoint: String(r.endpoint), completionWindow: String(r.completion_window),
    metadata: (r.metadata as Record<string, unknown> | null) ?? null, status: r.status as BatchRow['status'],
    lineCount: Number(r.line_count), linesCreated: Number(r.lines_created),
    outputFileId: (r.output_file_id as string | null) ?? null, errorFileId: (r.error_file_id as string | null) ?? null, errors: r.errors ?? null,
    createdAt: r.created_at as Date, expiresAt: r.expires_at as Date, inProgressAt: d(r.in_progress_at), finalizingAt: d(r.finalizing_at),
    completedAt: d(r.completed_at), failedAt: d(r.failed_at), expiredAt: d(r.expired_at), cancellingAt: d(r.cancelling_at),
    cancelledAt: d(r.cancelled_at), finishedAt: d(r.finished_at),
  };
}

function toLine(r: Row): BatchLineRow {
  return {
    ownerId: String(r.owner_id), batchId: String(r.batch_id), lineNo: Number(r.line_no), customId: String(r.custom_id),
    jobId: (r.job_id as string | null) ?? null, outcome: (r.outcome as BatchLineRow['outcome']) ?? null, output: (r.output as string | null) ?? null,
  };
}

/** The batch queries over `db`. */
export function batchQueriesOn(db: Queryable): BatchQueries {
  const rows = async (text: string, values: unknown[]): Promise<Row[]> => (await db.query<Row>({ text, values })).rows;
  const count = async (text: string, values: unknown[]): Promise<number> => (await db.query({ text, values })).rowCount ?? 0;
  return {
    fileInsert: async (f) => {
      await rows(`INSERT INTO files (${FILE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, [
        f.ownerId, f.id, f.purpose, f.filename, f.bytes, f.lineCount, JSON.stringify(f.endpoints), f.status, f.batchId, f.kind, f.createdAt,
      ]);
    },
    fileLinesInsert: async (ls: readonly FileLineRow[]) => {
      if (ls.length === 0) return;
      await rows(
        `INSERT INTO file_lines (owner_id, file_id, line_no, custom_id, url, route, line)
         SELECT $1, $2, * FROM unnest($3::int[], $4::text[], $5::text[], $6::text[], $7::text[])`,
        [ls[0]!.ownerId, ls[0]!.fileId, ls.map((l) => l.lineNo), ls.map((l) => l.customId), ls.map((l) => l.url), ls.map((l) => l.route), ls.map((l) => l.line)],
      );
    },
    filePublish: async (p) =>
      (await count(`UPDATE files SET status = 'processed', bytes = $3, line_count = $4, endpoints = $5 WHERE owner_id = $1 AND id = $2 AND status = 'uploading'`, [
        p.ownerId, p.id, p.bytes, p.lineCount, JSON.stringify(p.endpoints),
      ])) === 1,
    fileDelete: async (ownerId, id) => {
      await rows('DELETE FROM file_lines WHERE owner_id = $1 AND file_id = $2', [ownerId, id]);
      await rows('DELETE FROM files WHERE owner_id = $1 AND id = $2', [ownerId, id]);
    },
    fileGet: async (ownerId, id) => {
      const r = await rows(`SELECT ${FILE_COLUMNS} FROM files WHERE owner_id = $1 AND id = $2`, [ownerId, id]);
      return r[0] ? toFile(r[0]) : null;
    },
    fileLinesPage: async (ownerId, fileId, after, limit) =>
      (await rows('SELECT owner_id, file_id, line_no, custom_id, url, route, line FROM file_lines WHERE owner_id = $1 AND file_id = $2 AND line_no > $3 ORDER BY line_no LIMIT $4', [
        ownerId, fileId, after, limit,
      ])).map((r) => ({
        ownerId: String(r.owner_id), fileId: String(r.file_id), lineNo: Number(r.line_no), customId: String(r.custom_id),
        url: String(r.url), route: String(r.route), line: String(r.line),
      })),

    batchInsert: async (b) => {
      const r = await rows(
        `INSERT INTO batches (owner_id, id, idempotency_key, fingerprint, input_file_id, endpoint, completion_window, metadata, status, line_count, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'validating', $9, $10, $11)
         ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING ${BATCH_COLUMNS}`,
        [b.ownerId, b.id, b.idempotencyKey, b.fingerprint, b.inputFileId, b.endpoint, b.completionWindow, b.metadata === null ? null : JSON.stringify(b.metadata), b.lineCount, b.createdAt, b.expiresAt],
      );
      return r[0] ? toBatch(r[0]) : null;
    },
    batchGet: async (ownerId, id) => {
      const r = await rows(`SELECT ${BATCH_COLUMNS} FROM batches WHERE owner_id = $1 AND id = $2`, [ownerId, id]);
      return r[0] ? toBatch(r[0]) : null;
    },
    batchGetByKey: async (ownerId, key) => {
      const r = await rows(`SELECT ${BATCH_COLUMNS} FROM batches WHERE owner_id = $1 AND idempotency_key = $2`, [ownerId, key]);
      return r[0] ? toBatch(r[0]) : null;
    },
    batchList: async (p) =>
      (p.after
        ? await rows(`SELECT ${BATCH_COLUMNS} FROM batches WHERE owner_id = $1 AND (created_at, id) < ($3, $4) ORDER BY created_at DESC, id DESC LIMIT $2`, [
          p.ownerId, p.limit, p.after.createdAt, p.after.id,
        ])
        : await rows(`SELECT ${BATCH_COLUMNS} FROM batches WHERE owner_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [p.ownerId, p.limit])
      ).map(toBatch),
    batchListOpen: async (limit) => (await rows(`SELECT ${BATCH_COLUMNS} FROM batches WHERE finished_at IS NULL ORDER BY created_at LIMIT $1`, [limit])).map(toBatch),
    batchAdvanceLines: async (p) =>
      (await count(
        `UPDATE batches SET lines_created = $4, status = 'in_progress', in_progress_at = COALESCE(in_progress_at, $5)
         WHERE owner_id = $1 AND id = $2 AND lines_created = $3 AND status IN ('validating', 'in_progress')`,
        [p.ownerId, p.id, p.from, p.to, p.now],
      )) === 1,
    batchSetStatus: async (p) => {
      const column = BATCH_STATUS_COLUMN[p.to];
      const terminal = TERMINAL_BATCH_STATUSES.includes(p.to);
      const values: unknown[] = [p.ownerId, p.id, p.from, p.to, p.now];
      const sets = ['status = $4'];
      if (terminal) sets.push('finished_at = $5', 'finalizing_at = COALESCE(finalizing_at, $5)');
      if (column) sets.push(`${column} = COALESCE(${column}, $5)`);
      if (p.outputFileId !== undefined) sets.push(`output_file_id = $${values.push(p.outputFileId)}`);
      if (p.errorFileId !== undefined) sets.push(`error_file_id = $${values.push(p.errorFileId)}`);
      return (await count(`UPDATE batches SET ${sets.join(', ')} WHERE owner_id = $1 AND id = $2 AND status = ANY($3::text[])`, values)) === 1;
    },

    batchJobsInsert: async (js) => {
      if (js.length === 0) return [];
      const r = await rows(
        `INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, attempt_count, skipped, created_at, updated_at, batch_id)
         SELECT o, i, k, f, r, inp::json, m::json, p::json, 'queued', 0, 0, '[]', c, c, b
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::text[]) AS t(o, i, k, f, r, inp, m, p, c, b)
         ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING idempotency_key`,
        [
          js.map((j) => j.ownerId), js.map((j) => j.id), js.map((j) => j.idempotencyKey), js.map((j) => j.fingerprint), js.map((j) => j.route),
          js.map((j) => JSON.stringify(j.input)), js.map((j) => (j.metadata === null ? null : JSON.stringify(j.metadata))), js.map((j) => JSON.stringify(j.providers)),
          js.map((j) => j.createdAt), js.map((j) => j.batchId),
        ],
      );
      return r.map((x) => String(x.idempotency_key));
    },
    jobsByKeys: async (ownerId, keys) =>
      (await rows('SELECT id, idempotency_key, batch_id FROM jobs WHERE owner_id = $1 AND idempotency_key = ANY($2::text[])', [ownerId, keys])).map((r) => ({
        id: String(r.id), idempotencyKey: String(r.idempotency_key), batchId: (r.batch_id as string | null) ?? null,
      })),
    batchLinesInsert: async (ls) => {
      if (ls.length === 0) return;
      await rows(
        `INSERT INTO batch_lines (owner_id, batch_id, line_no, custom_id, job_id, outcome, output)
         SELECT $1, $2, * FROM unnest($3::int[], $4::text[], $5::text[], $6::text[], $7::text[])`,
        [ls[0]!.ownerId, ls[0]!.batchId, ls.map((l) => l.lineNo), ls.map((l) => l.customId), ls.map((l) => l.jobId), ls.map((l) => l.outcome), ls.map((l) => l.output)],
      );
    },
    batchLinesFinished: async (ownerId, batchId, limit) =>
      (await rows(
        `SELECT l.owner_id, l.batch_id, l.line_no, l.custom_id, l.job_id, l.outcome, l.output FROM batch_lines l
         LEFT JOIN jobs j ON j.owner_id = l.owner_id AND j.id = l.job_id
         WHERE l.owner_id = $1 AND l.batch_id = $2 AND l.outcome IS NULL AND (l.job_id IS NULL OR j.state IN ${TERMINAL_JOB_STATES_SQL})
         ORDER BY l.line_no LIMIT $3`,
        [ownerId, batchId, limit],
      )).map(toLine),
    batchJobIdsInStates: async (ownerId, batchId, states, limit) =>
      (await rows('SELECT id FROM jobs WHERE owner_id = $1 AND batch_id = $2 AND state = ANY($3::text[]) ORDER BY created_at, id LIMIT $4', [ownerId, batchId, states, limit]))
        .map((r) => String(r.id)),
    batchLineFinish: async (p) =>
      (await count('UPDATE batch_lines SET outcome = $4, output = $5 WHERE owner_id = $1 AND batch_id = $2 AND line_no = $3 AND outcome IS NULL', [
        p.ownerId, p.batchId, p.lineNo, p.outcome, p.output,
      ])) === 1,
    batchCounts: async (ownerId, batchId) => {
      const r = (await rows(
        `SELECT count(*)::int AS lines, count(*) FILTER (WHERE outcome = 'output')::int AS outputs, count(*) FILTER (WHERE outcome = 'error')::int AS errors
         FROM batch_lines WHERE owner_id = $1 AND batch_id = $2`,
        [ownerId, batchId],
      ))[0]!;
      return { lines: Number(r.lines), outputs: Number(r.outputs), errors: Number(r.errors) };
    },
    batchCostMicros: async (ownerId, batchId) => {
      const r = (await rows(
        `SELECT sum(a.cost_micros)::bigint AS micros FROM jobs j JOIN attempts a ON a.owner_id = j.owner_id AND a.job_id = j.id
         WHERE j.owner_id = $1 AND j.batch_id = $2`,
        [ownerId, batchId],
      ))[0];
      return r?.micros === null || r?.micros === undefined ? null : Number(r.micros);
    },
    batchOutputBytes: async (ownerId, batchId, outcome) =>
      Number((await rows('SELECT coalesce(sum(octet_length(output) + 1), 0)::bigint AS n FROM batch_lines WHERE owner_id = $1 AND batch_id = $2 AND outcome = $3', [ownerId, batchId, outcome]))[0]!.n),
    batchOutputPage: async (ownerId, batchId, outcome, after, limit) =>
      (await rows('SELECT line_no, output FROM batch_lines WHERE owner_id = $1 AND batch_id = $2 AND outcome = $3 AND line_no > $4 ORDER BY line_no LIMIT $5', [
        ownerId, batchId, outcome, after, limit,
      ])).map((r) => ({ lineNo: Number(r.line_no), output: String(r.output) })),

    jobListQueuedBatchLines: async (limit, now): Promise<Job[]> =>
      (await db.query<JobRow>({
        name: 'onejob_job_list_queued_batch_lines',
        text: `SELECT ${JOB_COLUMNS} FROM jobs j
WHERE j.state = 'queued' AND j.batch_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM batches b WHERE b.owner_id = j.owner_id AND b.id = j.batch_id AND b.status = 'in_progress' AND b.expires_at > $2)
ORDER BY j.created_at, j.id LIMIT $1 FOR UPDATE OF j SKIP LOCKED`,
        values: [limit, now],
      })).rows.map(jobFromRow),

    batchRetentionDelete: async (p) => {
      const now = p.now ?? new Date((await rows('SELECT clock_timestamp() AS now', []))[0]!.now as Date);
      const cutoff = new Date(now.getTime() - p.olderThanMs);
      const old = await rows(`SELECT owner_id, id FROM batches WHERE finished_at IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT $2`, [cutoff, p.limit]);
      let files = 0;
      for (const b of old) {
        await rows('DELETE FROM batch_lines WHERE owner_id = $1 AND batch_id = $2', [b.owner_id, b.id]);
        files += await count("DELETE FROM files WHERE owner_id = $1 AND batch_id = $2 AND purpose = 'batch_output'", [b.owner_id, b.id]);
        await rows('DELETE FROM batches WHERE owner_id = $1 AND id = $2', [b.owner_id, b.id]);
      }
      const stale = await rows(
        `SELECT owner_id, id FROM files f WHERE purpose = 'batch' AND (
           (status = 'uploading' AND created_at < $1) OR
           (status = 'processed' AND created_at < $2 AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.owner_id = f.owner_id AND b.input_file_id = f.id)))
         LIMIT $3`,
        [new Date(now.getTime() - 3_600_000), cutoff, p.limit],
      );
      for (const f of stale) {
        await rows('DELETE FROM file_lines WHERE owner_id = $1 AND file_id = $2', [f.owner_id, f.id]);
        files += await count('DELETE FROM files WHERE owner_id = $1 AND id = $2', [f.owner_id, f.id]);
      }
      return { batches: old.length, files };
    },
  };
}

export { TERMINAL_BATCH_SQL };
