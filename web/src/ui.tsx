/** Small shared pieces: state badges, errors, the confirm-with-a-reason dialog, the route hook. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/** A state as a coloured, labelled badge (the colour never carries the meaning alone). */
export function StateBadge({ state }: { state: string }) {
  const icon: Record<string, string> = { succeeded: '✔', failed: '✖', cancelled: '⊘', unknown: '⚠', superseded: '↷', running: '▶', starting: '…', queued: '…' };
  return (
    <span class={`badge state-${state}`} data-state={state}>
      <span aria-hidden="true">{icon[state] ?? '•'}</span> {state}
    </span>
  );
}

/** An error from the API, readable. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const text = error instanceof ApiError ? `${error.message} (${error.code})` : error instanceof Error ? error.message : String(error);
  return (
    <p role="alert" class="error-note">
      {text}
    </p>
  );
}

/** The current hash route: `#/jobs/job_1?x=y` → { path: ['jobs', 'job_1'], query }. */
export function useRoute(): { path: string[]; query: URLSearchParams } {
  const read = () => {
    const hash = location.hash.replace(/^#\/?/, '');
    const [p = '', q = ''] = hash.split('?');
    return { path: p.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q) };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** Navigates to a hash route. */
export function go(path: string, query?: Record<string, string | undefined>): void {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  location.hash = `#/${path}${s ? `?${s}` : ''}`;
}

/** Data loaded by `load`, reloaded when `deps` change. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): { data: T | null; error: unknown; loading: boolean } {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean }>({ data: null, error: null, loading: true });
  useEffect(() => {
    const abort = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(abort.signal).then(
      (data) => !abort.signal.aborted && setState({ data, error: null, loading: false }),
      (error: unknown) => !abort.signal.aborted && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => abort.abort();
  }, deps);
  return state;
}

/** What a confirmed action receives. */
export interface Confirmed {
  reason: string;
  /** For a resolve as succeeded: the result JSON, parsed. */
  result?: unknown;
}

/**
 * A button that opens a modal dialog (native `<dialog>`: focus is trapped,
 * Escape closes it) asking for a reason, which is kept in the event log, and
 * an explicit confirmation before `onConfirm` runs.
 */
export function ConfirmAction(props: {
  label: string;
  title: string;
  confirmLabel: string;
  description: ComponentChildren;
  /** Ask for the result JSON (resolve as succeeded). */
  askResult?: boolean;
  danger?: boolean;
  onConfirm: (c: Confirmed) => Promise<unknown>;
  testId?: string;
  /** The button cannot be pressed (e.g. nothing selected). */
  disabled?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [reason, setReason] = useState('');
  const [result, setResult] = useState('{\n  "content": ""\n}');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const open = () => {
    setReason('');
    setError(null);
    ref.current?.showModal();
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    let parsed: unknown;
    if (props.askResult) {
      try {
        parsed = JSON.parse(result);
      } catch {
        setError(new Error('the result must be valid JSON'));
        return;
      }
    }
    setBusy(true);
    try {
      await props.onConfirm({ reason: reason.trim(), result: parsed });
      ref.current?.close();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const id = `dlg-${props.testId ?? props.label.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <>
      <button type="button" class={props.danger ? 'secondary outline' : 'outline'} onClick={open} data-testid={props.testId} disabled={props.disabled}>
        {props.label}
      </button>
      <dialog ref={ref} aria-labelledby={`${id}-title`}>
        <article>
          <form onSubmit={submit}>
            <header>
              <h2 id={`${id}-title`} class="dialog-title">{props.title}</h2>
            </header>
            <div>{props.description}</div>
            {props.askResult && (
              <label>
                Result (JSON, becomes the job's result exactly as given)
                <textarea name="result" rows={4} value={result} onInput={(e) => setResult((e.target as HTMLTextAreaElement).value)} />
              </label>
            )}
            <label>
              Reason (kept in the event log)
              <input name="reason" required minLength={3} maxLength={2000} value={reason} autoFocus placeholder="e.g. the provider's status page says it never ran"
                onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
            </label>
            <ErrorNote error={error} />
            <footer>
              <button type="button" class="secondary" onClick={() => ref.current?.close()}>
                Keep as is
              </button>
              <button type="submit" aria-busy={busy} disabled={busy || reason.trim().length < 3} class={props.danger ? 'danger' : ''}>
                {props.confirmLabel}
              </button>
            </footer>
          </form>
        </article>
      </dialog>
    </>
  );
}
