/**
 * Batches (CONTRACT §17): the owner's batches, newest first, with their
 * progress (lines answered, failed, still to come) and what they cost; a
 * batch's lines are its jobs, listed by the Jobs screen (key prefix
 * `batch:<id>:`), each linking to its job.
 */
import type { Api } from './api.ts';
import { count, usd, when } from './format.ts';
import { ErrorNote, StateBadge, useLoad } from './ui.tsx';

/** The Batch object as `GET /v1/batches` answers it (what this screen reads). */
export interface Batch {
  id: string;
  status: string;
  endpoint: string;
  created_at: number;
  completed_at: number | null;
  request_counts: { total: number; completed: number; failed: number };
  output_file_id: string | null;
  error_file_id: string | null;
  metadata: Record<string, string> | null;
  onejob?: { cost_usd: number | null; lines_created: number };
}

const iso = (secs: number | null): string | null => (secs === null ? null : new Date(secs * 1000).toISOString());

function Progress({ b }: { b: Batch }) {
  const { total, completed, failed } = b.request_counts;
  const done = completed + failed;
  return (
    <div class="batch-progress">
      <progress value={done} max={Math.max(1, total)} aria-label={`${done} of ${total} lines answered`} />
      <small>
        {count(completed)} answered · {count(failed)} failed · {count(total - done)} to come
      </small>
    </div>
  );
}

export function BatchesScreen({ api, tick }: { api: Api; tick: number }) {
  const { data, error, loading } = useLoad((signal) => api.get<{ data: Batch[]; has_more: boolean }>('/v1/batches?limit=100', signal), [api, tick]);
  return (
    <section>
      <h1 tabIndex={-1}>Batches</h1>
      <p>Every line of a batch is a job of its own, run once behind interactive work. A line in doubt holds its batch in progress until it is resolved.</p>
      <ErrorNote error={error} />
      {data && data.data.length === 0 && <p>No batches yet: upload a JSONL file with <code>POST /v1/files</code> and create one with <code>POST /v1/batches</code>.</p>}
      {data && data.data.length > 0 && (
        <table class="batches">
          <thead>
            <tr>
              <th scope="col">Batch</th>
              <th scope="col">Status</th>
              <th scope="col">Progress</th>
              <th scope="col">Cost</th>
              <th scope="col">Created</th>
              <th scope="col">Files</th>
            </tr>
          </thead>
          <tbody>
            {data.data.map((b) => (
              <tr key={b.id}>
                <td>
                  <a href={`#/jobs?q=${encodeURIComponent(`batch:${b.id}:`)}`} title="This batch's lines, each a job">
                    <code>{b.id}</code>
                  </a>
                  <br />
                  <small>{b.endpoint}</small>
                </td>
                <td><StateBadge state={b.status} /></td>
                <td><Progress b={b} /></td>
                <td>{usd(b.onejob?.cost_usd ?? null)}</td>
                <td>{when(iso(b.created_at))}</td>
                <td>
                  {/* The content needs the token: GET /v1/files/{id}/content with it (the SDK's files.content). */}
                  {b.output_file_id && <small>output <code>{b.output_file_id}</code></small>}
                  {b.output_file_id && b.error_file_id && <br />}
                  {b.error_file_id && <small>errors <code>{b.error_file_id}</code></small>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {loading && !data && <p aria-busy="true">Loading…</p>}
    </section>
  );
}
