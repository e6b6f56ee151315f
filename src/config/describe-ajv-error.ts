/**
 * One Ajv error as one line `path: reason`, the form every configuration
 * error of onejob takes (the config file, route contracts).
 */
import type { ErrorObject } from 'ajv';

/**
 * Describes `e`; `base` prefixes its path (`/contracts/summary`), and
 * `reasons` replaces Ajv's message for the keywords it names.
 *
 * @example describeAjvError(e, '/contracts/summary') // '/contracts/summary/cases: must NOT have fewer than 1 items'
 */
export function describeAjvError(e: ErrorObject, base = '', reasons: Readonly<Record<string, string>> = {}): string {
  let path = `${base}${e.instancePath}`;
  let reason = reasons[e.keyword] ?? e.message ?? 'is invalid';
  if (e.keyword === 'additionalProperties') {
    path = `${path}/${(e.params as { additionalProperty: string }).additionalProperty}`;
    reason = 'is not a known setting';
  } else if (e.keyword === 'required') {
    path = `${path}/${(e.params as { missingProperty: string }).missingProperty}`;
    reason = 'is required';
  } else if (e.keyword === 'enum') {
    reason = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return `${path === '' ? '(root)' : path}: ${reason}`;
}
