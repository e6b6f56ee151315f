/**
 * Spend per route and provider over time, with the share that went to
 * attempts that did not win (superseded hedges, timed-out calls that ran
 * anyway, failed and cancelled attempts that were billed).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Api, UsageRow } from './api.ts';
import { count, share, usd } from './format.ts';
import { ErrorNote, useLoad } from './ui.tsx';
import { LimitsPanel } from './limits-panel.tsx';

const RANGES = [
  { id: '1h', label: 'Last hour', ms: 3_600_000, bucket: 300 },
  { id: '24h', label: 'Last 24 hours', ms: 86_400_000, bucket: 3600 },
  { id: '7d', label: 'Last 7 days', ms: 7 * 86_400_000, bucket: 6 * 3600 },
  { id: '30d', label: 'Last 30 days', ms: 30 * 86_400_000, bucket: 86_400 },
] as const;

function SpendChart({ rows, since, until, bucket }: { rows: UsageRow[]; since: number; until: number; bucket: number }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!el.current) return;
    const step = bucket * 1000;
    const first = Math.floor(since / step) * step;
    const xs: number[] = [];
    for (let t = first; t < until; t += step) xs.push(t / 1000);
    const won = xs.map(() => 0);
    const lost = xs.map(() => 0);
    for (const r of rows) {
      const i = Math.floor((new Date(r.period_start ?? since).getTime() - first) / step);
      if (i < 0 || i >= xs.length) continue;
      if (r.outcome === 'succeeded') won[i] = (won[i] ?? 0) + (r.cost_usd ?? 0);
      else lost[i] = (lost[i] ?? 0) + (r.cost_usd ?? 0);
    }
    const total = won.map((w, i) => w + (lost[i] ?? 0));
    const width = el.current.clientWidth || 600;
    const bars = uPlot.paths.bars!({ size: [0.7, 60] });
    const plot = new uPlot(
      {
        width,
        height: 240,
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 0.001] } },
        // Wide enough for a small amount to the micro-dollar ("$0.00015"), so that the labels are not cut at the left.
        axes: [{}, { values: (_u, vals) => vals.map((v) => usd(v)), size: 84 }],
        series: [
          {},
          { label: 'all attempts', stroke: '#1d4ed8', fill: 'rgba(29,78,216,0.35)', paths: bars, value: (_u, v) => usd(v) },
          { label: 'did not win', stroke: '#c2410c', fill: 'rgba(194,65,12,0.75)', paths: bars, value: (_u, v) => usd(v) },
        ],
      },
      [xs, total, lost],
      el.current,
    );
    const onResize = () => el.current && plot.setSize({ width: el.current.clientWidth, height: 240 });
    addEventListener('resize', onResize);
    return () => {
      removeEventListener('resize', onResize);
      plot.destroy();
    };
  }, [rows, since, until, bucket]);
  return <div ref={el} class="spend-chart" role="img" aria-label="Spend per period: all attempts, and the part on attempts that did not win" />;
}

interface Group {
  route: string;
  provider: string;
  attempts: number;
  tokens: number;
  cost: number;
  lost: number;
  priced: boolean;
}

export function SpendScreen({ api, tick }: { api: Api; tick: number }) {
  const [rangeId, setRangeId] = useState<(typeof RANGES)[number]['id']>('1h');
  const range = RANGES.find((r) => r.id === rangeId)!;
  const [until, setUntil] = useState(() => Date.now());
  useEffect(() => setUntil(Date.now()), [tick, rangeId]);
  const since = until - range.ms;
  const res = useLoad(
    (signal) => api.get<{ data: UsageRow[] }>(`/v1/usage?since=${new Date(since).toISOString()}&until=${new Date(until + 1).toISOString()}&bucket_seconds=${range.bucket}`, signal),
    [since, until, range.bucket],
  );
  const rows = res.data?.data ?? [];
  const groups = new Map<string, Group>();
  for (const r of rows) {
    const k = `${r.route}\u0000${r.provider}`;
    const g = groups.get(k) ?? { route: r.route, provider: r.provider, attempts: 0, tokens: 0, cost: 0, lost: 0, priced: false };
    g.attempts += r.attempts;
    g.tokens += r.prompt_tokens + r.completion_tokens;
    if (r.cost_usd !== null) {
      g.priced = true;
      g.cost += r.cost_usd;
      if (r.outcome !== 'succeeded') g.lost += r.cost_usd;
    }
    groups.set(k, g);
  }
  const list = [...groups.values()].sort((a, b) => b.cost - a.cost);
  // Sums of micro-dollar values: rounded back to the micro-dollar for display.
  const micro = (v: number) => Math.round(v * 1e6) / 1e6;
  const total = micro(list.reduce((s, g) => s + g.cost, 0));
  const lost = micro(list.reduce((s, g) => s + g.lost, 0));
  return (
    <section aria-labelledby="spend-title">
      <h1 id="spend-title" tabIndex={-1}>Spend</h1>
      <LimitsPanel api={api} tick={tick} />
      <div class="spend-head">
        <label>
          Period
          <select value={rangeId} onChange={(e) => setRangeId((e.target as HTMLSelectElement).value as typeof rangeId)}>
            {RANGES.map((r) => <option value={r.id}>{r.label}</option>)}
          </select>
        </label>
        <div class="spend-totals" aria-live="polite">
          <div><span class="muted">Total</span> <strong data-testid="spend-total">{usd(total)}</strong></div>
          <div><span class="muted">On attempts that did not win</span> <strong data-testid="spend-lost">{usd(lost)}</strong> <span class="muted">({share(lost, total)})</span></div>
        </div>
      </div>
      <ErrorNote error={res.error} />
      <SpendChart rows={rows} since={since} until={until} bucket={range.bucket} />
      <div class="overflow-auto">
        <table class="spend-table">
          <caption class="visually-hidden">Spend per route and provider</caption>
          <thead>
            <tr>
              <th scope="col">Route</th><th scope="col">Provider</th><th scope="col" class="num">Attempts</th><th scope="col" class="num">Tokens</th>
              <th scope="col" class="num">Cost</th><th scope="col" class="num">Did not win</th><th scope="col" class="num">Share</th>
            </tr>
          </thead>
          <tbody>
            {list.map((g) => (
              <tr data-route={g.route} data-provider={g.provider}>
                <td>{g.route}</td><td>{g.provider}</td><td class="num">{count(g.attempts)}</td><td class="num">{count(g.tokens)}</td>
                <td class="num">{g.priced ? usd(micro(g.cost)) : '— (no pricing)'}</td><td class="num">{g.priced ? usd(micro(g.lost)) : '—'}</td>
                <td class="num">{share(g.lost, g.cost)}</td>
              </tr>
            ))}
            {list.length === 0 && !res.loading && <tr><td colSpan={7} class="muted">No attempt in this period.</td></tr>}
          </tbody>
        </table>
      </div>
    </section>
  );
}
