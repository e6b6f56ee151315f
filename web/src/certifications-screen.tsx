/** Certifications: route × provider with pass/fail, model, contract fingerprint, when, and the report. */
import type { Api, Certification } from './api.ts';
import { when } from './format.ts';
import { ErrorNote, useLoad } from './ui.tsx';

const LABEL: Record<Certification['status'], string> = {
  passed: '✔ passed',
  failed: '✖ failed',
  void: '↷ void',
  not_certified: '— not certified',
  not_required: 'no contract',
};

export function CertificationsScreen({ api }: { api: Api }) {
  const res = useLoad((signal) => api.get<{ data: Certification[] }>('/v1/certifications', signal), []);
  const rows = res.data?.data ?? [];
  return (
    <section aria-labelledby="cert-title">
      <h1 id="cert-title" tabIndex={-1}>Certifications</h1>
      <p class="muted">
        Failover and hedges only go to a provider that passed the route's contract with its current model (<code>onejob verify</code>).
      </p>
      <ErrorNote error={res.error} />
      <div class="overflow-auto">
        <table class="cert-table">
          <caption class="visually-hidden">Route by provider</caption>
          <thead>
            <tr>
              <th scope="col">Route</th><th scope="col">Provider</th><th scope="col">Status</th><th scope="col">Model</th>
              <th scope="col">Contract</th><th scope="col">Verified</th><th scope="col">Report</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((c) => (
              <tr data-route={c.route} data-provider={c.provider} data-status={c.status}>
                <td>{c.route}</td>
                <td>{c.provider}</td>
                <td>
                  <span class={`badge cert-${c.status}`}>{LABEL[c.status]}</span>
                  {!c.eligible && c.reason && <div class="muted small mono">{c.reason}</div>}
                </td>
                <td class="mono small">{c.model}{c.certification && c.certification.model !== c.model && <div class="muted">verified: {c.certification.model}</div>}</td>
                <td class="mono small" title={c.contract_fingerprint ?? ''}>
                  {c.contract ?? '—'}
                  {c.contract_fingerprint && <div class="muted">{c.contract_fingerprint.slice(0, 19)}…</div>}
                </td>
                <td class="small nowrap">{when(c.certification?.verified_at)}</td>
                <td>
                  {c.certification ? (
                    <details>
                      <summary>report</summary>
                      <pre class="small">{JSON.stringify(c.certification.report, null, 2)}</pre>
                    </details>
                  ) : '—'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
