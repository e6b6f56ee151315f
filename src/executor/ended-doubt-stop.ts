/**
 * Stopping upstream the work of an attempt whose doubt stopped mattering
 * (CONTRACT §11: "a loser or a cancelled job is stopped with
 * `POST {baseUrl}/responses/{id}/cancel`"; docs/reconciliation.md,
 * "Stopping work upstream").
 *
 * The executor stops the attempts it still follows. This covers the ones no
 * executor follows any more: an `unknown` attempt (its executor timed out,
 * died or gave up) whose job was cancelled, that was superseded because
 * another attempt won, or that a person resolved `failed` / `cancelled`.
 *
 * In-process, on the store's committed change ({@link Store.onJobChanged}
 * with the whole job: only the process that made the write holds it), so
 * the cancel is sent once, by the process that ended the doubt, in the
 * background: it never delays or fails the request that caused it. No
 * durable mark: a process that dies between its commit and the cancel does
 * not send it (the response then runs to its end; the lookup still settles
 * it). Pure selection in {@link attemptsToStop}.
 */
import type { Logger } from 'pino';
import type { Attempt, JobWithAttempts } from '../core/types.ts';
import type { Provider } from '../providers/provider.ts';
import type { Store } from '../store/store.ts';

/** Attempt ids this process already asked to stop (bounded; shared by every registration in the process). */
const stopped = new Set<string>();
const STOPPED_KEEP = 10_000;

/** What {@link watchEndedDoubt} reports (metrics and tests subscribe). */
export type EndedDoubtStopListener = (attempt: Attempt, outcome: 'sent' | 'error') => void;

/**
 * The attempts of a just-committed job change whose upstream work should be
 * stopped: an attempt with a provider id, that was `unknown` and is not held
 * by an executor (whose lease still runs: that executor stops it itself),
 * and, in this very change (its end at the job's `updatedAt`), was
 * superseded (by the winner's settle) or resolved `failed`/`cancelled` by an
 * operator; or that is left `unknown` in a cancelled job (the cancel itself,
 * or a later change of it: the process's own record keeps that to one ask).
 *
 * @example attemptsToStop(job, now) // [the unknown attempt of a job just cancelled]
 */
export function attemptsToStop(job: JobWithAttempts, now: Date): Attempt[] {
  const at = job.updatedAt.getTime();
  return job.attempts.filter((a) => {
    if (a.providerRequestId === null || a.unknownAt === null) return false;
    if (a.state === 'unknown') {
      const held = a.leaseOwner !== null && a.leaseExpiresAt !== null && a.leaseExpiresAt > now;
      return job.state === 'cancelled' && !held;
    }
    if (a.finishedAt === null || a.finishedAt.getTime() !== at) return false;
    if (a.state === 'superseded') return a.resolvedBy === null;
    return (a.state === 'failed' || a.state === 'cancelled') && a.resolvedBy === 'operator';
  });
}

/**
 * Watches this process's committed job changes and asks the provider to stop
 * the attempts {@link attemptsToStop} names, where its protocol can
 * (`Provider.stopUpstream`; providers without one are skipped). Returns the
 * unsubscribe.
 */
export function watchEndedDoubt(o: {
  store: Pick<Store, 'onJobChanged'>;
  providers: ReadonlyMap<string, Provider>;
  logger?: Logger | undefined;
  onStop?: EndedDoubtStopListener;
}): () => void {
  return o.store.onJobChanged((_owner, _jobId, _state, job) => {
    if (job === undefined) return;
    for (const a of attemptsToStop(job, new Date())) {
      const provider = o.providers.get(a.provider);
      if (!provider?.stopUpstream || stopped.has(a.id)) continue;
      stopped.add(a.id);
      if (stopped.size > STOPPED_KEEP) stopped.delete(stopped.values().next().value!);
      const log = o.logger?.child({ job_id: a.jobId, attempt_id: a.id, provider: a.provider, provider_request_id: a.providerRequestId });
      void provider
        .stopUpstream({ attemptId: a.id, providerRequestId: a.providerRequestId, signal: AbortSignal.timeout(10_000) })
        .then(
          () => (log?.info({ state: a.state, job_state: job.state }, 'asked the provider to stop an attempt whose doubt ended'), o.onStop?.(a, 'sent')),
          (e: unknown) => (log?.warn({ err: e }, 'could not ask the provider to stop an attempt whose doubt ended'), o.onStop?.(a, 'error')),
        );
    }
  });
}
