/** The shell: sign-in, navigation, live updates, and the screens by hash route. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, createApi, TOKEN_KEY, type Api } from './api.ts';
import { BatchesScreen } from './batches-screen.tsx';
import { CertificationsScreen } from './certifications-screen.tsx';
import { DoubtScreen } from './doubt-screen.tsx';
import { JobScreen } from './job-screen.tsx';
import { JobsScreen } from './jobs-screen.tsx';
import { SpendScreen } from './spend-screen.tsx';
import { ErrorNote, useRoute } from './ui.tsx';

function SignIn({ onSignedIn }: { onSignedIn: (token: string) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await createApi(token.trim()).get('/v1/jobs?limit=1');
      onSignedIn(token.trim());
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? new Error('This token is not valid for this onejob server.') : err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="container sign-in">
      <article>
        <h1>onejob</h1>
        <p>Sign in with an API token. It stays in this browser tab only (sessionStorage) and goes to this server alone.</p>
        <form onSubmit={submit}>
          <label>
            API token
            <input type="password" name="token" autoComplete="off" required value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} autoFocus />
          </label>
          <ErrorNote error={error} />
          <button type="submit" aria-busy={busy} disabled={busy || token.trim() === ''}>Sign in</button>
        </form>
      </article>
    </main>
  );
}

const NAV = [
  { path: 'jobs', label: 'Jobs' },
  { path: 'doubt', label: 'In doubt' },
  { path: 'batches', label: 'Batches' },
  { path: 'spend', label: 'Spend' },
  { path: 'certifications', label: 'Certifications' },
] as const;

function Shell({ api, onSignOut }: { api: Api; onSignOut: () => void }) {
  const route = useRoute();
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState(false);
  const [doubtCount, setDoubtCount] = useState<number | null>(null);
  const main = useRef<HTMLElement>(null);
  // Live updates: coalesce bursts of changes into one refresh.
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = api.live(
      () => {
        clearTimeout(timer);
        timer = setTimeout(() => setTick((t) => t + 1), 150);
      },
      (connected) => {
        setLive(connected);
        if (connected) setTick((t) => t + 1);
      },
    );
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [api]);
  useEffect(() => {
    api.get<{ data: unknown[] }>('/v1/doubt?limit=100').then((r) => setDoubtCount(r.data.length), () => undefined);
  }, [api, tick]);
  const section = route.path[0] ?? 'jobs';
  // After a navigation (not on first load), move focus to the new screen's heading, for keyboard and screen-reader users.
  const firstRoute = useRef(true);
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    main.current?.querySelector<HTMLElement>('h1')?.focus({ preventScroll: true });
  }, [route.path.join('/')]);
  let screen;
  if (section === 'jobs' && route.path[1]) screen = <JobScreen api={api} id={route.path[1]} tick={tick} />;
  else if (section === 'doubt') screen = <DoubtScreen api={api} tick={tick} />;
  else if (section === 'batches') screen = <BatchesScreen api={api} tick={tick} />;
  else if (section === 'spend') screen = <SpendScreen api={api} tick={tick} />;
  else if (section === 'certifications') screen = <CertificationsScreen api={api} />;
  else screen = <JobsScreen api={api} query={route.query} tick={tick} />;
  return (
    <>
      <a class="skip-link" href="#main" onClick={(e) => (e.preventDefault(), main.current?.querySelector<HTMLElement>('h1')?.focus())}>Skip to content</a>
      <header class="container app-header">
        <nav aria-label="Main">
          <ul>
            <li><strong class="brand">onejob</strong></li>
          </ul>
          <ul class="nav-links">
            {NAV.map((n) => (
              <li>
                <a href={`#/${n.path}`} aria-current={section === n.path ? 'page' : undefined}>
                  {n.label}
                  {n.path === 'doubt' && doubtCount !== null && doubtCount > 0 && <span class="count-pill" aria-label={`${doubtCount} in doubt`}>{doubtCount}</span>}
                </a>
              </li>
            ))}
            <li>
              <span class={`live ${live ? 'is-live' : ''}`} role="status" aria-live="polite">{live ? '● live' : '○ reconnecting'}</span>
            </li>
            <li><button type="button" class="secondary outline small-button" onClick={onSignOut}>Sign out</button></li>
          </ul>
        </nav>
      </header>
      <main id="main" class="container" ref={main}>{screen}</main>
    </>
  );
}

export function App() {
  const [token, setToken] = useState<string | null>(() => sessionStorage.getItem(TOKEN_KEY));
  const [api, setApi] = useState<Api | null>(() => (token ? createApi(token) : null));
  const signIn = (t: string) => {
    sessionStorage.setItem(TOKEN_KEY, t);
    setToken(t);
    setApi(createApi(t));
  };
  const signOut = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken(null);
    setApi(null);
  };
  if (!token || !api) return <SignIn onSignedIn={signIn} />;
  return <Shell api={api} onSignOut={signOut} />;
}
