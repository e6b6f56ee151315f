/** The jobs in doubt: every job blocked on an `unknown` attempt, oldest first, with resolve and cancel. */
import type { Api, Job } from './api.ts';
import { ago, when } from './format.ts';
import { CancelAction, ResolveActions } from './actions.tsx';
import { ErrorNote, useLoad } from './ui.tsx';

export function DoubtScreen({ api, tick }: { api: Api; tick: number }) {
  const page = useLoad((signal) => api.get<{ data: Job[]; next_cursor: string | null }>('/v1/jobs?state=unknown&order=oldest&limit=100', signal), [tick]);
  const jobs = page.data?.data ?? [];
  return (
    <section aria-labelledby="doubt-title">
      <h1 id="doubt-title" tabIndex={-1}>In doubt</h1>
      <p class="muted">
        Jobs blocked on an attempt whose outcome nobody knows (a deadline passed, or its executor died). onejob never sends these
        again by itself. Where the provider can be asked (stored completions, tasks, background responses) the executors ask it
        with backoff and the doubt ends by itself; the rest wait for a late answer or for you: decide what happened, oldest first.
      </p>
      <ErrorNote error={page.error} />
      {jobs.length === 0 && !page.loading && <p data-testid="doubt-empty">Nothing is in doubt.</p>}
      <ol class="doubt-list">
        {jobs.map((j) => (
          <li data-job={j.id}>
            <article>
              <header class="doubt-head">
                <a href={`#/jobs/${encodeURIComponent(j.id)}`} class="mono">{j.id}</a>
                <span class="muted"> · {j.route} · created {ago(j.created_at)} ({when(j.created_at)})</span>
              </header>
              {j.attempts.filter((a) => a.state === 'unknown').map((a) => (
                <div class="doubt-attempt" data-attempt={a.id}>
                  <p>
                    <strong>⚠ attempt #{a.number} on {a.provider}</strong>{' '}
                    <span class="muted">started {ago(a.started_at)}</span>
                    {a.error && <> — <span class="mono">{a.error.code}</span>: {a.error.message}</>}
                  </p>
                  <p class="small muted">
                    {a.unknown_at && <>in doubt {ago(a.unknown_at)} · </>}
                    {a.provider_request_id ? <>provider id <span class="mono">{a.provider_request_id}</span> · </> : <>no provider id · </>}
                    {a.last_checked_at ? <>asked the provider {ago(a.last_checked_at)}</> : <>not asked yet</>}
                    {a.next_check_at && <> · next check {when(a.next_check_at)}</>}
                  </p>
                  <ResolveActions api={api} attempt={a} />
                </div>
              ))}
              <footer><CancelAction api={api} job={j} /></footer>
            </article>
          </li>
        ))}
      </ol>
      {page.data?.next_cursor && <p class="muted">Showing the oldest 100.</p>}
    </section>
  );
}
