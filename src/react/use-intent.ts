/**
 * `useIntent()` (CONTRACT §10): one Idempotency-Key per user intent, held
 * across double clicks, retries and page reloads (`sessionStorage`), let go
 * when the job is terminal or on `reset()`. A thin hook over
 * {@link IntentSession} from `onejob/client`.
 */
import { useEffect, useMemo, useState, useSyncExternalStore } from 'react';
import { IntentSession, type IntentSessionOptions, type IntentSnapshot } from '../client/intent-session.ts';

/** Options of {@link useIntent}: read once, when the component mounts. */
export type UseIntentOptions = IntentSessionOptions;

/** What {@link useIntent} returns: the intent's snapshot and its actions. */
export interface Intent extends IntentSnapshot {
  /** Starts the intent, or sends it again with the held key. */
  readonly start: IntentSession['start'];
  /** Resolves an attempt in doubt as cancelled (the chain moves on), or starts an attempt on `provider`. */
  readonly fallback: IntentSession['fallback'];
  /** Cancels the job. */
  readonly cancel: IntentSession['cancel'];
  /** Lets go of the key: the next `start` is a new intent. */
  readonly reset: IntentSession['reset'];
}

/**
 * The intent of one button (or form).
 *
 * @example
 * const summarize = useIntent({ client, route: 'summarize' });
 * <button onClick={() => summarize.start({ messages })}>Summarize</button>
 * {summarize.status === 'in_doubt' && <button onClick={() => summarize.fallback()}>Try the fallback</button>}
 * {summarize.status === 'done' && <p>{String(summarize.job?.result?.content)}</p>}
 */
export function useIntent(options: UseIntentOptions): Intent {
  const [session] = useState(() => new IntentSession(options));
  useEffect(() => {
    session.resume();
    return session.pause;
  }, [session]);
  const snapshot = useSyncExternalStore(session.subscribe, session.getSnapshot, session.getSnapshot);
  return useMemo(
    () => ({ ...snapshot, start: session.start, fallback: session.fallback, cancel: session.cancel, reset: session.reset }),
    [snapshot, session],
  );
}
