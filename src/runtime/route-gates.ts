/**
 * Each route's compiled contract and certification gate, built from the
 * config alone (no providers): what the runtime, and admin commands that
 * may cause a failover (`onejob attempts resolve`), route with.
 *
 * A gate is decided on the database's certifications at each routing
 * decision: it is a `CertificationBoundCheck`, so the store reads the
 * chain's verdicts inside the transaction that routes (an index range of
 * the certifications' primary key). A `onejob verify` in any process,
 * passed or failed, takes effect on the very next decision of every process
 * (CONTRACT §5); nothing is cached between decisions. See docs/retention.md,
 * "Certification freshness".
 */
import { dirname } from 'node:path';
import type { OnejobConfig } from '../config/config.ts';
import { certificationGate, type CertificationView } from '../contracts/certification-gate.ts';
import { compileContract, type CompiledContract } from '../contracts/compile-contract.ts';
import { everyProviderEligible, type EligibilityCheck } from '../core/job-rules.ts';
import { certificationBound, type CertificationBoundCheck } from '../store/store.ts';

/**
 * Compiles the contract of every route that has one (each contract once).
 *
 * @returns compiled contracts by route name (routes without a contract are absent).
 */
export async function compileRouteContracts(config: OnejobConfig): Promise<Map<string, CompiledContract>> {
  const contracts = new Map<string, CompiledContract>();
  const baseDir = config.configPath ? dirname(config.configPath) : process.cwd();
  const compiled = new Map<string, CompiledContract>();
  for (const [route, rc] of Object.entries(config.routes)) {
    if (!rc.contract) continue;
    let c = compiled.get(rc.contract);
    if (!c) {
      c = await compileContract(rc.contract, config.contracts[rc.contract], { baseDir });
      compiled.set(rc.contract, c);
    }
    contracts.set(route, c);
  }
  return contracts;
}

/** The members of a job's input `provider` cannot express (none for an unknown provider). */
export type UnsupportedMembers = (provider: string, input: unknown) => readonly string[];

/**
 * `unsupported:<member>` for the first member of `input` the provider cannot
 * express, else null. Only chat inputs (objects) are asked; a check that
 * throws on a strange input refuses nothing (the adapter rejects it anyway).
 */
function unsupportedReason(unsupported: UnsupportedMembers, provider: string, input: unknown): string | null {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return null;
  let members: readonly string[];
  try {
    members = unsupported(provider, input);
  } catch {
    return null;
  }
  return members.length > 0 ? `unsupported:${members[0]}` : null;
}

/**
 * The certification gates of every route.
 *
 * @example
 * const gates = new RouteGates(config, await compileRouteContracts(config));
 * await store.settleAttempt({ …, eligible: gates.eligible(job.route) }); // decided on the verdicts read in that transaction
 */
export class RouteGates {
  readonly #gates = new Map<string, CertificationBoundCheck>();
  /** Each route's gate as of the verdicts seen last: answers direct calls only. */
  readonly #last = new Map<string, EligibilityCheck>();

  /** The input gate alone (routes without a contract); every provider eligible without `unsupported`. */
  readonly #inputOnly: EligibilityCheck;

  /**
   * @param unsupported the members of a job's input a provider's protocol
   *   cannot express (`Provider.unsupportedMembers`); a provider with any is
   *   refused with `unsupported:<first>` (CONTRACT §7). Absent: none.
   */
  constructor(config: OnejobConfig, contracts: ReadonlyMap<string, CompiledContract>, unsupported?: UnsupportedMembers) {
    const models = Object.fromEntries(Object.entries(config.providers).map(([n, p]) => [n, p.model]));
    const withMembers = (gate: EligibilityCheck): EligibilityCheck =>
      unsupported === undefined ? gate : (provider, kind, input) => gate(provider, kind, input) ?? unsupportedReason(unsupported, provider, input);
    this.#inputOnly = withMembers(everyProviderEligible);
    for (const [route, rc] of Object.entries(config.routes)) {
      const contractFingerprint = contracts.get(route)?.fingerprint ?? null;
      if (contractFingerprint === null) continue; // nothing to certify: only the input gate
      const decide = (certifications: readonly CertificationView[]): EligibilityCheck => {
        const gate = certificationGate({ certifications, chain: rc.providers, contractFingerprint, models });
        this.#last.set(route, gate);
        return withMembers(gate);
      };
      this.#gates.set(
        route,
        certificationBound(rc.providers, decide, withMembers((provider, kind) => (this.#last.get(route) ?? certificationGate({ certifications: [], chain: rc.providers, contractFingerprint, models }))(provider, kind))),
      );
    }
  }

  /** Whether any route has something to certify. */
  get any(): boolean {
    return this.#gates.size > 0;
  }

  /**
   * The gate of `route` (every provider eligible for an unknown route or one
   * without a contract). Given to the store, it is decided on the
   * certifications read in the routing transaction.
   */
  readonly eligible = (route: string): EligibilityCheck => this.#gates.get(route) ?? this.#inputOnly;

  /** Updates what direct calls of the gates answer (routing decisions read afresh anyway). */
  remember(certifications: readonly CertificationView[]): void {
    for (const gate of this.#gates.values()) gate.withVerdicts(certifications);
  }
}
