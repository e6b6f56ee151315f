/**
 * The owner's limits on the Spend page (CONTRACT §16, `GET /v1/limits`):
 * each spend window as a bar against its limit, what is spent in one shade
 * and what is reserved (attempts not yet settled) in another; concurrency and
 * requests per minute against theirs; and the refusals this server answered.
 */
import type { Api } from './api.ts';
import { count, usd } from './format.ts';
import { ErrorNote, useLoad } from './ui.tsx';

interface Window { limit: number | null; spent: number; reserved: number; resets_at: string }
interface Limits {
  spend_usd: { day: Window; month: Window };
  concurrency: { limit: number | null; in_use: number };
  requests_per_minute: { limit: number | null; used: number };
  refusals?: Record<string, number>;
}

const pct = (v: number, of: number) => `${Math.min(100, of > 0 ? (v / of) * 100 : 0).toFixed(2)}%`;

function WindowBar({ name, w }: { name: string; w: Window }) {
  // Unlimited: the bar is scaled to what was used, so spent and reserved still read against each other.
  const scale = w.limit ?? Math.max(w.spent + w.reserved, 1e-6);
  const label = `${name}: ${usd(w.spent)} spent and ${usd(w.reserved)} reserved of ${w.limit === null ? 'no limit' : usd(w.limit)}; resets ${new Date(w.resets_at).toLocaleString()}`;
  return (
    <div class="limit-row" data-window={name}>
      <div class="limit-label"><strong>{name}</strong> <span class="muted">{w.limit === null ? 'unlimited' : `limit ${usd(w.limit)}`}</span></div>
      <div class="limit-bar" role="img" aria-label={label}>
        <span class="limit-spent" style={{ width: pct(w.spent, scale) }} />
        <span class="limit-reserved" style={{ width: pct(w.reserved, scale) }} />
      </div>
      <div class="limit-figures">
        <span data-testid={`limit-${name}-spent`}>{usd(w.spent)} spent</span> · <span data-testid={`limit-${name}-reserved`}>{usd(w.reserved)} reserved</span>
        <span class="muted"> · resets {new Date(w.resets_at).toLocaleString()}</span>
      </div>
    </div>
  );
}

export function LimitsPanel({ api, tick }: { api: Api; tick: number }) {
  const res = useLoad((signal) => api.get<Limits>('/v1/limits', signal), [tick]);
  const l = res.data;
  return (
    <section class="limits" aria-labelledby="limits-title">
      <h2 id="limits-title">Limits</h2>
      <ErrorNote error={res.error} />
      {l && (
        <>
          <WindowBar name="day" w={l.spend_usd.day} />
          <WindowBar name="month" w={l.spend_usd.month} />
          <p class="limit-legend"><span class="swatch limit-spent" /> spent <span class="swatch limit-reserved" /> reserved (attempts not yet settled)</p>
          <p>
            Concurrency <strong data-testid="limit-concurrency">{count(l.concurrency.in_use)}</strong> of {l.concurrency.limit === null ? 'unlimited' : count(l.concurrency.limit)}
            {' · '}Requests in the last minute <strong>{count(l.requests_per_minute.used)}</strong> of {l.requests_per_minute.limit === null ? 'unlimited' : count(l.requests_per_minute.limit)}
          </p>
          <p data-testid="limit-refusals">
            Refused by this server since it started:{' '}
            {['budget_exceeded', 'concurrency_limited', 'rate_limited'].map((code, i) => (
              <span>{i > 0 ? ', ' : ''}{code} <strong>{count(l.refusals?.[code] ?? 0)}</strong></span>
            ))}
          </p>
        </>
      )}
    </section>
  );
}
