/** Formatting helpers shared by the screens. */

/** USD with as many decimals as a small amount needs (micro-dollars are exact). */
export function usd(v: number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  if (v === 0) return '$0';
  // Costs are whole micro-dollars: six decimals at most, trailing zeros dropped, at least two.
  const text = v.toFixed(6).replace(/0+$/, '');
  const [whole = '0', frac = ''] = text.split('.');
  return `$${whole}.${frac.padEnd(2, '0')}`;
}

/** A whole number with thousands separators. */
export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : n.toLocaleString('en-US');
}

/** A local date and time, to the second. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString('en-GB', { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** How long ago, coarse ("12 s ago", "3 min ago"). */
export function ago(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}

/** How long until, coarse ("in 12 s", "in 3 min"); "due now" once it has passed. */
export function until(iso: string, now = Date.now()): string {
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  if (s <= 0) return 'due now';
  if (s < 60) return `in ${s} s`;
  if (s < 3600) return `in ${Math.round(s / 60)} min`;
  if (s < 86_400) return `in ${Math.round(s / 3600)} h`;
  return `in ${Math.round(s / 86_400)} d`;
}

/** A duration in ms, readable. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** The first characters of a text, for tight cells. */
export function short(id: string, n = 14): string {
  return id.length <= n ? id : `${id.slice(0, n)}…`;
}

/** An id's distinguishing end (onejob ids start with a timestamp, so their heads look alike): `job_…3b175a974146`. */
export function idTail(id: string, n = 12): string {
  const cut = id.indexOf('_');
  const prefix = cut > 0 ? id.slice(0, cut + 1) : '';
  return id.length <= prefix.length + n ? id : `${prefix}…${id.slice(-n)}`;
}

/** A percentage of `part` in `whole`, or "—". */
export function share(part: number, whole: number): string {
  if (whole <= 0) return '—';
  return `${((part / whole) * 100).toFixed(1)}%`;
}
