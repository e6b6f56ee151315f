/**
 * Human output of the command line: small aligned tables and job summaries.
 * `--json` prints the same bodies as the HTTP API instead.
 */
import type { AttemptBody, JobBody } from '../http/api-bodies.ts';

/** Left-aligned columns separated by two spaces. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  return [line(headers), ...rows.map(line)].join('\n');
}

/** One job, readable. */
export function describeJob(job: JobBody): string {
  const lines = [
    `job        ${job.id}`,
    `state      ${job.state} (version ${job.version})`,
    `route      ${job.route} → ${job.providers.join(', ')}`,
    `key        ${job.idempotency_key}`,
    `created    ${job.created_at}`,
    `updated    ${job.updated_at}`,
    `input      ${JSON.stringify(job.input)}`,
  ];
  if (job.metadata !== null) lines.push(`metadata   ${JSON.stringify(job.metadata)}`);
  if (job.completed_by !== null) lines.push(`winner     ${job.completed_by}`);
  if (job.state === 'succeeded') lines.push(`result     ${JSON.stringify(job.result)}`);
  if (job.error !== null) lines.push(`error      ${job.error.code}: ${job.error.message}`);
  for (const s of job.skipped) lines.push(`skipped    ${s.provider} (${s.reason})`);
  lines.push('', job.attempts.length === 0 ? 'no attempts yet' : attemptTable(job.attempts));
  return lines.join('\n');
}

/** Attempts as a table. */
export function attemptTable(attempts: readonly AttemptBody[]): string {
  return table(
    ['#', 'ATTEMPT', 'PROVIDER', 'KIND', 'STATE', 'STARTED', 'FINISHED', 'ERROR'],
    attempts.map((a) => [
      String(a.number), a.id, a.provider, a.kind, a.state, a.started_at, a.finished_at ?? '-', a.error ? `${a.error.code}: ${a.error.message}` : '-',
    ]),
  );
}
