/** When exporting is on (docs/tracing.md): only with an OTLP endpoint, never by default. */
import { describe, expect, it } from 'vitest';
import { startTracing, tracingSettings } from '../../src/tracing/start-tracing.ts';

describe('tracingSettings', () => {
  it('is off without an endpoint, and when disabled', async () => {
    expect(tracingSettings({}, 'onejob')).toBeNull();
    expect(await startTracing({}, 'onejob')).toBeNull();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318', OTEL_SDK_DISABLED: 'true' }, 'onejob')).toBeNull();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318', OTEL_TRACES_EXPORTER: 'none' }, 'onejob')).toBeNull();
  });
  it('takes the base or the full traces URL, the service name and the batch delay', () => {
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318/' }, 'onejob')).toEqual({ tracesUrl: 'http://x:4318/v1/traces', serviceName: 'onejob', flushDelayMs: 5000 });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://y/t', OTEL_SERVICE_NAME: 'api-1', OTEL_BSP_SCHEDULE_DELAY: '100' }, 'onejob'))
      .toEqual({ tracesUrl: 'http://y/t', serviceName: 'api-1', flushDelayMs: 100 });
  });
  it('refuses an endpoint that is not a URL', () => {
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'onejob')).toThrow(/not a URL/);
  });
});
