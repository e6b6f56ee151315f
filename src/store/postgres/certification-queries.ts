/**
 * Named SQL of the `certifications` table (PostgreSQL).
 */
import type { CertificationRow, CertificationVerdict } from '../driver.ts';
import type { Queryable } from './queryable.ts';

/** The statements of this file, by name. */
export const CERTIFICATION_SQL = {
  upsert: {
    name: 'onejob_certification_upsert',
    text: `INSERT INTO certifications (provider, model, contract_fingerprint, route, passed, report, verified_at)
VALUES ($1, $2, $3, $4, $5, $6::json, $7)
ON CONFLICT (provider, model, contract_fingerprint) DO UPDATE SET
  route = EXCLUDED.route, passed = EXCLUDED.passed, report = EXCLUDED.report, verified_at = EXCLUDED.verified_at`,
  },
  list: {
    name: 'onejob_certification_list',
    text: `SELECT provider, model, contract_fingerprint, route, passed, report, verified_at FROM certifications ORDER BY provider, model, verified_at`,
  },
  // A routing decision's read: the primary key's leading column, no report.
  verdicts: {
    name: 'onejob_certification_verdicts',
    text: `SELECT provider, model, contract_fingerprint, passed FROM certifications WHERE provider = ANY($1::text[])`,
  },
} as const;

interface CertificationDbRow {
  provider: string;
  model: string;
  contract_fingerprint: string;
  route: string | null;
  passed: boolean;
  report: unknown;
  verified_at: Date;
}

/** See {@link DriverQueries.certificationUpsert}. */
export async function certificationUpsert(db: Queryable, r: CertificationRow): Promise<void> {
  await db.query({
    ...CERTIFICATION_SQL.upsert,
    values: [r.provider, r.model, r.contractFingerprint, r.route, r.passed, JSON.stringify(r.report ?? null), r.verifiedAt],
  });
}

/** See {@link DriverQueries.certificationList}. */
export async function certificationList(db: Queryable): Promise<CertificationRow[]> {
  const res = await db.query<CertificationDbRow>({ ...CERTIFICATION_SQL.list, values: [] });
  return res.rows.map((row) => ({
    provider: row.provider,
    model: row.model,
    contractFingerprint: row.contract_fingerprint,
    route: row.route,
    passed: row.passed,
    report: row.report,
    verifiedAt: new Date(row.verified_at),
  }));
}

/** See {@link DriverQueries.certificationVerdicts}. */
export async function certificationVerdicts(db: Queryable, providers: readonly string[]): Promise<CertificationVerdict[]> {
  if (providers.length === 0) return [];
  const res = await db.query<Pick<CertificationDbRow, 'provider' | 'model' | 'contract_fingerprint' | 'passed'>>({ ...CERTIFICATION_SQL.verdicts, values: [providers] });
  return res.rows.map((row) => ({ provider: row.provider, model: row.model, contractFingerprint: row.contract_fingerprint, passed: row.passed }));
}
