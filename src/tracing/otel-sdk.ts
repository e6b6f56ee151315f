/**
 * The OpenTelemetry SDK of a onejob process: loaded (dynamically, by
 * `start-tracing.ts`) only when exporting is configured, so a process with
 * tracing off never loads it. A batch span processor exporting OTLP/HTTP
 * (JSON) to the configured endpoint, the W3C trace-context propagator and
 * the AsyncLocalStorage context manager, registered as the globals the
 * library's `@opentelemetry/api` calls use.
 */
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { TracingHandle, TracingSettings } from './start-tracing.ts';

/** Registers the SDK globally; the handle flushes and stops it. */
export function registerSdk(settings: TracingSettings): TracingHandle {
  const exporter = new OTLPTraceExporter({ url: settings.tracesUrl });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: settings.flushDelayMs })],
  });
  provider.register({ propagator: new W3CTraceContextPropagator() });
  return {
    tracesUrl: settings.tracesUrl,
    shutdown: () => provider.shutdown(),
  };
}
