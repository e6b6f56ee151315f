/**
 * {@link runVerifyCommand}: `onejob verify [--route R] [--provider P] [--json]`
 * (CONTRACT §5, §6). For each route with a contract (or the one named), for
 * each provider of its chain (or the one named): verify, record the verdict as
 * a certification of (provider, model, contract fingerprint), print the table
 * (or the reports as JSON). Returns the exit code: 0 only when every
 * verification passed, 1 otherwise.
 */
import { dirname } from 'node:path';
import { OnejobError } from '../core/errors.ts';
import type { OnejobConfig } from '../config/config.ts';
import { createProvider } from '../providers/create-provider.ts';
import type { Provider, ProviderConfig } from '../providers/provider.ts';
import type { CertificationRow } from '../store/driver.ts';
import type { Store } from '../store/store.ts';
import { compileContract, type CompiledContract } from './compile-contract.ts';
import { formatVerifyTable, verifyProvider, type VerifyReport } from './verify.ts';

/** Exit code of a verification that did not fully pass. */
export const VERIFY_FAILED_EXIT_CODE = 1;

/** Parameters of {@link runVerifyCommand}. */
export interface RunVerifyCommandParams {
  /** The loaded configuration (providers, routes, contracts, configPath). */
  readonly config: Pick<OnejobConfig, 'providers' | 'routes' | 'contracts' | 'configPath'>;
  /** Where certifications are recorded (migrated). */
  readonly store: Pick<Store, 'recordCertification'>;
  /** Only this route (`--route`). */
  readonly route?: string | undefined;
  /** Only this provider (`--provider`). */
  readonly provider?: string | undefined;
  /** Print `{ "passed", "reports" }` as JSON instead of the table (`--json`). */
  readonly json?: boolean | undefined;
  /** Where the table or JSON goes. */
  readonly stdout: { write(text: string): unknown };
  /** Builds providers; default {@link createProvider}. */
  readonly makeProvider?: ((name: string, config: ProviderConfig) => Provider) | undefined;
}

/**
 * Runs `onejob verify` and returns its exit code.
 *
 * @throws OnejobError `route_unknown`, `provider_unknown`, or `invalid_request`
 *   (the route has no contract, the provider is not in the route, nothing to
 *   verify), and `config_invalid` from compiling a contract: the CLI prints
 *   them as its one-line reason with their exit codes.
 * @example process.exitCode = await runVerifyCommand({ config, store, route: opts.route, provider: opts.provider, json: opts.json, stdout: process.stdout });
 */
export async function runVerifyCommand(params: RunVerifyCommandParams): Promise<number> {
  const { config } = params;
  const baseDir = config.configPath ? dirname(config.configPath) : process.cwd();
  if (params.route !== undefined && !Object.hasOwn(config.routes, params.route)) {
    throw new OnejobError('route_unknown', `route ${params.route} is not configured`);
  }
  if (params.provider !== undefined && !Object.hasOwn(config.providers, params.provider)) {
    throw new OnejobError('provider_unknown', `provider ${params.provider} is not configured`);
  }
  const routeNames = params.route !== undefined ? [params.route] : Object.keys(config.routes);
  const plan: { route: string; provider: string; contractName: string }[] = [];
  for (const route of routeNames) {
    const r = config.routes[route]!;
    if (r.contract === null) {
      if (params.route !== undefined) throw new OnejobError('invalid_request', `route ${route} has no contract to verify`);
      continue;
    }
    const providers = params.provider !== undefined ? r.providers.filter((p) => p === params.provider) : r.providers;
    if (params.provider !== undefined && providers.length === 0 && params.route !== undefined) {
      throw new OnejobError('invalid_request', `provider ${params.provider} is not in route ${route}'s chain`);
    }
    for (const provider of providers) plan.push({ route, provider, contractName: r.contract });
  }
  if (plan.length === 0) throw new OnejobError('invalid_request', 'nothing to verify: no route with a contract matches');

  const compiled = new Map<string, CompiledContract>();
  const reports: VerifyReport[] = [];
  const done = new Set<string>();
  const make = params.makeProvider ?? ((name: string, cfg: ProviderConfig) => createProvider(name, cfg));
  for (const item of plan) {
    let contract = compiled.get(item.contractName);
    if (!contract) {
      const raw = config.contracts[item.contractName];
      if (raw === undefined) throw new OnejobError('config_invalid', `route ${item.route} names contract ${item.contractName}, which is not configured`);
      contract = await compileContract(item.contractName, raw, { baseDir });
      compiled.set(item.contractName, contract);
    }
    // Routes sharing a contract share certifications: verify each provider once per fingerprint.
    const key = `${item.provider}\u0000${contract.fingerprint}`;
    if (done.has(key)) continue;
    done.add(key);
    const providerConfig = config.providers[item.provider] as unknown as ProviderConfig & Record<string, unknown>;
    const provider = make(item.provider, providerConfig);
    try {
      const report = await verifyProvider({
        route: item.route, providerName: item.provider, provider, providerConfig, contract, baseDir,
      });
      reports.push(report);
      await params.store.recordCertification(certificationOf(report));
    } finally {
      await provider.close();
    }
  }
  const passed = reports.every((r) => r.passed);
  params.stdout.write(params.json ? JSON.stringify({ passed, reports }, null, 2) + '\n' : formatVerifyTable(reports));
  return passed ? 0 : VERIFY_FAILED_EXIT_CODE;
}

/**
 * The certification row of a report (passed or not: a failed verdict replaces an earlier pass).
 *
 * @example await store.recordCertification(certificationOf(report));
 */
export function certificationOf(report: VerifyReport): CertificationRow {
  return {
    provider: report.provider,
    model: report.model,
    contractFingerprint: report.contractFingerprint,
    route: report.route,
    passed: report.passed,
    report,
    verifiedAt: new Date(report.finishedAt),
  };
}
