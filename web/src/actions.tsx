/** Resolve an attempt in doubt, cancel a job: each asks for confirmation and a reason kept in the event log. */
import type { Api, Attempt, Job } from './api.ts';
import { ConfirmAction } from './ui.tsx';

export function ResolveActions({ api, attempt }: { api: Api; attempt: Attempt }) {
  const resolve = (state: 'succeeded' | 'failed' | 'cancelled') => async ({ reason, result }: { reason: string; result?: unknown }) => {
    const body: Record<string, unknown> = { state, reason };
    if (state === 'succeeded') body.result = result;
    await api.post(`/v1/attempts/${encodeURIComponent(attempt.id)}/resolve`, body);
  };
  const what = `attempt #${attempt.number} on ${attempt.provider}`;
  return (
    <div class="action-group" role="group" aria-label={`Resolve ${what}`}>
      <ConfirmAction
        label="Resolve: succeeded…" title={`Resolve ${what} as succeeded`} confirmLabel="Resolve as succeeded" askResult
        testId={`resolve-succeeded-${attempt.id}`}
        description={<p>The result you give becomes the job's result exactly as given, unless another attempt already won (then this one is superseded).</p>}
        onConfirm={resolve('succeeded')}
      />
      <ConfirmAction
        label="Resolve: failed…" title={`Resolve ${what} as failed`} confirmLabel="Resolve as failed"
        testId={`resolve-failed-${attempt.id}`}
        description={<p>Say it definitely did not run. The job then goes on down its chain, as after any definite failure.</p>}
        onConfirm={resolve('failed')}
      />
      <ConfirmAction
        label="Resolve: cancelled…" title={`Resolve ${what} as cancelled`} confirmLabel="Resolve as cancelled"
        testId={`resolve-cancelled-${attempt.id}`}
        description={<p>Record that it was stopped. The job goes on down its chain.</p>}
        onConfirm={resolve('cancelled')}
      />
    </div>
  );
}

export function CancelAction({ api, job }: { api: Api; job: Job }) {
  return (
    <ConfirmAction
      label="Cancel job…" title={`Cancel job ${job.id}`} confirmLabel="Cancel the job" danger
      testId={`cancel-${job.id}`}
      description={<p>The job becomes <strong>cancelled</strong> for good; attempts in flight are asked to stop, and any result that arrives later is superseded.</p>}
      onConfirm={async ({ reason }) => api.post(`/v1/jobs/${encodeURIComponent(job.id)}/cancel`, { reason })}
    />
  );
}
