/**
 * `GET /v1/certifications`: every configured route × provider of its chain,
 * with the certification that decides it (CONTRACT §5) — for the dashboard.
 *
 * Certifications are not owner data (they describe the configuration), so
 * every authenticated owner sees the same table. A route's current contract
 * fingerprint is computed here the way the runtime computes it (the same
 * compiled contract), once per app.
 */
import { dirname } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { compileContract } from '../../contracts/compile-contract.ts';
import type { CertificationRow } from '../../store/driver.ts';
import { bearerSecurity, errorResponses } from '../api-schemas.ts';
import type { AppContext } from '../app-context.ts';

/** What the table says about one (route, provider). */
export const CertificationStatus = {
  /** The route has no contract: every provider of its chain is eligible. */
  NotRequired: 'not_required',
  /** A passed verification of (provider, its model, the current contract). */
  Passed: 'passed',
  /** The latest verification of (provider, its model, the current contract) failed. */
  Failed: 'failed',
  /** Verified, but for another model or an older contract: void. */
  Void: 'void',
  /** Never verified. */
  NotCertified: 'not_certified',
} as const;
export type CertificationStatus = (typeof CertificationStatus)[keyof typeof CertificationStatus];

const certificationSchema = {
  type: 'object',
  required: ['route', 'provider', 'model', 'contract', 'contract_fingerprint', 'status', 'eligible', 'reason', 'certification'],
  properties: {
    route: { type: 'string' },
    provider: { type: 'string' },
    model: { type: 'string', description: "The provider's configured model." },
    contract: { type: ['string', 'null'] },
    contract_fingerprint: { type: ['string', 'null'], description: "The route's current contract fingerprint." },
    status: { type: 'string', enum: Object.values(CertificationStatus) },
    eligible: { type: 'boolean', description: 'Whether failover and hedges may use this provider on this route now.' },
    reason: { type: ['string', 'null'], description: 'Why not, when not eligible.' },
    certification: {
      type: ['object', 'null'],
      description: 'The deciding record (exact match, else the latest of this provider).',
      properties: {
        model: { type: 'string' },
        contract_fingerprint: { type: 'string' },
        route: { type: ['string', 'null'] },
        passed: { type: 'boolean' },
        verified_at: { type: 'string', format: 'date-time' },
        report: {},
      },
    },
  },
} as const;

function certificationBody(c: CertificationRow) {
  return { model: c.model, contract_fingerprint: c.contractFingerprint, route: c.route, passed: c.passed, verified_at: c.verifiedAt.toISOString(), report: c.report };
}

/** Registers `GET /v1/certifications`. */
export function registerCertificationRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { config } = ctx;
  let fingerprints: Promise<Map<string, string | null>> | null = null;
  const fingerprintsOf = (): Promise<Map<string, string | null>> => {
    fingerprints ??= (async () => {
      const baseDir = config.configPath ? dirname(config.configPath) : process.cwd();
      const out = new Map<string, string | null>();
      for (const name of new Set(Object.values(config.routes).map((r) => r.contract).filter((c): c is string => c !== null))) {
        try {
          out.set(name, (await compileContract(name, config.contracts[name], { baseDir })).fingerprint);
        } catch {
          out.set(name, null);
        }
      }
      return out;
    })();
    return fingerprints;
  };

  app.get('/v1/certifications', {
    schema: {
      tags: ['certifications'],
      summary: 'Route × provider certifications (CONTRACT §5)',
      security: bearerSecurity,
      response: { 200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: certificationSchema } } }, ...errorResponses },
    },
    handler: async () => {
      const [rows, fps] = await Promise.all([ctx.store.listCertifications(), fingerprintsOf()]);
      const data = [];
      for (const [route, rc] of Object.entries(config.routes)) {
        const fp = rc.contract === null ? null : (fps.get(rc.contract) ?? null);
        const gate = ctx.eligible(route);
        for (const provider of rc.providers) {
          const model = config.providers[provider]?.model ?? '';
          const mine = rows.filter((c) => c.provider === provider).sort((a, b) => b.verifiedAt.getTime() - a.verifiedAt.getTime());
          const exact = fp === null ? undefined : mine.find((c) => c.model === model && c.contractFingerprint === fp);
          let status: CertificationStatus;
          if (rc.contract === null) status = CertificationStatus.NotRequired;
          else if (exact) status = exact.passed ? CertificationStatus.Passed : CertificationStatus.Failed;
          else if (mine.length > 0) status = CertificationStatus.Void;
          else status = CertificationStatus.NotCertified;
          const reason = gate(provider, 'failover');
          // A route without a contract is decided by no certification.
          const deciding = rc.contract === null ? undefined : (exact ?? mine[0]);
          data.push({
            route, provider, model, contract: rc.contract, contract_fingerprint: fp, status,
            eligible: reason === null, reason, certification: deciding ? certificationBody(deciding) : null,
          });
        }
      }
      return { data };
    },
  });
}
