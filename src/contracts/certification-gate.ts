/**
 * {@link certificationGate}: the eligibility check of CONTRACT §5, built from
 * the certifications in the database.
 *
 * Automatic traffic (failover, hedges) and manual attempts only go to a
 * provider certified for the route's current contract fingerprint and the
 * provider's current model. The first attempt on the route's first provider
 * is always allowed: the operator chose that primary.
 */
import type { EligibilityCheck } from '../core/job-rules.ts';

/** The parts of a stored certification the gate reads. */
export interface CertificationView {
  readonly provider: string;
  readonly model: string;
  readonly contractFingerprint: string;
  readonly passed: boolean;
}

/** Reasons the gate gives (recorded on the job as `skipped[].reason`). */
export const GateReason = {
  /** No verification of this provider against this contract was ever recorded. */
  NotCertified: 'not_certified',
  /** The latest verification of this (provider, model, contract) failed. */
  Failed: 'certification_failed: verification did not pass',
  /** Certified for an older version of the contract. */
  ContractChanged: 'certification_void: contract changed',
  /** Certified with another model. */
  ModelChanged: 'certification_void: model changed',
} as const;

/** Parameters of {@link certificationGate}. */
export interface CertificationGateParams {
  /** Every stored certification (`store.listCertifications()`). */
  readonly certifications: readonly CertificationView[];
  /** The route's provider chain; its first provider is the primary. */
  readonly chain: readonly string[];
  /** The fingerprint of the route's compiled contract; null when the route has no contract. */
  readonly contractFingerprint: string | null;
  /** Each provider's configured model, by provider name. */
  readonly models: Readonly<Record<string, string>>;
}

/**
 * The eligibility check for one route.
 *
 * - no contract: every provider is eligible;
 * - kind `first` on `chain[0]`: eligible;
 * - otherwise eligible only with a passed certification of
 *   (provider, its current model, the current fingerprint); else the reason
 *   says why (`not_certified`, `certification_failed: …`,
 *   `certification_void: contract changed` / `model changed`).
 *
 * @example
 * const eligible = certificationGate({ certifications: await store.listCertifications(), chain: route.providers, contractFingerprint: contract?.fingerprint ?? null, models });
 * eligible('fallback', 'failover') // null or 'not_certified'
 */
export function certificationGate(params: CertificationGateParams): EligibilityCheck {
  const fp = params.contractFingerprint;
  if (fp === null) return () => null;
  const primary = params.chain[0];
  const byProvider = new Map<string, CertificationView[]>();
  for (const c of params.certifications) {
    const list = byProvider.get(c.provider);
    if (list) list.push(c);
    else byProvider.set(c.provider, [c]);
  }
  return (provider, kind) => {
    if (kind === 'first' && provider === primary) return null;
    const model = params.models[provider];
    const certs = byProvider.get(provider) ?? [];
    if (model === undefined) return GateReason.NotCertified;
    const exact = certs.find((c) => c.model === model && c.contractFingerprint === fp);
    if (exact) return exact.passed ? null : GateReason.Failed;
    if (certs.some((c) => c.passed && c.model === model)) return GateReason.ContractChanged;
    if (certs.some((c) => c.passed && c.contractFingerprint === fp)) return GateReason.ModelChanged;
    if (certs.some((c) => c.passed)) return GateReason.ContractChanged;
    return GateReason.NotCertified;
  };
}
