/**
 * A lookup's answer must name the attempt (CONTRACT §15). A provider's
 * answer about another request (a list that ignored its filter, a response
 * or task under another id) is never taken as this attempt's: a wrong answer
 * is worse than doubt. Each lookup checks the identity its protocol gives:
 * a stored completion's `metadata.onejob_attempt_id`, a response's or task's
 * `id` against the attempt's recorded `provider_request_id`.
 */
import type { LookupAnswer } from './provider.ts';

/**
 * The completion of `list` stored for `attemptId` (its
 * `metadata.onejob_attempt_id` equals it), or undefined: any other entry of
 * the list belongs to another attempt, whatever its position.
 *
 * @example storedFor([{ id: 'c1', metadata: { onejob_attempt_id: 'att_2' } }], 'att_1') // undefined
 */
export function storedFor(list: readonly unknown[], attemptId: string): Record<string, unknown> | undefined {
  for (const entry of list) {
    if (typeof entry !== 'object' || entry === null) continue;
    const metadata = (entry as { metadata?: unknown }).metadata;
    if (typeof metadata === 'object' && metadata !== null && (metadata as Record<string, unknown>).onejob_attempt_id === attemptId) {
      return entry as Record<string, unknown>;
    }
  }
  return undefined;
}

/**
 * Null when `answered` is the recorded id; else the lookup's answer for a
 * provider that answered about another request: `error` (nothing learned,
 * the next ask is scheduled; never a definite failure).
 *
 * @example answerAboutAnother('tasks', 'task', 'task_1', 'task_9')?.kind // 'error'
 */
export function answerAboutAnother(provider: string, what: string, recorded: string, answered: string): LookupAnswer | null {
  if (answered === recorded) return null;
  return { kind: 'error', message: `${provider} answered about ${what} ${answered} when asked about ${recorded}; an answer about another request is not taken` };
}
