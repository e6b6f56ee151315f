/**
 * Named SQL of files and batches (SQLite, migration 0015): see
 * `../batch-queries.ts` and docs/batches.md. Timestamps are epoch
 * milliseconds; JSON is TEXT; many rows travel as one JSON array (`json_each`).
 */
import { BATCH_STATUS_COLUMN, TERMINAL_BATCH_STATUSES, type BatchQueries, type BatchRow, type BatchLineRow, type FileRow } from '../batch-queries.ts';
import { TERMINAL_JOB_STATES_SQL } from '../sql-rules.ts';
import { date, json, toJob, type Row } from './row-mappers.ts';

const parse = (v: unknown): unknown => (v === null || v === undefined ? null : JSON.parse(String(v)));

function toFile(r: Row): FileRow {
  return {
    ownerId: String(r.owner_id), id: String(r.id), purpose: r.purpose as FileRow['purpose'], filename: String(r.filename),
    bytes: Number(r.bytes), lineCount: Number(r.line_count), endpoints: (parse(r.endpoints) as string[]) ?? [], status: r.status as FileRow['status'],
    batchId: (r.batch_id as string | null) ?? null, kind: r.kind as FileRow['kind'], createdAt: date(r.created_at)!,
  };
}

function toBatch(r: Row): BatchRow {
  return {
    ownerId: String(r.owner_id), id: String(r.id), idempotencyKey: String(r.idempotency_key), fingerprint: String(r.fingerprint),
    inputFileId: String(r.input_file_id), endpoint: String(r.endpoint), completionWindow: String(r.completion_window),
    metadata: parse(r.metadata) as Record<string, unknown> | null, status: r.status as BatchRow['status'],
    lineCount: Number(r.line_count), linesCreated: Number(r.lines_created),
    outputFileId: (r.output_file_id as string | null) ?? null, errorFileId: (r.error_file_id as string | null) ?? null, errors: parse(r.errors),
    createdAt: date(r.created_at)!, expiresAt: date(r.expires_at)!, inProgressAt: date(r.in_progress_at), finalizingAt: date(r.finalizing_at),
    completedAt: date(r.completed_at), failedAt: date(r.failed_at), expiredAt: date(r.expired_at), cancellingAt: date(r.cancelling_at),
    cancelledAt: date(r.cancelled_at), finishedAt: date(r.finished_at),
  };
}

function toLine(r: Row): BatchLineRow {
  return {
    ownerId: String(r.owner_id), batchId: String(r.batch_id), lineNo: Number(r.line_no), customId: String(r.custom_id),
    jobId: (r.job_id as string | null) ?? null, outcome: (r.outcome as BatchLineRow['outcome']) ?? null, output: (r.output as string | null) ?? null,
  };
}

const inList = (values: readonly string[]): string => `(${values.map((v) => `'${v.replaceAll("'", "''")}'`).join(', ')})`;

/** The batch queries over SQLite's `get`/`all`/`run`. */
export function sqliteBatchQueries(
  get: (sql: string, ...args: unknown[]) => Promise<Row | undefined>,
  all: (sql: string, ...args: unknown[]) => Promise<Row[]>,
  run: (sql: string, ...args: unknown[]) => Promise<number>,
): BatchQueries {
  return {
    fileInsert: async (f) => {
      await run(
        `INSERT INTO files (owner_id, id, purpose, filename, bytes, line_count, endpoints, status, batch_id, kind, created_at)
         VALUES (@ownerId, @id, @purpose, @filename, @bytes, @lineCount, @endpoints, @status, @batchId, @kind, @createdAt)`,
        { ...f, endpoints: json(f.endpoints), createdAt: f.createdAt.getTime() },
      );
    },
    fileLinesInsert: async (ls) => {
      if (ls.length === 0) return;
      await run(
        `INSERT INTO file_lines (owner_id, file_id, line_no, custom_id, url, route, line)
         SELECT @ownerId, @fileId, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]' FROM json_each(@rows)`,
        { ownerId: ls[0]!.ownerId, fileId: ls[0]!.fileId, rows: json(ls.map((l) => [l.lineNo, l.customId, l.url, l.route, l.line])) },
      );
    },
    filePublish: async (p) =>
      (await run(`UPDATE files SET status = 'processed', bytes = @bytes, line_count = @lineCount, endpoints = @endpoints WHERE owner_id = @ownerId AND id = @id AND status = 'uploading'`, {
        ownerId: p.ownerId, id: p.id, bytes: p.bytes, lineCount: p.lineCount, endpoints: json(p.endpoints),
      })) === 1,
    fileDelete: async (ownerId, id) => {
      await run('DELETE FROM file_lines WHERE owner_id = ? AND file_id = ?', ownerId, id);
      await run('DELETE FROM files WHERE owner_id = ? AND id = ?', ownerId, id);
    },
    fileGet: async (ownerId, id) => {
      const r = await get('SELECT * FROM files WHERE owner_id = ? AND id = ?', ownerId, id);
      return r ? toFile(r) : null;
    },
    fileLinesPage: async (ownerId, fileId, after, limit) =>
      (await all('SELECT * FROM file_lines WHERE owner_id = ? AND file_id = ? AND line_no > ? ORDER BY line_no LIMIT ?', ownerId, fileId, after, limit)).map((r) => ({
        ownerId: String(r.owner_id), fileId: String(r.file_id), lineNo: Number(r.line_no), customId: String(r.custom_id),
        url: String(r.url), route: String(r.route), line: String(r.line),
      })),

    batchInsert: async (b) => {
      const r = await get(
        `INSERT INTO batches (owner_id, id, idempotency_key, fingerprint, input_file_id, endpoint, completion_window, metadata, status, line_count, created_at, expires_at)
         VALUES (@ownerId, @id, @idempotencyKey, @fingerprint, @inputFileId, @endpoint, @completionWindow, @metadata, 'validating', @lineCount, @createdAt, @expiresAt)
         ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING *`,
        { ...b, metadata: b.metadata === null ? null : json(b.metadata), createdAt: b.createdAt.getTime(), expiresAt: b.expiresAt.getTime() },
      );
      return r ? toBatch(r) : null;
    },
    batchGet: async (ownerId, id) => {
      const r = await get('SELECT * FROM batches WHERE owner_id = ? AND id = ?', ownerId, id);
      return r ? toBatch(r) : null;
    },
    batchGetByKey: async (ownerId, key) => {
      const r = await get('SELECT * FROM batches WHERE owner_id = ? AND idempotency_key = ?', ownerId, key);
      return r ? toBatch(r) : null;
    },
    batchList: async (p) =>
      (await all(
        `SELECT * FROM batches WHERE owner_id = @ownerId
           AND (@afterCreatedAt IS NULL OR created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))
         ORDER BY created_at DESC, id DESC LIMIT @limit`,
        { ownerId: p.ownerId, limit: p.limit, afterCreatedAt: p.after ? p.after.createdAt.getTime() : null, afterId: p.after?.id ?? null },
      )).map(toBatch),
    batchListOpen: async (limit) => (await all('SELECT * FROM batches WHERE finished_at IS NULL ORDER BY created_at LIMIT ?', limit)).map(toBatch),
    batchAdvanceLines: async (p) =>
      (await run(
        `UPDATE batches SET lines_created = @to, status = 'in_progress', in_progress_at = COALESCE(in_progress_at, @now)
         WHERE owner_id = @ownerId AND id = @id AND lines_created = @from AND status IN ('validating', 'in_progress')`,
        { ownerId: p.ownerId, id: p.id, from: p.from, to: p.to, now: p.now.getTime() },
      )) === 1,
    batchSetStatus: async (p) => {
      const column = BATCH_STATUS_COLUMN[p.to];
      const sets = ['status = @to'];
      if (column) sets.push(`${column} = COALESCE(${column}, @now)`);
      if (TERMINAL_BATCH_STATUSES.includes(p.to)) sets.push('finished_at = @now', 'finalizing_at = COALESCE(finalizing_at, @now)');
      if (p.outputFileId !== undefined) sets.push('output_file_id = @outputFileId');
      if (p.errorFileId !== undefined) sets.push('error_file_id = @errorFileId');
      return (await run(`UPDATE batches SET ${sets.join(', ')} WHERE owner_id = @ownerId AND id = @id AND status IN ${inList(p.from)}`, {
        ownerId: p.ownerId, id: p.id, to: p.to, now: p.now.getTime(), outputFileId: p.outputFileId ?? null, errorFileId: p.errorFileId ?? null,
      })) === 1;
    },

    batchJobsInsert: async (js) => {
      if (js.length === 0) return [];
      const rows = await all(
        `INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, route, input, metadata, providers, state, version, attempt_count, skipped, created_at, updated_at, batch_id)
         SELECT value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]', value ->> '$[5]', value ->> '$[6]', value ->> '$[7]',
                'queued', 0, 0, '[]', value ->> '$[8]', value ->> '$[8]', value ->> '$[9]'
         FROM json_each(@rows) WHERE true
         ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING idempotency_key`,
        {
          rows: json(js.map((j) => [
            j.ownerId, j.id, j.idempotencyKey, j.fingerprint, j.route, json(j.input), j.metadata === null ? null : json(j.metadata), json(j.providers),
            j.createdAt.getTime(), j.batchId,
          ])),
        },
      );
      return rows.map((r) => String(r.idempotency_key));
    },
    jobsByKeys: async (ownerId, keys) =>
      (await all('SELECT id, idempotency_key, batch_id FROM jobs WHERE owner_id = @ownerId AND idempotency_key IN (SELECT value FROM json_each(@keys))', {
        ownerId, keys: json(keys),
      })).map((r) => ({ id: String(r.id), idempotencyKey: String(r.idempotency_key), batchId: (r.batch_id as string | null) ?? null })),
    batchLinesInsert: async (ls) => {
      if (ls.length === 0) return;
      await run(
        `INSERT INTO batch_lines (owner_id, batch_id, line_no, custom_id, job_id, outcome, output)
         SELECT @ownerId, @batchId, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]' FROM json_each(@rows)`,
        { ownerId: ls[0]!.ownerId, batchId: ls[0]!.batchId, rows: json(ls.map((l) => [l.lineNo, l.customId, l.jobId, l.outcome, l.output])) },
      );
    },
    batchLinesFinished: async (ownerId, batchId, limit) =>
      (await all(
        `SELECT l.* FROM batch_lines l LEFT JOIN jobs j ON j.owner_id = l.owner_id AND j.id = l.job_id
         WHERE l.owner_id = ? AND l.batch_id = ? AND l.outcome IS NULL AND (l.job_id IS NULL OR j.state IN ${TERMINAL_JOB_STATES_SQL})
         ORDER BY l.line_no LIMIT ?`,
        ownerId, batchId, limit,
      )).map(toLine),
    batchJobIdsInStates: async (ownerId, batchId, states, limit) =>
      (await all(`SELECT id FROM jobs WHERE owner_id = ? AND batch_id = ? AND state IN ${inList(states)} ORDER BY created_at, id LIMIT ?`, ownerId, batchId, limit))
        .map((r) => String(r.id)),
    batchLineFinish: async (p) =>
      (await run('UPDATE batch_lines SET outcome = @outcome, output = @output WHERE owner_id = @ownerId AND batch_id = @batchId AND line_no = @lineNo AND outcome IS NULL', {
        ...p,
      })) === 1,
    batchCounts: async (ownerId, batchId) => {
      const r = (await get(
        `SELECT count(*) AS lines, coalesce(sum(outcome = 'output'), 0) AS outputs, coalesce(sum(outcome = 'error'), 0) AS errors
         FROM batch_lines WHERE owner_id = ? AND batch_id = ?`,
        ownerId, batchId,
      ))!;
      return { lines: Number(r.lines), outputs: Number(r.outputs), errors: Number(r.errors) };
    },
    batchCostMicros: async (ownerId, batchId) => {
      const r = await get(
        `SELECT sum(a.cost_micros) AS micros FROM jobs j JOIN attempts a ON a.owner_id = j.owner_id AND a.job_id = j.id WHERE j.owner_id = ? AND j.batch_id = ?`,
        ownerId, batchId,
      );
      return r?.micros === null || r?.micros === undefined ? null : Number(r.micros);
    },
    batchOutputBytes: async (ownerId, batchId, outcome) =>
      Number((await get('SELECT coalesce(sum(length(CAST(output AS BLOB)) + 1), 0) AS n FROM batch_lines WHERE owner_id = ? AND batch_id = ? AND outcome = ?', ownerId, batchId, outcome))!.n),
    batchOutputPage: async (ownerId, batchId, outcome, after, limit) =>
      (await all('SELECT line_no, output FROM batch_lines WHERE owner_id = ? AND batch_id = ? AND outcome = ? AND line_no > ? ORDER BY line_no LIMIT ?', ownerId, batchId, outcome, after, limit))
        .map((r) => ({ lineNo: Number(r.line_no), output: String(r.output) })),

    // One writer at a time: the write transaction is the lock (as JOB_LIST_QUEUED).
    jobListQueuedBatchLines: async (limit, now) =>
      (await all(
        `SELECT j.* FROM jobs j
         WHERE j.state = 'queued' AND j.batch_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM batches b WHERE b.owner_id = j.owner_id AND b.id = j.batch_id AND b.status = 'in_progress' AND b.expires_at > ?)
         ORDER BY j.created_at, j.id LIMIT ?`,
        now.getTime(), limit,
      )).map(toJob),

    batchRetentionDelete: async (p) => {
      const now = p.now?.getTime() ?? Date.now();
      const cutoff = now - p.olderThanMs;
      const old = await all('SELECT owner_id, id FROM batches WHERE finished_at IS NOT NULL AND finished_at < ? ORDER BY finished_at LIMIT ?', cutoff, p.limit);
      let files = 0;
      for (const b of old) {
        await run('DELETE FROM batch_lines WHERE owner_id = ? AND batch_id = ?', b.owner_id, b.id);
        files += await run("DELETE FROM files WHERE owner_id = ? AND batch_id = ? AND purpose = 'batch_output'", b.owner_id, b.id);
        await run('DELETE FROM batches WHERE owner_id = ? AND id = ?', b.owner_id, b.id);
      }
      const stale = await all(
        `SELECT owner_id, id FROM files f WHERE purpose = 'batch' AND (
           (status = 'uploading' AND created_at < ?) OR
           (status = 'processed' AND created_at < ? AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.owner_id = f.owner_id AND b.input_file_id = f.id)))
         LIMIT ?`,
        now - 3_600_000, cutoff, p.limit,
      );
      for (const f of stale) {
        await run('DELETE FROM file_lines WHERE owner_id = ? AND file_id = ?', f.owner_id, f.id);
        files += await run('DELETE FROM files WHERE owner_id = ? AND id = ?', f.owner_id, f.id);
      }
      return { batches: old.length, files };
    },
  };
}
