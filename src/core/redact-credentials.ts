/**
 * The one redaction of credentials and account identifiers from text that
 * leaves the operator's side: a provider's error message reaches the logs
 * whole, and tenants (a job's `error`, an attempt's `error`, a stream's
 * `event: error`) only through {@link redactCredentials}. Pure.
 *
 * What is removed, wherever it stands in the text:
 * - the userinfo of a URL (`https://user:pass@host` → `https://[redacted]@host`);
 * - `Bearer`/`Basic`/`Token` credentials (`Authorization: Bearer …`);
 * - values after credential names (`api_key=…`, `"x-api-key": "…"`, `password: …`, `secret=…`, `access_token=…`);
 * - API keys by their vendors' shapes: `sk-…` (OpenAI, Anthropic `sk-ant-…`,
 *   masked ones such as `sk-proj-ab**********yz` included), `rk-`/`pk_live_…`,
 *   `xai-…`, `gsk_…`, `hf_…`, GitHub `ghp_…`/`github_pat_…`, GitLab `glpat-…`,
 *   Google `AIza…`, AWS `AKIA…`;
 * - organisation and project ids: `org-…`, `proj_…`.
 */

/** What stands in for a removed credential. */
export const REDACTED = '[redacted]';

const RULES: readonly (readonly [RegExp, string])[] = [
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]+@/gi, `$1${REDACTED}@`],
  [/\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=*-]{6,}/gi, `$1$2${REDACTED}`],
  [/\b((?:x-)?api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|secret|password|passwd|authorization)(["']?\s*[:=]\s*["']?)(?!\[redacted\]|(?:Bearer|Basic|Token)\s)[^\s"'&,;]+/gi, `$1$2${REDACTED}`],
  [/\b(?:sk|rk|pk)[-_][A-Za-z0-9_*-]{6,}/g, REDACTED],
  [/\b(?:xai-|gsk_|hf_|ghp_|gho_|ghs_|ghu_|github_pat_|glpat-)[A-Za-z0-9_-]{12,}/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED],
  [/\bA(?:KIA|SIA)[0-9A-Z]{16}\b/g, REDACTED],
  [/\borg-[A-Za-z0-9]{6,}/g, `org-${REDACTED}`],
  [/\bproj_[A-Za-z0-9]{6,}/g, `proj_${REDACTED}`],
];

/**
 * `text` with credentials and organisation ids replaced by `[redacted]`.
 *
 * @example redactCredentials('Incorrect API key provided: sk-proj-abc123def456. Organization org-AbC123xyz.')
 * // 'Incorrect API key provided: [redacted]. Organization org-[redacted].'
 */
export function redactCredentials(text: string): string {
  let out = text;
  for (const [pattern, replacement] of RULES) out = out.replace(pattern, replacement);
  return out;
}

/**
 * A copy of a flat record with every string value passed through
 * {@link redactCredentials} (numbers, booleans and nested values as they are).
 *
 * @example redactStrings({ status: 401, provider_message: 'bad key sk-abcdef123' }) // { status: 401, provider_message: 'bad key [redacted]' }
 */
export function redactStrings<T extends object>(record: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) out[key] = typeof value === 'string' ? redactCredentials(value) : value;
  return out as T;
}
