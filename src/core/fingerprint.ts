/**
 * Request fingerprints: the SHA-256 of a canonical JSON form (RFC 8785, JCS).
 *
 * Two bodies that differ only in key order or insignificant whitespace have
 * the same fingerprint; the store compares fingerprints to tell a replay from
 * a reused key.
 */
import { createHash } from 'node:crypto';
import canonicalizeImport from 'canonicalize';
import { OnejobError } from './errors.ts';

const canonicalizeFn = canonicalizeImport as unknown as (value: unknown) => string | undefined;

/**
 * The RFC 8785 canonical JSON text of `value`.
 *
 * @example canonicalJson({ b: 2, a: 1 }) // '{"a":1,"b":2}'
 */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalizeFn(value);
  } catch (cause) {
    if (cause instanceof RangeError) throw new OnejobError('invalid_request', 'the request nests too deeply to fingerprint', { cause });
    throw cause;
  }
  if (text === undefined) throw new TypeError('value has no JSON representation');
  return text;
}

/**
 * The fingerprint of a request body: `sha256:` and the hex digest of its canonical JSON.
 *
 * @example fingerprint({ route: 'summarize', input: { a: 1 } })
 */
export function fingerprint(value: unknown): string {
  return 'sha256:' + createHash('sha256').update(canonicalJson(value)).digest('hex');
}
