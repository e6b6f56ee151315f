/**
 * The checker's rule for streams resumed across reconnects (CONTRACT §13):
 * what a client assembled across its connections (chaos/resuming-stream.ts)
 * equals the stored result, with no event twice and none skipped.
 *
 * A chain is a first connection and the resumes that name it (each names
 * the one before). Per chain:
 * - every connection's ids are one attempt's `<attempt>-<n>`, consecutive;
 * - a resume's first id follows its cursor: `Last-Event-ID: a-n` → `a-(n+1)`,
 *   `starting_after=k` → ordinal k + 2, of the stream the chain already had;
 * - a resume that ends without its terminator or `event: error` while the
 *   server answered is cut short (a resume after the last event is an empty
 *   stream, but a chain resumes only before it has the terminator);
 * - the text of all connections, concatenated: when the last stream ended
 *   complete, the job's stored result, under the winner's attempt number;
 *   otherwise the beginning of the output of the attempt its ids name.
 *
 * Pure, like chaos/checker.ts, which registers it ({@link checkResumedStreams}).
 */
import type { DbJob, HistoryEntry, StreamRecord } from './records.ts';

/** What the rule needs from the checker. */
export interface ResumeCheckInput {
  readonly history: readonly HistoryEntry[];
  readonly jobsById: ReadonlyMap<string, DbJob>;
  /** Every output attempt `number` of the job produced: the providers' replies to it, and the stored result's text if it won. */
  readonly outputsOf: (jobId: string, number: number) => readonly string[];
  /** The number of the job's winning attempt, or null. */
  readonly winnerOf: (jobId: string) => number | null;
  /** The text a gateway answer carries for a stored result. */
  readonly resultText: (result: unknown) => string;
  /** Two texts of one output are the same (equal, or equal JSON values). */
  readonly sameText: (a: string, b: string) => boolean;
  readonly note: (name: string, n?: number) => void;
}

/** One violation of the rule: the checker reports it as `resume_mismatch` with these entries. */
export interface ResumeViolation {
  readonly jobId: string | null;
  readonly message: string;
  readonly entries: readonly HistoryEntry[];
}

function parseId(id: string): { attempt: number; n: number } | null {
  const m = /^(\d+)-(\d+)$/.exec(id);
  return m === null ? null : { attempt: Number(m[1]), n: Number(m[2]) };
}

type Stream = StreamRecord & { readonly ids?: readonly string[] };

function streamOf(e: HistoryEntry): Stream | null {
  if (e.status !== 200) return null;
  return ((e.response as { stream?: Stream } | undefined)?.stream) ?? null;
}

function jobIdOf(chain: readonly HistoryEntry[]): string | null {
  for (const e of chain) {
    const id = (e.response as { job_id?: unknown } | undefined)?.job_id;
    if (typeof id === 'string') return id;
    if (e.jobId !== undefined) return e.jobId;
  }
  return null;
}

/**
 * Checks every chain of resumed connections in the history.
 *
 * @example for (const v of checkResumedStreams({ history, jobsById, outputsOf, resultText, sameText, note })) report(v);
 */
export function checkResumedStreams(input: ResumeCheckInput): ResumeViolation[] {
  const out: ResumeViolation[] = [];
  const byId = new Map(input.history.map((e) => [e.id, e]));
  const next = new Map<number, HistoryEntry>();
  for (const e of input.history) if (e.resume !== undefined) next.set(e.resume.of, e);
  for (const root of input.history) {
    if (root.resume !== undefined || !next.has(root.id)) continue;
    const chain: HistoryEntry[] = [root];
    for (let e = next.get(root.id); e !== undefined; e = next.get(e.id)) chain.push(e);
    const jobId = jobIdOf(chain);
    const fail = (message: string): void => {
      out.push({ jobId, message, entries: chain });
    };
    input.note('resume_chains');
    input.note('resume_connections', chain.length - 1);
    if (chain.some((e) => e.resume !== undefined && e.resume.via !== 'lb')) input.note('resume_chains_direct_to_a_process');
    if (chain.some((e) => e.resume?.starting_after !== null && e.resume?.starting_after !== undefined)) input.note('resume_chains_starting_after');

    let text = '';
    let attempt: number | null = null;
    let last: number | null = null;
    let end: Stream['end'] = 'eof';
    let broken = false;
    for (const e of chain) {
      if (e.resume !== undefined && byId.get(e.resume.of) === undefined) {
        fail(`connection h${e.id} resumes h${e.resume.of}, which is not in the history`);
        broken = true;
        break;
      }
      const st = streamOf(e);
      if (st === null) continue;
      const ids = st.ids ?? [];
      const parsed = ids.map(parseId);
      if (parsed.some((p) => p === null)) {
        fail(`connection h${e.id} received events without an id of the form <attempt>-<n>: ${JSON.stringify(ids)}`);
        broken = true;
        break;
      }
      const ps = parsed as { attempt: number; n: number }[];
      if (e.resume !== undefined && ps.length > 0) {
        const p0 = ps[0]!;
        const { last_event_id: lastEventId, starting_after: startingAfter } = e.resume;
        const cursor = lastEventId === null ? null : parseId(lastEventId);
        const expected = cursor !== null ? cursor : startingAfter !== null ? { attempt: attempt ?? p0.attempt, n: startingAfter + 1 } : null;
        if (expected === null || p0.attempt !== expected.attempt || p0.n !== expected.n + 1) {
          fail(`connection h${e.id} resumed after ${lastEventId ?? `starting_after=${startingAfter}`} but its first event is ${ids[0]} (expected ${expected === null ? '?' : `${expected.attempt}-${expected.n + 1}`}): an event twice, skipped, or of another stream`);
          broken = true;
          break;
        }
      }
      for (const [i, p] of ps.entries()) {
        const continues = attempt === null || (p.attempt === attempt && p.n === last! + 1);
        if (!continues || (i > 0 && p.n !== ps[i - 1]!.n + 1)) {
          fail(`across its reconnects the client received ${ids[i]} after ${attempt === null ? '(nothing)' : `${attempt}-${last}`}: an event twice, skipped, or of another stream`);
          broken = true;
          break;
        }
        attempt = p.attempt;
        last = p.n;
      }
      if (broken) break;
      if (e.resume !== undefined && typeof st.bad_sequence === 'string') {
        fail(`resumed Responses stream h${e.id}: an event's sequence_number is not its id's (${st.bad_sequence})`);
        broken = true;
        break;
      }
      if (e.resume !== undefined && (st.end === 'garbled' || (st.end === 'eof' && e.outcome === 'answered'))) {
        fail(`resumed stream h${e.id} ${st.end === 'garbled' ? 'carried an event that is not JSON' : 'ended with neither its terminator nor event: error'} (after ${ids.length} events)`);
        broken = true;
        break;
      }
      text += st.text;
      end = st.end;
    }
    if (broken) continue;
    input.note(`resume_chains_${end}`);
    if (jobId === null) continue;
    const job = input.jobsById.get(jobId);
    if (end === 'done') {
      if (job === undefined || job.state !== 'succeeded' || !input.sameText(text, input.resultText(job.result))) {
        fail(`what the client assembled across ${chain.length} connections, ${JSON.stringify(text)}, is not the job's result (${job?.state ?? 'missing'}: ${JSON.stringify(job === undefined ? null : input.resultText(job.result))})`);
      } else if (attempt !== null && attempt !== input.winnerOf(jobId)) {
        fail(`the client assembled the job's result from the stream of attempt ${attempt}, but attempt ${input.winnerOf(jobId)} won`);
      }
    } else if (text !== '' && attempt !== null && !input.outputsOf(jobId, attempt).some((o) => o.startsWith(text))) {
      fail(`what the client assembled across ${chain.length} connections before the stream ${end === 'error' ? 'broke' : 'was left'}, ${JSON.stringify(text)}, does not begin the output of attempt ${attempt}, whose ids it carries`);
    }
  }
  return out;
}
