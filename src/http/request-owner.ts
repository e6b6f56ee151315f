/**
 * The principal of an authenticated request (CONTRACT §1, §3): the owner a
 * request acts for, read through one accessor that fails closed.
 *
 * Authentication runs as an `onRequest` hook of the scope that holds every
 * `/v1/` route (src/http/build-app.ts), so it runs for whatever spelling of
 * a path the router matched. A handler never reads a default owner: when no
 * credential was checked, {@link requestOwner} throws `unauthorized`, so a
 * route registered outside the guarded scope fails instead of acting for
 * nobody.
 */
import type { FastifyRequest } from 'fastify';
import { OnejobError } from '../core/errors.ts';

/** Who a checked credential speaks for. */
export interface Principal {
  /** The owner every read and write is scoped to. */
  readonly owner: string;
  /** A read-only token (`apiKeys` value `{ "owner", "readOnly": true }`): reads and live updates, nothing that changes a job. */
  readonly readOnly: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by authentication; null until a credential was checked. Read it through {@link requestOwner}. */
    principal: Principal | null;
  }
}

/**
 * The owner of an authenticated request; throws `unauthorized` when no
 * credential was checked for it.
 *
 * @example const job = await store.getJob(requestOwner(request), id);
 */
export function requestOwner(request: FastifyRequest): string {
  return requestPrincipal(request).owner;
}

/** The principal of an authenticated request; throws `unauthorized` when there is none. */
export function requestPrincipal(request: FastifyRequest): Principal {
  const principal = request.principal;
  if (principal === null || principal === undefined || principal.owner === '') {
    throw new OnejobError('unauthorized', 'send Authorization: Bearer <token> with a configured API token');
  }
  return principal;
}

/**
 * The owner of an authenticated request that may change something; throws
 * `unauthorized` without a credential and `read_only_token` (403) for a
 * read-only one.
 */
export function requestWriter(request: FastifyRequest): string {
  const principal = requestPrincipal(request);
  if (principal.readOnly) throw readOnlyRefusal();
  return principal.owner;
}

/** The `403 read_only_token` of a read-only token that asked to change something. */
export function readOnlyRefusal(): OnejobError {
  return new OnejobError('read_only_token', 'this API token is read-only: it can read jobs and follow them, not create, resolve or cancel');
}
