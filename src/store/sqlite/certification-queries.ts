/**
 * Named SQL for the `certifications` table (SQLite), with the row mapping
 * both ways (parameters out, domain rows in).
 */
import type { CertificationRow, CertificationVerdict } from '../driver.ts';

export const CERTIFICATION_UPSERT = `
INSERT INTO certifications (provider, model, contract_fingerprint, route, passed, report, verified_at)
VALUES (@provider, @model, @contractFingerprint, @route, @passed, @report, @verifiedAt)
ON CONFLICT (provider, model, contract_fingerprint) DO UPDATE SET
  route = excluded.route, passed = excluded.passed, report = excluded.report, verified_at = excluded.verified_at`;

export const CERTIFICATION_LIST = `SELECT * FROM certifications ORDER BY provider, model, verified_at`;

/** A routing decision's read: the primary key's leading column, no report. */
export const CERTIFICATION_VERDICTS = `
SELECT provider, model, contract_fingerprint, passed FROM certifications WHERE provider IN (SELECT value FROM json_each(?))`;

/** A row of {@link CERTIFICATION_VERDICTS} as a domain record. */
export function toVerdict(row: Record<string, unknown>): CertificationVerdict {
  return { provider: String(row.provider), model: String(row.model), contractFingerprint: String(row.contract_fingerprint), passed: Number(row.passed) === 1 };
}

/** The named parameters of {@link CERTIFICATION_UPSERT} for `r`. */
export function certificationParams(r: CertificationRow): Record<string, unknown> {
  return {
    provider: r.provider, model: r.model, contractFingerprint: r.contractFingerprint, route: r.route,
    passed: r.passed ? 1 : 0, report: JSON.stringify(r.report ?? null), verifiedAt: r.verifiedAt.getTime(),
  };
}

/** A row of {@link CERTIFICATION_LIST} as a domain record. */
export function toCertification(row: Record<string, unknown>): CertificationRow {
  return {
    provider: String(row.provider),
    model: String(row.model),
    contractFingerprint: String(row.contract_fingerprint),
    route: row.route === null ? null : String(row.route),
    passed: Number(row.passed) === 1,
    report: JSON.parse(String(row.report)) as unknown,
    verifiedAt: new Date(Number(row.verified_at)),
  };
}
