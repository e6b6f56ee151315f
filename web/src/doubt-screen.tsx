/**
 * The doubt queue: every attempt in doubt of a job not yet finished, oldest
 * first (`GET /v1/doubt`, one read for the page), as a work queue: what each
 * is (key, route, a line of its input, the provider's id of the request),
 * whether onejob can ask the provider by itself and when it last asked and
 * asks next (or, when it cannot, what would make it askable: the provider
 * type and the setting), how long it has been in doubt; select several and resolve them
 * as failed or cancelled, or cancel their jobs, at once with one reason (one
 * call of the existing endpoint per row).
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Api, type DoubtRow } from './api.ts';
import { ago, until, when } from './format.ts';
import { ConfirmAction, ErrorNote, useLoad } from './ui.tsx';

/** How often the queue is re-read besides live changes (ms). */
const REREAD_MS = 5_000;

/** What a bulk action did: the rows it could not act on, with the API's answer. */
class BulkError extends Error {
  constructor(readonly failures: { row: DoubtRow; error: unknown }[], done: number) {
    const why = (e: unknown) => (e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
    super(`${done} done; ${failures.length} not: ${failures.map((f) => `${f.row.job.idempotency_key} (${why(f.error)})`).join('; ')}`);
  }
}

/** Runs `act` for each row in turn (one API call each: the contract has no bulk endpoint); throws a {@link BulkError} naming the rows that failed. */
async function forEach(rows: DoubtRow[], act: (row: DoubtRow) => Promise<unknown>): Promise<void> {
  const failures: { row: DoubtRow; error: unknown }[] = [];
  for (const row of rows) {
    try {
      await act(row);
    } catch (error) {
      failures.push({ row, error });
    }
  }
  if (failures.length > 0) throw new BulkError(failures, rows.length - failures.length);
}

function CheckNow({ api, row }: { api: Api; row: DoubtRow }) {
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState<string | null>(null);
  const check = async () => {
    setBusy(true);
    try {
      const answer = await api.post<{ lookup: { outcome: string; message?: string } }>(`/v1/attempts/${encodeURIComponent(row.id)}/check`);
      setSaid(answer.lookup.outcome === 'running' ? 'still running' : answer.lookup.outcome.replace('_', ' '));
    } catch (e) {
      setSaid(e instanceof ApiError ? e.code : 'could not ask');
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="outline small-button" onClick={check} aria-busy={busy} disabled={busy} data-testid={`check-${row.id}`}>Ask now</button>
      {said && <span class="small muted" role="status"> {said}</span>}
    </>
  );
}

export function DoubtScreen({ api, tick }: { api: Api; tick: number }) {
  // Re-read every few seconds as well as on live changes: an ask that learns nothing definite writes no event (so the
  // live feed is silent), yet moves the last and next check; and the ages and countdowns move with the clock.
  const [beat, setBeat] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setBeat((b) => b + 1), REREAD_MS);
    return () => clearInterval(timer);
  }, []);
  const page = useLoad((signal) => api.get<{ data: DoubtRow[]; next_cursor: string | null }>('/v1/doubt?limit=100', signal), [tick, beat]);
  const rows = page.data?.data ?? [];
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  // A row that left the queue (resolved by someone, by a lookup, by a late answer) leaves the selection.
  useEffect(() => {
    if (!page.data) return;
    const present = new Set(page.data.data.map((r) => r.id));
    setSelected((s) => (Array.from(s).every((id) => present.has(id)) ? s : new Set(Array.from(s).filter((id) => present.has(id)))));
  }, [page.data]);
  const chosen = rows.filter((r) => selected.has(r.id));
  const toggle = (id: string, on: boolean) => setSelected((s) => {
    const next = new Set(s);
    if (on) next.add(id);
    else next.delete(id);
    return next;
  });
  const all = rows.length > 0 && chosen.length === rows.length;
  const n = chosen.length;
  const jobsChosen = [...new Map(chosen.map((r) => [r.job.id, r])).values()];
  const resolve = (state: 'failed' | 'cancelled') => ({ reason }: { reason: string }) =>
    forEach(chosen, (r) => api.post(`/v1/attempts/${encodeURIComponent(r.id)}/resolve`, { state, reason }));
  const askable = rows.filter((r) => r.can_check).length;
  const some = (text: string, count: number) => (count > 0 ? text.replace('#', String(count)) : text.replace('# ', ''));
  const jobs = jobsChosen.length === 1 ? 'job' : 'jobs';
  const now = Date.now();
  return (
    <section aria-labelledby="doubt-title">
      <h1 id="doubt-title" tabIndex={-1}>In doubt</h1>
      <p class="muted">
        Attempts whose outcome nobody knows yet (a deadline passed, or their executor died); onejob never sends one again.
        Where the provider can be asked (stored completions, background responses, tasks: <strong>asked by onejob</strong>),
        onejob asks it with backoff and the doubt ends by itself. The rest wait for a late answer, a settle policy or you:
        select them and resolve or cancel them at once, with one reason. To resolve one as succeeded, open its job.
      </p>
      <ErrorNote error={page.error} />
      {rows.length === 0 && !page.loading && <p data-testid="doubt-empty">Nothing is in doubt.</p>}
      {rows.length > 0 && (
        <>
          <div class="bulk-bar" role="group" aria-label="Act on the selected attempts">
            <span data-testid="doubt-selected" aria-live="polite">
              {n === 0 ? `${rows.length} in doubt (${askable} asked by onejob); none selected` : `${n} of ${rows.length} selected`}
            </span>
            <ConfirmAction
              label={some('Resolve # as failed…', n)} title={`Resolve ${n} attempt${n === 1 ? '' : 's'} as failed`} confirmLabel={`Resolve ${n} as failed`}
              testId="bulk-failed" disabled={n === 0}
              description={<p>Say that each definitely did not run. Each job then goes on down its chain, as after any definite failure. An attempt that was decided meanwhile is left as it is and named below.</p>}
              onConfirm={resolve('failed')}
            />
            <ConfirmAction
              label={some('Resolve # as cancelled…', n)} title={`Resolve ${n} attempt${n === 1 ? '' : 's'} as cancelled`} confirmLabel={`Resolve ${n} as cancelled`}
              testId="bulk-cancelled" disabled={n === 0}
              description={<p>Record that each was stopped. Each job goes on down its chain.</p>}
              onConfirm={resolve('cancelled')}
            />
            <ConfirmAction
              label={some(`Cancel # ${jobs}…`, jobsChosen.length)} title={`Cancel ${jobsChosen.length} ${jobs}`}
              confirmLabel={`Cancel ${jobsChosen.length} ${jobs}`} danger testId="bulk-cancel-jobs" disabled={n === 0}
              description={<p>Each job becomes <strong>cancelled</strong> for good; attempts in flight are asked to stop, and any result that arrives later is superseded.</p>}
              onConfirm={({ reason }) => forEach(jobsChosen, (r) => api.post(`/v1/jobs/${encodeURIComponent(r.job.id)}/cancel`, { reason }))}
            />
          </div>
          <div class="overflow-auto">
            <table class="doubt-table">
              <caption class="visually-hidden">Attempts in doubt, oldest first</caption>
              <thead>
                <tr>
                  <th scope="col">
                    <input type="checkbox" aria-label="Select all" checked={all}
                      onChange={(e) => setSelected(new Set((e.target as HTMLInputElement).checked ? rows.map((r) => r.id) : []))} />
                  </th>
                  <th scope="col">Job</th>
                  <th scope="col">Input</th>
                  <th scope="col">Attempt</th>
                  <th scope="col">Provider's id</th>
                  <th scope="col">Asked by onejob</th>
                  <th scope="col">In doubt</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((r) => (
                  <tr data-attempt={r.id} data-job={r.job.id} data-can-check={String(r.can_check)} class={selected.has(r.id) ? 'is-selected' : ''}>
                    <td>
                      <input type="checkbox" checked={selected.has(r.id)} aria-label={`Select attempt #${r.number} of ${r.job.idempotency_key}`}
                        onChange={(e) => toggle(r.id, (e.target as HTMLInputElement).checked)} />
                    </td>
                    <td class="doubt-job">
                      <a href={`#/jobs/${encodeURIComponent(r.job.id)}`} class="mono">{r.job.idempotency_key}</a>
                      <div class="small muted">{r.job.route}</div>
                    </td>
                    <td class="doubt-input small" title={r.job.input_line}>{r.job.input_line}</td>
                    <td class="small">
                      <strong>⚠ #{r.number} {r.provider}</strong>
                      {r.error && <div><span class="mono">{r.error.code}</span></div>}
                    </td>
                    <td class="mono small doubt-pid">{r.provider_request_id ?? <span class="muted">none</span>}</td>
                    <td class="small" data-testid={`ask-${r.id}`}>
                      {r.can_check ? (
                        <>
                          <strong class="ok-mark">✓ yes</strong>
                          <div>last {r.last_checked_at ? <span title={when(r.last_checked_at)}>{ago(r.last_checked_at, now)}</span> : 'not yet'}</div>
                          <div>next {r.next_check_at ? <span title={when(r.next_check_at)}>{until(r.next_check_at, now)}</span> : '—'}</div>
                          <CheckNow api={api} row={r} />
                        </>
                      ) : (
                        <>
                          {r.settles_at ? (
                            <>no lookup; <span title={when(r.settles_at)}>settled by policy {until(r.settles_at, now).replace('due now', 'now')}</span></>
                          ) : (
                            <span class="muted">no: its protocol keeps nothing to ask</span>
                          )}
                          {r.ask_hint && <div class="ask-hint" data-testid={`ask-hint-${r.id}`}>To make it askable: {r.ask_hint}</div>}
                        </>
                      )}
                    </td>
                    <td class="small nowrap" title={when(r.unknown_at ?? r.started_at)}>{ago(r.unknown_at ?? r.started_at, now).replace(' ago', '')}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {page.data?.next_cursor && <p class="muted">Showing the oldest 100.</p>}
    </section>
  );
}
