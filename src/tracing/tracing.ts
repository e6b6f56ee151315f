/**
 * One trace per intent (docs/tracing.md), written against `@opentelemetry/api`
 * only: without an SDK registered (tracing off, the default) every wrapper
 * here calls straight through ({@link tracingOn}).
 *
 * - {@link tracedCreateJob}: the create span (child of an incoming
 *   `traceparent`); its context is kept on the new job row; a duplicate
 *   (replay, concurrent twin) gets a span in the job's own trace instead.
 * - {@link withAttemptSpan}: an executor's attempt, continuing the job's
 *   stored trace in whatever process runs it.
 * - {@link tracedProvider}: the provider call (its request carries
 *   `traceparent`, see `providers/attempt-headers.ts`).
 * - {@link tracedStore}: the completion compare-and-swap, with whether it won.
 */
import {
  ProxyTracerProvider, ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace,
  type Context, type Span, type SpanOptions, type TextMapGetter,
} from '@opentelemetry/api';
import type { Provider, ProviderOutcome, ProviderRequest } from '../providers/provider.ts';
import type { ClaimedAttempt, CreateJobParams, CreateJobResult, Store } from '../store/store.ts';

/** The instrumentation scope of every onejob span. */
export const TRACER_NAME = 'onejob';

const tracer = () => trace.getTracer(TRACER_NAME);

/** What the API's global provider delegates to while no SDK is registered (its no-op provider). */
const NO_SDK = new ProxyTracerProvider().getDelegate();

/**
 * Whether an SDK is registered (`otel-sdk.ts`, or an application's own):
 * asked on every call, so one registered later is used from then on. With
 * none, every span here would be the API's no-op and no context could be
 * propagated (no propagator either), so the wrappers below call straight
 * through: no span objects, no context switches, no bound functions per call.
 */
export function tracingOn(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NO_SDK;
}

/** `target`'s methods bound to it, each bound once (a Proxy's `get` would otherwise bind on every access). */
function boundOnce<T extends object>(target: T): (key: string | symbol) => unknown {
  const bound = new Map<string | symbol, unknown>();
  return (key) => {
    const value: unknown = Reflect.get(target, key, target);
    if (typeof value !== 'function') return value;
    let b = bound.get(key) as { fn: unknown; of: unknown } | undefined;
    if (b === undefined || b.of !== value) bound.set(key, (b = { fn: (value as (...a: unknown[]) => unknown).bind(target), of: value }));
    return b.fn;
  };
}

/** Header getter over Node's incoming headers (values may be arrays). */
const headerGetter: TextMapGetter<Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key.toLowerCase()],
};

/**
 * The stored form of a span's context: the W3C carrier as JSON
 * (`{"traceparent": "00-…", "tracestate"?: "…"}`), or null when there is no
 * valid span (tracing off).
 */
export function storedContextOf(ctx: Context): string | null {
  if (!trace.getSpanContext(ctx) || !trace.isSpanContextValid(trace.getSpanContext(ctx)!)) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent === undefined ? null : JSON.stringify(carrier);
}

/** The context a stored trace context continues (ROOT when there is none or it does not parse). */
export function contextFromStored(stored: string | null | undefined): Context {
  if (!stored) return ROOT_CONTEXT;
  try {
    const carrier = JSON.parse(stored) as Record<string, string>;
    return propagation.extract(ROOT_CONTEXT, carrier);
  } catch {
    return ROOT_CONTEXT;
  }
}

/** Runs `fn` in a new active span; ends it, recording a thrown error. */
async function inSpan<T>(name: string, options: SpanOptions, parent: Context, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(name, options, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * `store.createJob` inside the create span `onejob.job.create`, a child of
 * the request's `traceparent` when one came. A new job keeps this span's
 * context (`traceContext`). A duplicate (same key and body: a replay or a
 * concurrent twin) is traced as `onejob.job.duplicate`, a child of the
 * job's stored context, so every request of one intent is in the intent's
 * trace; it links to the request's own `traceparent` when that is another
 * trace.
 */
export async function tracedCreateJob(
  store: Pick<Store, 'createJob'>,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  params: CreateJobParams,
): Promise<CreateJobResult> {
  if (!tracingOn()) return store.createJob(params);
  const incoming = propagation.extract(ROOT_CONTEXT, headers, headerGetter);
  const startTime = Date.now();
  const attributes = { 'onejob.owner': params.ownerId, 'onejob.route': params.route, 'onejob.idempotency_key': params.idempotencyKey };
  const span = tracer().startSpan('onejob.job.create', { kind: SpanKind.SERVER, attributes, startTime }, incoming);
  const spanCtx = trace.setSpan(incoming, span);
  let result: CreateJobResult;
  try {
    result = await context.with(spanCtx, () => store.createJob({ ...params, traceContext: storedContextOf(spanCtx) }));
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    span.end();
    throw error;
  }
  const { job, created } = result;
  if (created || !job.traceContext) {
    span.setAttributes({ 'onejob.job_id': job.id, 'onejob.created': created });
    span.end();
    return result;
  }
  // A duplicate: its span belongs in the job's trace. The provisional span is
  // dropped unended (never exported), and the request is traced again under
  // the job's stored context, from the same start.
  const jobCtx = contextFromStored(job.traceContext);
  const callerSpan = trace.getSpanContext(incoming);
  const links = callerSpan && trace.isSpanContextValid(callerSpan) && callerSpan.traceId !== trace.getSpanContext(jobCtx)?.traceId ? [{ context: callerSpan }] : [];
  tracer()
    .startSpan('onejob.job.duplicate', { kind: SpanKind.SERVER, attributes: { ...attributes, 'onejob.job_id': job.id, 'onejob.created': false }, startTime, links }, jobCtx)
    .end();
  return result;
}

/**
 * Runs an executor's attempt inside `onejob.attempt`, a child of the job's
 * stored trace context (so the executor process continues the intent's
 * trace), or a root span for a job created untraced.
 */
export function withAttemptSpan<T>(claimed: ClaimedAttempt, executorId: string, fn: () => Promise<T>): Promise<T> {
  if (!tracingOn()) return fn();
  const { attempt, job } = claimed;
  return inSpan(
    'onejob.attempt',
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'onejob.job_id': job.id, 'onejob.attempt_id': attempt.id, 'onejob.attempt.number': attempt.number,
        'onejob.attempt.kind': attempt.kind, 'onejob.provider': attempt.provider, 'onejob.executor': executorId,
      },
    },
    contextFromStored(job.traceContext),
    () => fn(),
  );
}

/** Attributes of a provider outcome. */
function outcomeAttributes(span: Span, outcome: ProviderOutcome): void {
  span.setAttribute('onejob.outcome', outcome.kind);
  if (outcome.kind !== 'success') {
    span.setAttribute('onejob.error_code', outcome.error.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error.code });
  }
}

/**
 * The provider with `call` and `stream` traced as `onejob.provider.call`
 * (kind CLIENT), a child of the active (attempt) span; the request headers
 * built inside it carry that span's `traceparent`.
 */
export function tracedProvider(provider: Provider): Provider {
  const traced = (method: 'call' | 'stream') =>
    (request: ProviderRequest, ...rest: unknown[]): Promise<ProviderOutcome> =>
      !tracingOn() ? (provider[method] as (r: ProviderRequest, ...x: unknown[]) => Promise<ProviderOutcome>).call(provider, request, ...rest) : inSpan(
        'onejob.provider.call',
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'onejob.job_id': request.jobId, 'onejob.attempt_id': request.attemptId, 'onejob.provider': provider.name,
            'onejob.provider.type': provider.type, 'gen_ai.request.model': provider.model, 'onejob.stream': method === 'stream',
          },
        },
        context.active(),
        async (span) => {
          const outcome = await (provider[method] as (r: ProviderRequest, ...x: unknown[]) => Promise<ProviderOutcome>).call(provider, request, ...rest);
          outcomeAttributes(span, outcome);
          return outcome;
        },
      );
  const methods = { call: traced('call'), stream: traced('stream') };
  const other = boundOnce(provider);
  return new Proxy(provider, {
    get(_target, key) {
      return key === 'call' || key === 'stream' ? methods[key] : other(key);
    },
  });
}

/**
 * The store with its completion compare-and-swap (`settleAttempt`) traced as
 * `onejob.job.complete`: attribute `onejob.cas.won` says whether this
 * attempt's outcome decided the job. A child of the active span (the
 * attempt), else a root span (an explicit resolve over HTTP).
 */
export function tracedStore(store: Store): Store {
  const settleAttempt: Store['settleAttempt'] = (params) => {
    if (!tracingOn()) return store.settleAttempt(params);
    const active = trace.getSpan(context.active()) !== undefined;
    const span = tracer().startSpan('onejob.job.complete', {
      kind: SpanKind.INTERNAL,
      attributes: { 'onejob.attempt_id': params.attemptId, 'onejob.outcome': params.outcome.state },
    }, active ? context.active() : ROOT_CONTEXT);
    return store.settleAttempt(params).then(
      (r) => {
        span.setAttributes({ 'onejob.job_id': r.job.id, 'onejob.cas.won': r.won, 'onejob.attempt.state': r.attempt.state });
        span.end();
        return r;
      },
      (error: unknown) => {
        span.setAttribute('onejob.cas.won', false);
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        span.end();
        throw error;
      },
    );
  };
  const other = boundOnce(store);
  return new Proxy(store, {
    get(_target, key) {
      return key === 'settleAttempt' ? settleAttempt : other(key);
    },
  });
}
