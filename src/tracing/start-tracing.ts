/**
 * Start-up of tracing in a process (`onejob serve`, `onejob executor`).
 * Exporting is off unless an OTLP endpoint is configured; only then is the
 * SDK (`otel-sdk.ts`) imported, so a process with tracing off pays nothing
 * for it. See docs/tracing.md and docs/config.md.
 */

/** What the SDK needs to start. */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  readonly tracesUrl: string;
  readonly serviceName: string;
  /** Batch export delay (`OTEL_BSP_SCHEDULE_DELAY`), default 5000 ms. */
  readonly flushDelayMs: number;
}

/** A started SDK. */
export interface TracingHandle {
  readonly tracesUrl: string;
  /** Flushes the spans not yet exported and stops the SDK. */
  shutdown(): Promise<void>;
}

/**
 * The settings from the environment, or null when exporting is off:
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, `/v1/traces` appended), unless
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 *
 * @example tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, 'onejob')?.tracesUrl // 'http://127.0.0.1:4318/v1/traces'
 */
export function tracingSettings(env: Readonly<Record<string, string | undefined>>, defaultServiceName: string): TracingSettings | null {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.toLowerCase() === 'none') return null;
  const full = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const tracesUrl = full ? full : base ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
  if (tracesUrl === null) return null;
  try {
    new URL(tracesUrl);
  } catch {
    throw new Error(`the OTLP traces endpoint is not a URL: ${tracesUrl}`);
  }
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  return {
    tracesUrl,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || defaultServiceName,
    flushDelayMs: Number.isFinite(delay) && delay >= 0 ? delay : 5000,
  };
}

/** Starts the SDK when {@link tracingSettings} says so; null when tracing is off. */
export async function startTracing(env: Readonly<Record<string, string | undefined>>, defaultServiceName: string): Promise<TracingHandle | null> {
  const settings = tracingSettings(env, defaultServiceName);
  if (settings === null) return null;
  const { registerSdk } = await import('./otel-sdk.ts');
  return registerSdk(settings);
}
