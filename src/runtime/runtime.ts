/**
 * The runtime: what a configured onejob process builds once from its config
 * and shares between the HTTP API and the executors.
 *
 * - providers, built from `config.providers`;
 * - each route's compiled contract (runtime output checks, CONTRACT §5);
 * - each route's certification gate (`route-gates.ts`), decided on the
 *   database's certifications at each routing decision, so a `onejob verify`
 *   in any process takes effect on the very next decision of every process.
 * - the background retention sweep of `serve` and `executor` (CONTRACT §9),
 *   started with {@link Runtime.startRetention}.
 */
import type { Logger } from 'pino';
import type { EligibilityCheck } from '../core/job-rules.ts';
import type { OnejobConfig } from '../config/config.ts';
import { RetentionSweeper, type RetentionSweeperOptions } from './retention-sweeper.ts';
import { BatchRunner, type BatchRunnerOptions } from '../batches/batch-runner.ts';
import { compileRouteContracts, RouteGates } from './route-gates.ts';
import { checkOutput } from '../contracts/check-output.ts';
import type { CompiledContract } from '../contracts/compile-contract.ts';
import { acceptText, Executor, type ExecutorOptions, type OutputCheck } from '../executor/executor.ts';
import { Reconciler, type ReconcilerOptions } from '../executor/reconciler.ts';
import { watchEndedDoubt } from '../executor/ended-doubt-stop.ts';
import { createProvider } from '../providers/create-provider.ts';
import { tracedProvider, tracedStore } from '../tracing/tracing.ts';
import type { ChatRequest, Provider, ProviderConfig } from '../providers/provider.ts';
import type { Store } from '../store/store.ts';
import { pricingOf } from '../config/pricing.ts';
import { McpUpstreams, ProvidersWithTools } from '../providers/mcp/mcp-upstreams.ts';
import { retryPolicyOf } from '../config/retry-policy.ts';

/** Options of {@link createRuntime}. */
export interface RuntimeOptions {
  readonly config: OnejobConfig;
  readonly store: Store;
  readonly logger?: Logger;
}

/**
 * A process's providers, contracts and gates.
 *
 * @example
 * const runtime = await createRuntime({ config, store, logger });
 * const executor = runtime.createExecutor();
 * await executor.start();
 */
export class Runtime {
  readonly config: OnejobConfig;
  readonly store: Store;
  readonly providers: ReadonlyMap<string, Provider>;
  /** The upstream MCP servers (`mcpServers`, CONTRACT §14): the `/mcp` gateway's tools; their tool jobs run through `providers`. */
  readonly mcp: McpUpstreams;
  /** Compiled contracts by route name (routes without a contract are absent). */
  readonly contracts: ReadonlyMap<string, CompiledContract>;
  readonly #logger: Logger | undefined;
  readonly #gates: RouteGates;
  readonly #executors: Executor[] = [];
  #retention: RetentionSweeper | null = null;
  #batches: BatchRunner | null = null;
  #offEndedDoubt: (() => void) | null = null;

  private constructor(o: RuntimeOptions, providers: Map<string, Provider>, contracts: Map<string, CompiledContract>, mcp: McpUpstreams) {
    this.config = o.config;
    this.store = o.store;
    this.providers = providers;
    this.mcp = mcp;
    this.contracts = contracts;
    this.#logger = o.logger;
    this.#gates = new RouteGates(o.config, contracts, (provider, input) => providers.get(provider)?.unsupportedMembers(input as ChatRequest) ?? []);
  }

  /** Builds providers and compiles contracts; loads certifications. */
  static async create(o: RuntimeOptions): Promise<Runtime> {
    const configured = new Map<string, Provider>();
    for (const [name, pc] of Object.entries(o.config.providers)) {
      configured.set(name, tracedProvider(createProvider(name, pc as unknown as ProviderConfig)));
    }
    // Tool jobs (`mcp:<server>.<tool>`) find their provider here too, whatever tools the servers offer now.
    const mcp = new McpUpstreams(o.config.mcpServers, { logger: o.logger, wrapProvider: tracedProvider });
    const providers = new ProvidersWithTools(configured, mcp);
    const contracts = await compileRouteContracts(o.config);
    const runtime = new Runtime(o, providers, contracts, mcp);
    // The API's cancels and resolves stop upstream the work of attempts in doubt (docs/reconciliation.md).
    runtime.#offEndedDoubt = watchEndedDoubt({ store: runtime.store, providers, logger: o.logger });
    // Stdio servers start now (and are restarted when they die); failures are retried on use.
    await mcp.start();
    await runtime.refreshCertifications();
    return runtime;
  }

  /**
   * Re-reads certifications for direct calls of a gate (`eligible(route)(p, kind)`
   * outside the store, e.g. a dashboard). Routing decisions never need it:
   * the store reads the verdicts itself when it decides.
   */
  async refreshCertifications(): Promise<void> {
    if (this.#gates.any) this.#gates.remember(await this.store.listCertifications());
  }

  /**
   * The certification gate of `route` (every provider eligible for an unknown
   * route or one without a contract). Given to the store, it is decided on
   * the certifications read in the routing transaction.
   */
  readonly eligible = (route: string): EligibilityCheck => this.#gates.eligible(route);

  /**
   * Starts the background retention sweep (CONTRACT §9) of this process:
   * one process per database sweeps at a time (a maintenance lease). Stopped
   * by {@link close}. Returns the sweeper.
   */
  startRetention(options: Partial<Omit<RetentionSweeperOptions, 'store'>> = {}): RetentionSweeper {
    this.#retention ??= new RetentionSweeper({
      store: this.store,
      finishedJobsDays: this.config.retention.finishedJobsDays,
      logger: this.#logger,
      ...options,
    });
    this.#retention.start();
    return this.#retention;
  }

  /**
   * Starts this process's batch runner (CONTRACT §17, docs/batches.md): one
   * process per database keeps the batches at a time (a maintenance lease).
   * Stopped by {@link close}.
   */
  startBatches(options: Partial<Omit<BatchRunnerOptions, 'store' | 'config'>> = {}): BatchRunner {
    this.#batches ??= new BatchRunner({ store: this.store, config: this.config, logger: this.#logger, ...options });
    this.#batches.start();
    return this.#batches;
  }

  /** Runs a batch pass soon (a batch was created or cancelled in this process). */
  wakeBatches(): void {
    this.#batches?.wake();
  }

  /** The run-time contract check of every output. */
  readonly checkOutput: OutputCheck = (route, input, completion) => {
    const contract = this.contracts.get(route);
    return contract ? checkOutput(contract, input, completion) : acceptText(route, input, completion);
  };

  /** A new executor wired to this runtime (not started). */
  createExecutor(options: Partial<ExecutorOptions> = {}): Executor {
    const executor = new Executor({
      store: tracedStore(this.store),
      providers: this.providers,
      routes: this.config.routes,
      eligible: this.eligible,
      checkOutput: this.checkOutput,
      pricing: pricingOf(this.config),
      retry: retryPolicyOf(this.config),
      logger: this.#logger,
      answerHoldMs: this.config.executor.answerHoldMs,
      maxHeldAnswers: this.config.executor.maxHeldAnswers,
      ...(this.config.batch ? { batchMaxShare: this.config.batch.maxShare } : {}),
      ...options,
    });
    this.#executors.push(executor);
    return executor;
  }

  /**
   * A reconciler wired to this runtime (CONTRACT §11), not started: the
   * HTTP app's `POST /v1/attempts/{id}/check` and signed callbacks use one.
   * Every executor runs its own (see {@link Executor.reconciler}).
   */
  createReconciler(options: Partial<ReconcilerOptions> = {}): Reconciler {
    return new Reconciler({
      store: tracedStore(this.store),
      providers: this.providers,
      eligible: this.eligible,
      checkOutput: this.checkOutput,
      pricing: pricingOf(this.config),
      logger: this.#logger,
      ...options,
    });
  }

  /** Stops the retention sweep, the executors it created, and the providers' connections. */
  async close(graceMs = 10_000): Promise<void> {
    this.#offEndedDoubt?.();
    await this.#retention?.stop();
    await this.#batches?.stop();
    await Promise.all(this.#executors.map((e) => e.stop(graceMs)));
    await Promise.all([...this.providers.values()].map((p) => p.close()));
    await this.mcp.close();
  }
}

/** Shorthand for {@link Runtime.create}. */
export function createRuntime(options: RuntimeOptions): Promise<Runtime> {
  return Runtime.create(options);
}
