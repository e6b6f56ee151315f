/**
 * The chaos workload's resuming stream clients (CONTRACT §13): a client
 * streams a chat / messages / responses answer through the load balancer,
 * drops the connection mid-answer (or loses it to a fault), and resumes with
 * the last SSE id it saw on a random process: the load balancer (which
 * sends the key to the process it hashes to) or one of the API processes
 * directly (any other process). On `/v1/responses` half the resumes are
 * `GET /v1/responses/{id}?stream=true&starting_after=<n>`. Each connection
 * is one history entry; a resume names the connection before it
 * ({@link ResumeRecord}), and every stream records the ids it received, so
 * the checker (chaos/resume-check.ts) can assemble what the client saw.
 */
import { createParser } from 'eventsource-parser';
import { request, type Dispatcher } from 'undici';
import type { HistoryEntry, OpKind, ResumeRecord, StreamRecord } from './records.ts';
import { SseReader } from './workload.ts';

/** What a resuming client needs from the workload. */
export interface ResumingStreamContext {
  /** Where a connection may go: the load balancer (`lb`) and each API process by name. */
  readonly targets: readonly { readonly name: string; readonly url: string }[];
  readonly random: () => number;
  readonly clock: () => number;
  readonly dispatcher: Dispatcher;
  /** Writes one history entry (the workload numbers it). */
  readonly record: (entry: Omit<HistoryEntry, 'id'>) => HistoryEntry;
}

/** The client: its name, owner and token. */
export interface ResumingClient {
  readonly name: string;
  readonly owner: string;
  readonly token: string;
}

/** At most this many connections per chain after the first. */
const MAX_RESUMES = 5;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `<attempt>-<n>` → n, else null. */
function ordinalOf(id: string): number | null {
  const m = /^(\d+)-(\d+)$/.exec(id);
  return m === null ? null : Number(m[2]);
}

interface Connection {
  readonly entry: HistoryEntry;
  readonly stream: (StreamRecord & { ids: string[] }) | null;
  readonly jobId: string | null;
}

/**
 * One connection: sends, reads the stream, drops it after `dropAfter`
 * events (when given and the stream has not ended by then), records it.
 */
async function connect(
  ctx: ResumingStreamContext,
  c: ResumingClient,
  o: { op: OpKind; endpoint: 'chat' | 'messages' | 'responses'; method: 'GET' | 'POST'; target: { name: string; url: string }; path: string; key?: string; body?: unknown; lastEventId?: string; jobId?: string; dropAfter: number | null; resume?: ResumeRecord },
): Promise<Connection> {
  const headers: Record<string, string> = { authorization: `Bearer ${c.token}` };
  if (o.key !== undefined) headers['idempotency-key'] = o.key;
  if (o.lastEventId !== undefined) headers['last-event-id'] = o.lastEventId;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const sentAt = ctx.clock();
  const drop = new AbortController();
  let status: number | null = null;
  let outcome: HistoryEntry['outcome'] = 'answered';
  let error: string | undefined;
  let replayed: boolean | undefined;
  let jobId: string | null = o.jobId ?? null;
  let code: unknown;
  let sse: SseReader | null = null;
  const ids: string[] = [];
  let badSequence: string | null = null;
  try {
    const res = await request(`${o.target.url}${o.path}`, {
      method: o.method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), dispatcher: ctx.dispatcher,
      signal: AbortSignal.any([drop.signal, AbortSignal.timeout(15_000)]),
    });
    status = res.statusCode;
    replayed = res.headers['idempotent-replayed'] === 'true' ? true : undefined;
    const jid = res.headers['onejob-job-id'];
    if (typeof jid === 'string') jobId = jid;
    if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      const reader = new SseReader(o.endpoint);
      sse = reader;
      // The ids, beside the workload's reader of text and ends (both fed the same bytes).
      const idParser = createParser({
        onEvent: (ev) => {
          if (reader.record.end !== 'eof' && ids.length >= reader.record.events) return;
          const id = ev.id ?? '';
          ids.push(id);
          if (o.endpoint !== 'responses' || badSequence !== null) return;
          // One numbering (docs/streaming.md): the event with id `<attempt>-<n>` has sequence_number n - 1.
          const n = ordinalOf(id);
          let seq: unknown;
          try {
            seq = (JSON.parse(ev.data) as { sequence_number?: unknown }).sequence_number;
          } catch {
            seq = undefined;
          }
          if (n === null || seq !== n - 1) badSequence = `${id}:${String(seq)}`;
        },
      });
      const decoder = new TextDecoder();
      try {
        for await (const chunk of res.body) {
          const text = decoder.decode(chunk as Buffer, { stream: true });
          reader.feed(text);
          idParser.feed(text);
          if (o.dropAfter !== null && reader.record.end === 'eof' && reader.record.events >= o.dropAfter) {
            outcome = 'dropped';
            drop.abort();
            break;
          }
        }
      } catch (e) {
        const err = e as Error;
        if (outcome !== 'dropped') {
          outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
          error = `${err.name}: ${err.message}`.slice(0, 200);
        }
      }
      if (outcome === 'dropped') res.body.destroy();
    } else {
      const text = await res.body.text();
      try {
        code = (JSON.parse(text) as { code?: unknown }).code;
      } catch {
        code = undefined;
      }
    }
  } catch (e) {
    const err = e as Error;
    // (The stream's own catch above may have set it: a drop that aborted the request.)
    if ((outcome as HistoryEntry['outcome']) !== 'dropped') {
      outcome = err.name === 'TimeoutError' || err.name === 'AbortError' ? 'timeout' : 'network';
      error = `${err.name}: ${err.message}`.slice(0, 200);
      if (sse === null) status = null;
    }
  }
  const stream = sse === null ? null : { ...sse.record, ids, ...(o.endpoint === 'responses' ? { bad_sequence: badSequence } : {}) };
  const response = stream !== null
    ? { ...(jobId === null ? {} : { job_id: jobId }), stream }
    : { ...(jobId === null ? {} : { job_id: jobId }), ...(typeof code === 'string' ? { code } : {}) };
  const entry = ctx.record({
    client: c.name, owner: c.owner, op: o.op, method: o.method, path: o.path,
    ...(o.key === undefined ? {} : { key: o.key }),
    ...(o.jobId === undefined ? {} : { jobId: o.jobId }),
    ...(o.body === undefined ? {} : { body: o.body }),
    sentAt, recvAt: ctx.clock(), status, outcome, response,
    ...(replayed === undefined ? {} : { replayed }),
    ...(error === undefined ? {} : { error }),
    ...(o.resume === undefined ? {} : { resume: o.resume }),
  });
  return { entry, stream, jobId };
}

/**
 * Streams one gateway request and resumes it across reconnects (see the
 * module comment). Resolves with the first connection's entry (the one that
 * names the job for the workload), and its status.
 *
 * @example await resumingStream(ctx, client, 'chat', '/v1/chat/completions', key, { model: 'plain', messages, stream: true });
 */
export async function resumingStream(
  ctx: ResumingStreamContext,
  c: ResumingClient,
  endpoint: 'chat' | 'messages' | 'responses',
  path: string,
  key: string,
  body: unknown,
): Promise<{ status: number | null; entry: HistoryEntry }> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(ctx.random() * xs.length)]!;
  const dropAfter = (p: number): number | null => (ctx.random() < p ? 1 + Math.floor(ctx.random() * 8) : null);
  const first = await connect(ctx, c, { op: endpoint, endpoint, method: 'POST', target: ctx.targets[0]!, path, key, body, dropAfter: dropAfter(0.85) });
  let previous = first;
  let lastId: string | null = first.stream?.ids.at(-1) ?? null;
  let jobId = first.jobId;
  let ended = first.stream !== null && first.stream.end !== 'eof';
  for (let i = 0; i < MAX_RESUMES && !ended && lastId !== null && lastId !== ''; i++) {
    await sleep(50 + Math.floor(ctx.random() * 350));
    const target = pick(ctx.targets);
    const n = ordinalOf(lastId);
    const byStartingAfter = endpoint === 'responses' && jobId !== null && n !== null && ctx.random() < 0.5;
    const resume: ResumeRecord = { of: previous.entry.id, last_event_id: byStartingAfter ? null : lastId, starting_after: byStartingAfter ? n! - 1 : null, via: target.name };
    const next = byStartingAfter
      ? await connect(ctx, c, { op: 'response_get', endpoint, method: 'GET', target, path: `/v1/responses/resp_${jobId}?stream=true&starting_after=${n! - 1}`, jobId: jobId!, dropAfter: dropAfter(0.4), resume })
      : await connect(ctx, c, { op: endpoint, endpoint, method: 'POST', target, path, key, body, lastEventId: lastId, dropAfter: dropAfter(0.4), resume });
    previous = next;
    jobId ??= next.jobId;
    if (next.stream === null) continue; // no stream (a fault, a 5xx): try again from the same id
    if (next.stream.ids.length > 0) lastId = next.stream.ids.at(-1)!;
    ended = next.stream.end !== 'eof' || (next.entry.outcome === 'answered' && next.stream.ids.length === 0);
  }
  return { status: first.entry.status, entry: first.entry };
}
