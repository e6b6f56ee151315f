/**
 * The streamed upload of a batch input file (CONTRACT §17): the bytes are
 * split into lines as they arrive, each line checked, and the checked lines
 * written a page at a time under an `uploading` file that no read sees; only
 * the last step publishes it. Memory holds one page and the `custom_id`s,
 * never the file. The first bad line stops it and deletes what was stored.
 * See docs/batches.md, "Upload".
 */
import { StringDecoder } from 'node:string_decoder';
import type { OnejobConfig } from '../config/config.ts';
import { OnejobError } from '../core/errors.ts';
import type { FileLineRow, FileRow } from '../store/batch-queries.ts';
import { BATCH_PAGE, type BatchStore } from '../store/batch-store.ts';
import { checkBatchLine, MAX_BATCH_FILE_BYTES, MAX_BATCH_LINES } from './batch-lines.ts';

/** Limits of one upload (tests make them small). */
export interface UploadLimits {
  readonly maxBytes: number;
  readonly maxLines: number;
}

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = { maxBytes: MAX_BATCH_FILE_BYTES, maxLines: MAX_BATCH_LINES };

/** A refused line: `400 invalid_request` naming it. */
function lineRefused(lineNo: number, why: string): OnejobError {
  return new OnejobError('invalid_request', `line ${lineNo} of the file ${why}; nothing was stored`, { details: { line: lineNo } });
}

/**
 * Stores the lines of `source` under the new file `fileId` (status
 * `uploading`), checking each. Returns the totals to publish it with.
 *
 * @throws OnejobError `invalid_request` (a bad line, too many lines, an empty file) or `payload_too_large`; the caller deletes the file then.
 */
export async function storeUploadLines(p: {
  readonly batches: BatchStore;
  readonly config: OnejobConfig;
  readonly ownerId: string;
  readonly fileId: string;
  readonly source: AsyncIterable<Buffer>;
  readonly limits: UploadLimits;
}): Promise<{ bytes: number; lineCount: number; endpoints: string[] }> {
  const seen = new Set<string>();
  const endpoints = new Set<string>();
  const decoder = new StringDecoder('utf8');
  let page: FileLineRow[] = [];
  let bytes = 0;
  let lineNo = 0;
  let rest = '';
  const flush = async (): Promise<void> => {
    if (page.length === 0) return;
    const rows = page;
    page = [];
    await p.batches.addFileLines(rows);
  };
  const take = async (raw: string): Promise<void> => {
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (text.trim() === '') return; // blank lines (a trailing newline) are not lines
    lineNo += 1;
    if (lineNo > p.limits.maxLines) throw new OnejobError('invalid_request', `the file has more than ${p.limits.maxLines} lines (the most one batch takes); nothing was stored`, { details: { line: lineNo } });
    const checked = checkBatchLine(text, seen, p.config.routes);
    if ('error' in checked) throw lineRefused(lineNo, checked.error);
    seen.add(checked.customId);
    endpoints.add(checked.url);
    page.push({ ownerId: p.ownerId, fileId: p.fileId, lineNo, customId: checked.customId, url: checked.url, route: checked.route, line: text });
    if (page.length >= BATCH_PAGE) await flush();
  };
  for await (const chunk of p.source) {
    bytes += chunk.length;
    if (bytes > p.limits.maxBytes) throw new OnejobError('payload_too_large', `the file is larger than ${p.limits.maxBytes} bytes (the most one batch takes); nothing was stored`);
    rest += decoder.write(chunk);
    let start = 0;
    for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n', start)) {
      await take(rest.slice(start, nl));
      start = nl + 1;
    }
    rest = rest.slice(start);
  }
  rest += decoder.end();
  if (rest !== '') await take(rest);
  if (lineNo === 0) throw new OnejobError('invalid_request', 'the file has no lines: a batch input file has one JSON request per line');
  await flush();
  return { bytes, lineCount: lineNo, endpoints: [...endpoints] };
}

/** The OpenAI File object of a file. */
export function fileObject(f: FileRow): Record<string, unknown> {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: Math.floor(f.createdAt.getTime() / 1000),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    status_details: null,
    expires_at: null,
  };
}
