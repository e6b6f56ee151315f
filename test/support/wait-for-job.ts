/**
 * Waiting for a job to reach a state in tests: re-read on every change the
 * store reports (and every 50 ms), never a fixed sleep.
 */
import type { JobWithAttempts } from '../../src/core/types.ts';
import type { JobStore } from '../../src/store/job-store.ts';

/** Resolves when `pred` holds for `owner`'s job, re-checking on every change; throws with the last state after `timeoutMs`. */
export async function waitForJob(store: JobStore, jobId: string, pred: (j: JobWithAttempts) => boolean, timeoutMs = 15_000, owner = 'alice'): Promise<JobWithAttempts> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await store.getJob(owner, jobId);
    if (job && pred(job)) return job;
    if (Date.now() > deadline) throw new Error(`timed out waiting for job ${jobId}; last: ${JSON.stringify({ state: job?.state, attempts: job?.attempts.map((a) => [a.state, a.error?.code]) })}`);
    await new Promise<void>((resolve) => {
      const off = store.onJobChanged((_, id) => id === jobId && (off(), resolve()));
      setTimeout(() => (off(), resolve()), 50);
    });
  }
}
