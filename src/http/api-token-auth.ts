/**
 * Bearer-token authentication: `Authorization: Bearer <token>` → owner.
 *
 * Tokens are compared in constant time: the presented token and every
 * configured one are hashed to fixed-length SHA-256 digests and compared with
 * `crypto.timingSafeEqual`, always against every configured token, so neither
 * the position of a match nor a token's length leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** Resolves a request's `Authorization` header to its owner, or null. */
export type ApiTokenAuthenticator = (authorization: string | undefined) => string | null;

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/**
 * Builds the authenticator for a token → owner map.
 *
 * @example const auth = createApiTokenAuthenticator({ tok_alice: 'alice' }); auth('Bearer tok_alice') // 'alice'
 */
export function createApiTokenAuthenticator(apiKeys: Readonly<Record<string, string>>): ApiTokenAuthenticator {
  const entries = Object.entries(apiKeys).map(([token, owner]) => ({ digest: digest(token), owner }));
  return (authorization) => {
    if (authorization === undefined) return null;
    const match = /^Bearer +([!-~]+) *$/i.exec(authorization);
    if (!match) return null;
    const presented = digest(match[1] as string);
    let owner: string | null = null;
    for (const entry of entries) {
      if (timingSafeEqual(presented, entry.digest) && owner === null) owner = entry.owner;
    }
    return owner;
  };
}
