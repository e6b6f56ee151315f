/**
 * Bearer-token authentication: `Authorization: Bearer <token>` → principal.
 *
 * Tokens are compared in constant time: the presented token and every
 * configured one are hashed to fixed-length SHA-256 digests and compared with
 * `crypto.timingSafeEqual`, always against every configured token, so neither
 * the position of a match nor a token's length leaks through timing.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { ApiKeyGrant } from '../config/config.ts';
import type { Principal } from './request-owner.ts';

/** Resolves a request's `Authorization` header to its principal, or null. */
export type ApiTokenAuthenticator = (authorization: string | undefined) => Principal | null;

function digest(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}

/** The principal an `apiKeys` value grants: an owner name, or `{ owner, readOnly }`. */
export function principalOf(grant: ApiKeyGrant): Principal {
  return typeof grant === 'string' ? { owner: grant, readOnly: false } : { owner: grant.owner, readOnly: grant.readOnly === true };
}

/**
 * Builds the authenticator for a token → owner map.
 *
 * @example const auth = createApiTokenAuthenticator({ tok_alice: 'alice' }); auth('Bearer tok_alice') // { owner: 'alice', readOnly: false }
 */
export function createApiTokenAuthenticator(apiKeys: Readonly<Record<string, ApiKeyGrant>>): ApiTokenAuthenticator {
  const entries = Object.entries(apiKeys).map(([token, grant]) => ({ digest: digest(token), principal: principalOf(grant) }));
  return (authorization) => {
    if (authorization === undefined) return null;
    const match = /^Bearer +([!-~]+) *$/i.exec(authorization);
    if (!match) return null;
    const presented = digest(match[1] as string);
    let principal: Principal | null = null;
    for (const entry of entries) {
      if (timingSafeEqual(presented, entry.digest) && principal === null) principal = entry.principal;
    }
    return principal !== null && principal.owner !== '' ? principal : null;
  };
}
