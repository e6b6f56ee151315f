/**
 * Tracing off costs nothing and changes nothing (src/tracing/tracing.ts,
 * `tracingOn`): without an SDK the wrappers call straight through; an SDK
 * registered later is used from then on, and the create keeps its trace
 * context on the job again.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { CreateJobParams, CreateJobResult } from '../../src/store/store.ts';
import { tracedCreateJob, tracingOn } from '../../src/tracing/tracing.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const headers = { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` };
const params: CreateJobParams = { ownerId: 'alice', idempotencyKey: 'k1', route: 'summarize', input: { q: 1 }, providers: ['primary'] };

/** A store that only records what `createJob` was given. */
function recordingStore() {
  const seen: CreateJobParams[] = [];
  return {
    seen,
    store: {
      async createJob(p: CreateJobParams): Promise<CreateJobResult> {
        seen.push(p);
        return { job: { id: 'job_1', traceContext: p.traceContext ?? null } as never, created: true };
      },
    },
  };
}

describe('tracingOn', () => {
  afterEach(() => {
    trace.disable();
    propagation.disable();
    context.disable();
  });

  it('is off without an SDK: the create is passed through as given, no trace context kept (even with a traceparent)', async () => {
    expect(tracingOn()).toBe(false);
    const { store, seen } = recordingStore();
    await tracedCreateJob(store, headers, params);
    expect(seen).toEqual([params]);
    expect(seen[0]!.traceContext).toBeUndefined();
  });

  it('is on once an SDK is registered, and off again when it is removed', async () => {
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    expect(tracingOn()).toBe(true);
    const { store, seen } = recordingStore();
    await tracedCreateJob(store, headers, params);
    // The create span is a child of the request's traceparent, and its context is what the job keeps.
    expect(JSON.parse(seen[0]!.traceContext!).traceparent).toContain(TRACE_ID);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['onejob.job.create']);
    trace.disable();
    expect(tracingOn()).toBe(false);
  });
});
