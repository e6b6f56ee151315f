/** The jobs list: filters (state, route, provider, created time), search by id or key, cursor paging. */
import { useState } from 'preact/hooks';
import type { Api, Certification, Job } from './api.ts';
import { ago, count, idTail, short, usd, when } from './format.ts';
import { ErrorNote, StateBadge, go, useLoad } from './ui.tsx';

const STATES = ['queued', 'running', 'unknown', 'succeeded', 'failed', 'cancelled'];

/** `datetime-local` value (local time) → RFC 3339 with the offset. */
function toRfc3339(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

const NARROW = '(max-width: 700px)';

/** The filters a phone folds away: every one but the search. */
const FOLDED = ['state', 'route', 'provider', 'since', 'until'] as const;

/** State, route, provider and created-time filters. */
function FoldedFilters({ filters, routes, providers }: { filters: Record<(typeof FOLDED)[number], string>; routes: string[]; providers: string[] }) {
  return (
    <div class="filters-more">
      <label>
        State
        <select name="state" value={filters.state}>
          <option value="">any</option>
          {STATES.map((s) => <option value={s}>{s}</option>)}
        </select>
      </label>
      <label>
        Route
        <select name="route" value={filters.route}>
          <option value="">any</option>
          {routes.map((r) => <option value={r}>{r}</option>)}
        </select>
      </label>
      <label>
        Provider
        <select name="provider" value={filters.provider}>
          <option value="">any</option>
          {providers.map((p) => <option value={p}>{p}</option>)}
        </select>
      </label>
      <label>
        Created from
        <input type="datetime-local" name="since" value={filters.since} step={1} />
      </label>
      <label>
        Created before
        <input type="datetime-local" name="until" value={filters.until} step={1} />
      </label>
    </div>
  );
}

export function JobsScreen({ api, query, tick }: { api: Api; query: URLSearchParams; tick: number }) {
  const filters = {
    state: query.get('state') ?? '',
    route: query.get('route') ?? '',
    provider: query.get('provider') ?? '',
    since: query.get('since') ?? '',
    until: query.get('until') ?? '',
    q: query.get('q') ?? '',
  };
  // Cursors of the pages before this one (for "Previous").
  const [cursors, setCursors] = useState<string[]>([]);
  const [showFilters, setShowFilters] = useState(false);
  const cursor = cursors[cursors.length - 1];
  const key = JSON.stringify(filters);
  const options = useLoad((signal) => api.get<{ data: Certification[] }>('/v1/certifications', signal), []);
  const page = useLoad(
    (signal) => {
      const p = new URLSearchParams({ limit: '25' });
      for (const [k, v] of Object.entries(filters)) {
        const value = k === 'since' || k === 'until' ? toRfc3339(v) : v;
        if (value) p.set(k, value);
      }
      if (cursor) p.set('cursor', cursor);
      return api.get<{ data: Job[]; next_cursor: string | null }>(`/v1/jobs?${p}`, signal);
    },
    [key, cursor, tick],
  );
  const routes = [...new Set((options.data?.data ?? []).map((c) => c.route))];
  const providers = [...new Set((options.data?.data ?? []).map((c) => c.provider))];
  const apply = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    setCursors([]);
    go('jobs', Object.fromEntries([...form.entries()].map(([k, v]) => [k, String(v)])));
  };
  const jobs = page.data?.data ?? [];
  // On a phone the filters other than the search fold behind a toggle, so the jobs show on the first screen;
  // folded, they still go with the form (hidden inputs) so that Apply keeps them.
  const narrow = window.matchMedia(NARROW).matches;
  const active = FOLDED.filter((k) => filters[k] !== '').length;
  const folded = narrow && !showFilters;
  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title" tabIndex={-1}>Jobs</h1>
      <form class="filters" onSubmit={apply} role="search" aria-label="Filter jobs">
        <label class="filter-search">
          Search
          <input type="search" name="q" placeholder="job id or idempotency key" value={filters.q} />
        </label>
        {folded && FOLDED.map((k) => <input type="hidden" name={k} value={filters[k]} />)}
        {!folded && <FoldedFilters filters={filters} routes={routes} providers={providers} />}
        <div class="filter-actions">
          {narrow && (
            <button type="button" class="secondary outline filter-toggle" aria-expanded={!folded} onClick={() => setShowFilters(!showFilters)}>
              {folded ? `Filters${active > 0 ? ` (${active} set)` : ''} ▾` : 'Fewer ▴'}
            </button>
          )}
          <button type="submit">Apply</button>
          <button type="button" class="secondary outline" onClick={() => (setCursors([]), go('jobs'))}>Clear</button>
        </div>
      </form>
      <ErrorNote error={page.error} />
      <div class="overflow-auto">
        <table class="striped jobs-table" aria-busy={page.loading && !page.data}>
          <caption class="visually-hidden">Jobs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">State</th>
              <th scope="col">Route</th>
              <th scope="col">Attempts</th>
              <th scope="col" class="num">Cost</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => (
              <tr data-job={j.id}>
                <td>
                  <a href={`#/jobs/${encodeURIComponent(j.id)}`} class="mono" title={`Idempotency-Key ${j.idempotency_key}`}>{short(j.idempotency_key, 32)}</a>
                  <div class="muted mono small" title={j.id}>{idTail(j.id)}</div>
                </td>
                <td><StateBadge state={j.state} /></td>
                <td>{j.route}</td>
                <td>
                  {count(j.attempts.length)}
                  <span class="muted small"> {j.attempts.map((a) => a.provider).join(' → ')}</span>
                </td>
                <td class="num">{usd(j.cost_usd)}</td>
                <td title={when(j.created_at)}>{ago(j.created_at)}</td>
              </tr>
            ))}
            {jobs.length === 0 && !page.loading && (
              <tr><td colSpan={6} class="muted">No job matches these filters.</td></tr>
            )}
          </tbody>
        </table>
      </div>
      <nav class="pager" aria-label="Pages">
        <button type="button" class="secondary outline" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>← Newer</button>
        <span class="muted">page {cursors.length + 1}</span>
        <button type="button" class="secondary outline" disabled={!page.data?.next_cursor} onClick={() => page.data?.next_cursor && setCursors([...cursors, page.data.next_cursor])}>Older →</button>
      </nav>
    </section>
  );
}
