/**
 * One job: its attempts on a timeline (start → end on one time axis; the
 * winner marked, superseded greyed, unknown flagged), skipped providers with
 * their reason, usage and cost per attempt, the event log, and the actions
 * (resolve an attempt in doubt, cancel the job).
 */
import type { Api, Attempt, Job, JobEvent } from './api.ts';
import { count, duration, usd, when } from './format.ts';
import { ResolveActions, CancelAction } from './actions.tsx';
import { ErrorNote, StateBadge, useLoad } from './ui.tsx';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** How the stored `resolved_by` reads (CONTRACT §11). */
const RESOLVED_BY: Record<string, string> = {
  operator: 'a person (operator)',
  lookup: 'asking the provider (lookup)',
  callback: "the provider's callback",
  policy: 'the settle policy',
  late_answer: 'its late answer',
};

/** Who ended an attempt's doubt and why: `resolved_by` as stored, and the reason on its event (a person's words), if any. */
function resolutionOf(a: Attempt, events: readonly JobEvent[]): { by: string; reason: string | null } | null {
  if (!a.resolved_by) return null;
  const e = events.find((x) => x.attempt_id === a.id && x.data.resolved_by === a.resolved_by);
  return { by: a.resolved_by, reason: typeof e?.data.reason === 'string' ? e.data.reason : null };
}

/** "resolved by …" with the reason, where the attempt's doubt was ended by someone or something other than its own answer. */
function Resolution({ attempt, events }: { attempt: Attempt; events: readonly JobEvent[] }) {
  const r = resolutionOf(attempt, events);
  if (!r) return null;
  return (
    <span class="small resolution" data-resolved-by={r.by}>
      resolved by <span title={RESOLVED_BY[r.by] ?? r.by}>{r.by.replace('_', ' ')}</span>
      {r.reason !== null && <>: <span class="reason">“{r.reason}”</span></>}
    </span>
  );
}

/**
 * The attempts on one time axis, from the first start to the last end (or now, for attempts still open). The
 * deadline an attempt had is a red tick, and the time it spent in doubt (from `unknown_at` to its end, or now) is
 * hatched amber over its bar.
 */
export function Timeline({ job, now, events = [] }: { job: Job; now: number; events?: readonly JobEvent[] }) {
  const attempts = job.attempts;
  if (attempts.length === 0) return <p class="muted">No attempt yet.</p>;
  const start = Math.min(...attempts.map((a) => new Date(a.started_at).getTime()));
  const endOf = (a: Attempt) => (a.finished_at ? new Date(a.finished_at).getTime() : now);
  // The deadline in force of an open attempt is drawn even ahead of now; a retry that waits starts ahead of now too.
  const deadlineOf = (a: Attempt) => (a.deadline_at ? new Date(a.deadline_at).getTime() : null);
  const ahead = attempts.flatMap((a) => (a.finished_at ? [] : [new Date(a.started_at).getTime(), deadlineOf(a) ?? now]));
  const end = Math.max(start + 1, ...attempts.map(endOf), ...ahead);
  const span = end - start;
  const ticks = [0, 0.25, 0.5, 0.75, 1];
  return (
    <figure class="timeline" aria-label="Attempts on a timeline">
      <ol class="timeline-rows">
        {attempts.map((a) => {
          const from = new Date(a.started_at).getTime();
          const to = Math.max(from, endOf(a));
          const deadline = deadlineOf(a);
          const waiting = a.state === 'starting' && from > now;
          const winner = job.completed_by === a.id;
          const left = ((from - start) / span) * 100;
          const width = Math.max(0.8, ((to - from) / span) * 100);
          const open = !a.finished_at;
          const doubtFrom = a.unknown_at ? Math.min(to, Math.max(from, new Date(a.unknown_at).getTime())) : null;
          return (
            <li class={`timeline-row${winner ? ' is-winner' : ''}`} data-attempt={a.id} data-state={a.state}>
              <span class="timeline-label">
                #{a.number} {a.provider} <span class="muted small">{a.kind}</span>
              </span>
              <span class="timeline-track">
                <span
                  class={`timeline-bar bar-${a.state}${open ? ' is-open' : ''}`}
                  style={{ left: `${left}%`, width: `${width}%` }}
                  title={`${a.provider}: ${a.state}, ${duration(to - from)}${open ? ' so far' : ''}`}
                />
                {doubtFrom !== null && (
                  <span
                    class="timeline-doubt"
                    style={{ left: `${((doubtFrom - start) / span) * 100}%`, width: `${Math.max(0.5, ((to - doubtFrom) / span) * 100)}%` }}
                    title={`in doubt ${duration(to - doubtFrom)}${open ? ' so far' : ''}`}
                  />
                )}
                {(open || doubtFrom !== null) && deadline !== null && deadline >= start && deadline <= end && (
                  <span
                    class="timeline-deadline"
                    style={{ left: `${((deadline - start) / span) * 100}%` }}
                    title={`${open ? 'deadline in force' : 'deadline'}: ${when(new Date(deadline).toISOString())}`}
                  />
                )}
              </span>
              <span class="timeline-note">
                {winner && <strong class="winner-mark">★ winner</strong>}
                {a.state === 'superseded' && <span class="muted">superseded: payload discarded</span>}
                {a.state === 'unknown' && <strong class="doubt-mark">⚠ in doubt</strong>}
                {!winner && a.state !== 'superseded' && a.state !== 'unknown' && <StateBadge state={a.state} />}
                {waiting ? (
                  <span class="muted small"> retry due in {duration(from - now)}</span>
                ) : (
                  <span class="muted small"> {duration(to - from)}{open ? '…' : ''}</span>
                )}
                {open && a.state === 'running' && deadline === null && <span class="muted small" title="a stream whose output flows has no deadline; a silence of idleTimeoutMs between its events ends it"> · streaming, no deadline</span>}
                {doubtFrom !== null && <span class="small doubt-time" data-testid={`doubt-time-${a.id}`}> · in doubt {duration(to - doubtFrom)}{open ? '…' : ''}</span>}
                {a.resolved_by && <> <Resolution attempt={a} events={events} /></>}
              </span>
            </li>
          );
        })}
      </ol>
      <div class="timeline-axis" aria-hidden="true">
        {ticks.map((t) => (
          <span style={{ left: `${t * 100}%` }}>+{duration(t * span)}</span>
        ))}
      </div>
      <figcaption class="muted small">
        From {when(new Date(start).toISOString())}; bars run from each attempt's start to its end{attempts.some((a) => !a.finished_at) ? ' (open bars: still running or in doubt, drawn to now)' : ''}{attempts.some((a) => a.deadline_at && (!a.finished_at || a.unknown_at)) ? '; a red tick marks an attempt\'s deadline' : ''}{attempts.some((a) => a.unknown_at) ? '; amber hatching, the time it spent in doubt' : ''}.
      </figcaption>
    </figure>
  );
}

/**
 * An event's `reason`: a person's words in quotes; an error (`{code, message}`, what an attempt
 * becoming unknown or failed records) as its code and message, like the attempts table shows one.
 */
function Reason({ reason }: { reason: unknown }) {
  if (typeof reason === 'string') return <span class="reason">“{reason}” </span>;
  const r = reason as { code?: unknown; message?: unknown } | null;
  if (r !== null && typeof r === 'object' && typeof r.code === 'string') {
    return <span class="event-error"><span class="mono">{r.code}</span>{typeof r.message === 'string' && <span class="muted"> {r.message}</span>} </span>;
  }
  return <code class="event-data">{JSON.stringify(reason)} </code>;
}

function EventLog({ events, attempts }: { events: JobEvent[]; attempts: Attempt[] }) {
  const numberOf = new Map(attempts.map((a) => [a.id, `#${a.number} ${a.provider}`]));
  return (
    <div class="overflow-auto">
      <table class="events-table">
        <caption class="visually-hidden">Event log, oldest first</caption>
        <thead>
          <tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Attempt</th><th scope="col">Details</th></tr>
        </thead>
        <tbody>
          {events.map((e) => {
            const { reason, actor, resolved_by: resolvedBy, error, ...rest } = e.data as { reason?: unknown; actor?: unknown; resolved_by?: unknown; error?: unknown };
            return (
              <tr data-event={e.type}>
                <td class="nowrap small">{when(e.at)}</td>
                <td class="mono small">{e.type}</td>
                <td class="small nowrap" title={e.attempt_id ?? ''}>{e.attempt_id ? (numberOf.get(e.attempt_id) ?? e.attempt_id) : ''}</td>
                <td class="small">
                  {actor !== undefined && actor !== null && <span class="muted">by {String(actor)} </span>}
                  {typeof resolvedBy === 'string' && <span class="muted">(resolved by {resolvedBy.replace('_', ' ')}) </span>}
                  {reason !== undefined && <Reason reason={reason} />}
                  {error !== undefined && <Reason reason={error} />}
                  {Object.keys(rest).length > 0 && <code class="event-data">{JSON.stringify(rest)}</code>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function JobScreen({ api, id, tick }: { api: Api; id: string; tick: number }) {
  const job = useLoad((signal) => api.get<Job>(`/v1/jobs/${encodeURIComponent(id)}`, signal), [id, tick]);
  const events = useLoad((signal) => api.get<{ data: JobEvent[] }>(`/v1/jobs/${encodeURIComponent(id)}/events`, signal), [id, tick]);
  const j = job.data;
  if (!j) return <section><h1 tabIndex={-1}>Job</h1><ErrorNote error={job.error} />{job.loading && <p aria-busy="true">Loading…</p>}</section>;
  const now = Date.now();
  const lost = j.attempts.filter((a) => a.id !== j.completed_by).reduce((s, a) => s + (a.cost_usd ?? 0), 0);
  // A tool call through /mcp (CONTRACT §14): its arguments and result shown open.
  const toolCall = j.route.startsWith('mcp:');
  return (
    <section aria-labelledby="job-title" data-job-state={j.state}>
      <p><a href="#/jobs">← Jobs</a></p>
      <h1 id="job-title" tabIndex={-1} class="mono job-title">{j.id}</h1>
      <div class="job-summary">
        <dl>
          <div><dt>State</dt><dd><StateBadge state={j.state} /></dd></div>
          <div><dt>Route</dt><dd>{j.route}</dd></div>
          <div><dt>Idempotency-Key</dt><dd class="mono">{j.idempotency_key}</dd></div>
          <div><dt>Created</dt><dd>{when(j.created_at)}</dd></div>
          <div><dt>Cost</dt><dd data-testid="job-cost">{usd(j.cost_usd)}{lost > 0 && <span class="muted small"> ({usd(lost)} on attempts that did not win)</span>}</dd></div>
        </dl>
        {!TERMINAL.has(j.state) && <div class="job-actions"><CancelAction api={api} job={j} /></div>}
      </div>
      <ErrorNote error={job.error} />

      <h2>Attempts</h2>
      <Timeline job={j} now={now} events={events.data?.data ?? []} />
      {j.skipped.length > 0 && (
        <div class="skipped">
          <h3>Skipped providers</h3>
          <ul>
            {j.skipped.map((s) => <li><strong>{s.provider}</strong>: <span class="mono">{s.reason}</span></li>)}
          </ul>
        </div>
      )}
      <div class="overflow-auto">
        <table class="attempts-table">
          <caption class="visually-hidden">Attempts with usage and cost</caption>
          <thead>
            <tr>
              <th scope="col">#</th><th scope="col">Provider</th><th scope="col">State</th>
              <th scope="col" class="num">Prompt</th><th scope="col" class="num">Completion</th><th scope="col" class="num">Cost</th>
              <th scope="col">Error</th><th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {j.attempts.map((a) => (
              <tr data-attempt={a.id} data-state={a.state}>
                <td class="nowrap">{a.number}{j.completed_by === a.id && <span title="winner" aria-label="winner"> ★</span>}</td>
                <td>
                  {a.provider} <span class="muted small">{a.kind}</span>
                  {a.provider_request_id && <div class="mono small muted" title="the provider's id of the request">{a.provider_request_id}</div>}
                </td>
                <td>
                  <StateBadge state={a.state} />
                  {a.resolved_by && <div><Resolution attempt={a} events={events.data?.data ?? []} /></div>}
                  {a.state === 'unknown' && a.next_check_at && <div class="small muted">next check {new Date(a.next_check_at).toLocaleTimeString()}</div>}
                </td>
                <td class="num">{count(a.usage?.prompt_tokens)}</td>
                <td class="num">{count(a.usage?.completion_tokens)}</td>
                <td class="num">{usd(a.cost_usd)}</td>
                <td class="small">{a.error ? <><span class="mono">{a.error.code}</span> <span class="muted">{a.error.message}</span></> : ''}</td>
                <td>{a.state === 'unknown' && <ResolveActions api={api} attempt={a} />}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {j.result !== null && (
        <details open={toolCall}>
          <summary>{toolCall ? 'Tool result' : 'Result'}</summary>
          <pre class="json-block" data-testid="job-result">{JSON.stringify(j.result, null, 2)}</pre>
        </details>
      )}
      <details open={toolCall}>
        <summary>{toolCall ? `Tool call ${j.route.slice(4)}: arguments` : 'Input'}</summary>
        <pre class="json-block">{JSON.stringify(toolCall ? (j.input as { arguments?: unknown } | null)?.arguments ?? {} : j.input, null, 2)}</pre>
      </details>

      <h2>Event log</h2>
      <ErrorNote error={events.error} />
      <EventLog events={events.data?.data ?? []} attempts={j.attempts} />
    </section>
  );
}
