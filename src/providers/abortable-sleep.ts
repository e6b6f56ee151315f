/**
 * A wait that a signal cuts short: the polling providers (`task`,
 * `openai-responses`) and the fake provider's scripted delays wait between
 * reads this way, so a cancelled job or a closing process stops at once.
 */

/**
 * Resolves `true` after `ms`, or `false` as soon as `signal` aborts (at once when it already has).
 *
 * @example if (!(await abortableSleep(1000, signal))) return; // cancelled
 */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
