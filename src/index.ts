/**
 * onejob as a library: the core rules, the store, the HTTP app, the executor,
 * the providers and the contracts. Testing helpers (a fake provider for your
 * own tests) are a separate entry point: `onejob/testing`.
 *
 * @example
 * import { openStore, createRuntime, buildApp, loadConfig } from 'onejob';
 * const config = loadConfig({ env: process.env });
 * const store = await openStore(config.databaseUrl);
 * await store.migrate();
 * const runtime = await createRuntime({ config, store });
 * await runtime.createExecutor().start();
 * await buildApp({ store, config, eligible: runtime.eligible }).listen({ port: config.port });
 */
export * from './core/states.ts';
export * from './core/errors.ts';
export * from './core/types.ts';
export * from './core/job-rules.ts';
export * from './core/fingerprint.ts';
export * from './core/clock.ts';
export * from './core/usage.ts';
export type * from './store/store.ts';
export { JobStore } from './store/job-store.ts';
export { openStore, openDriver, DEFAULT_DATABASE_URL } from './store/open-store.ts';
export { classifyDatabaseError, isTransientDatabaseError } from './store/transient-errors.ts';
export type { ErrorClass } from './store/transient-errors.ts';
export { loadConfig, defineConfig } from './config/config.ts';
export type { OnejobConfig, ProviderConfig as ConfiguredProvider, RouteConfig } from './config/config.ts';
export { buildApp } from './http/build-app.ts';
export type { BuildAppOptions } from './http/build-app.ts';
export { createMetrics } from './http/metrics.ts';
export { instrumentUsage, usageMetrics } from './http/usage-metrics.ts';
export { pricingOf } from './config/pricing.ts';
export { Insights } from './store/insights.ts';
export type { SearchJobsParams, SearchJobsResult, UsageParams, RecordLateUsageParams } from './store/insights.ts';
export type { UsageTotalRow } from './store/insight-queries.ts';
export { Executor, acceptText } from './executor/executor.ts';
export type { ExecutorOptions, ExecutorEvents, OutputCheck } from './executor/executor.ts';
export { Runtime, createRuntime } from './runtime/runtime.ts';
export { RetentionSweeper } from './runtime/retention-sweeper.ts';
export * from './providers/index.ts';
export * from './protocols/index.ts';
export { compileContract } from './contracts/compile-contract.ts';
export { checkOutput } from './contracts/check-output.ts';
export { certificationGate } from './contracts/certification-gate.ts';
