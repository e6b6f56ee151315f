/**
 * The runtime: what a configured onejob process builds once from its config
 * and shares between the HTTP API and the executors.
 *
 * - providers, built from `config.providers`;
 * - each route's compiled contract (runtime output checks, CONTRACT §5);
 * - each route's certification gate, from the certifications in the
 *   database, refreshed on a timer (a `onejob verify` in another process is
 *   picked up within `refreshMs`).
 */
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { everyProviderEligible, type EligibilityCheck } from '../core/job-rules.ts';
import type { OnejobConfig } from '../config/config.ts';
import { certificationGate, type CertificationView } from '../contracts/certification-gate.ts';
import { checkOutput } from '../contracts/check-output.ts';
import { compileContract, type CompiledContract } from '../contracts/compile-contract.ts';
import { acceptText, Executor, type ExecutorOptions, type OutputCheck } from '../executor/executor.ts';
import { createProvider } from '../providers/create-provider.ts';
import type { Provider, ProviderConfig } from '../providers/provider.ts';
import type { Store } from '../store/store.ts';
import { pricingOf } from '../config/pricing.ts';

/** Options of {@link createRuntime}. */
export interface RuntimeOptions {
  readonly config: OnejobConfig;
  readonly store: Store;
  readonly logger?: Logger;
  /** How often certifications are re-read from the database. Default 10 000 ms. */
  readonly refreshMs?: number;
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
  /** Compiled contracts by route name (routes without a contract are absent). */
  readonly contracts: ReadonlyMap<string, CompiledContract>;
  readonly #logger: Logger | undefined;
  #gates = new Map<string, EligibilityCheck>();
  #timer: NodeJS.Timeout | null = null;
  readonly #executors: Executor[] = [];

  private constructor(o: RuntimeOptions, providers: Map<string, Provider>, contracts: Map<string, CompiledContract>) {
    this.config = o.config;
    this.store = o.store;
    this.providers = providers;
    this.contracts = contracts;
    this.#logger = o.logger;
  }

  /** Builds providers and compiles contracts; loads certifications. */
  static async create(o: RuntimeOptions): Promise<Runtime> {
    const providers = new Map<string, Provider>();
    for (const [name, pc] of Object.entries(o.config.providers)) {
      providers.set(name, createProvider(name, pc as unknown as ProviderConfig));
    }
    const contracts = new Map<string, CompiledContract>();
    const baseDir = o.config.configPath ? dirname(o.config.configPath) : process.cwd();
    const compiled = new Map<string, CompiledContract>();
    for (const [route, rc] of Object.entries(o.config.routes)) {
      if (!rc.contract) continue;
      let c = compiled.get(rc.contract);
      if (!c) {
        c = await compileContract(rc.contract, o.config.contracts[rc.contract], { baseDir });
        compiled.set(rc.contract, c);
      }
      contracts.set(route, c);
    }
    const runtime = new Runtime(o, providers, contracts);
    await runtime.refreshCertifications();
    runtime.#timer = setInterval(() => void runtime.refreshCertifications().catch((e) => o.logger?.warn({ err: e }, 'certification refresh failed')), o.refreshMs ?? 10_000);
    runtime.#timer.unref();
    return runtime;
  }

  /** Re-reads certifications and rebuilds every route's gate. */
  async refreshCertifications(): Promise<void> {
    const certifications: readonly CertificationView[] = this.contracts.size === 0 ? [] : await this.store.listCertifications();
    const models = Object.fromEntries(Object.entries(this.config.providers).map(([n, p]) => [n, p.model]));
    const gates = new Map<string, EligibilityCheck>();
    for (const [route, rc] of Object.entries(this.config.routes)) {
      gates.set(route, certificationGate({ certifications, chain: rc.providers, contractFingerprint: this.contracts.get(route)?.fingerprint ?? null, models }));
    }
    this.#gates = gates;
  }

  /** The certification gate of `route` (every provider eligible for an unknown route or one without a contract). */
  readonly eligible = (route: string): EligibilityCheck => this.#gates.get(route) ?? everyProviderEligible;

  /** The run-time contract check of every output. */
  readonly checkOutput: OutputCheck = (route, input, completion) => {
    const contract = this.contracts.get(route);
    return contract ? checkOutput(contract, input, completion) : acceptText(route, input, completion);
  };

  /** A new executor wired to this runtime (not started). */
  createExecutor(options: Partial<ExecutorOptions> = {}): Executor {
    const executor = new Executor({
      store: this.store,
      providers: this.providers,
      routes: this.config.routes,
      eligible: this.eligible,
      checkOutput: this.checkOutput,
      pricing: pricingOf(this.config),
      logger: this.#logger,
      ...options,
    });
    this.#executors.push(executor);
    return executor;
  }

  /** Stops the executors it created, the refresh timer, and the providers' connections. */
  async close(graceMs = 10_000): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await Promise.all(this.#executors.map((e) => e.stop(graceMs)));
    await Promise.all([...this.providers.values()].map((p) => p.close()));
  }
}

/** Shorthand for {@link Runtime.create}. */
export function createRuntime(options: RuntimeOptions): Promise<Runtime> {
  return Runtime.create(options);
}
