/**
 * Request body limits per endpoint (CONTRACT §3, v3). Every route reads at
 * most `bodyLimitBytes` (1 MiB by default: `POST /v1/jobs` and the rest);
 * the gateway endpoints, where a chat carries its images inline as base64,
 * opt into `gatewayBodyLimitBytes` (32 MiB by default; one endpoint may
 * have its own in `endpointBodyLimitBytes`) with {@link gatewayBodyLimit} in
 * their route options. Past its limit a body is `413 payload_too_large`,
 * after authentication and before it is parsed.
 */
import type { OnejobConfig } from '../config/config.ts';

/**
 * The route options of a gateway endpoint's body limit: spread them into the
 * route's options. `path` is the endpoint's own (its entry in
 * `endpointBodyLimitBytes` wins over `gatewayBodyLimitBytes`).
 *
 * @example app.post('/v1/chat/completions', { ...gatewayBodyLimit(ctx.config, '/v1/chat/completions'), schema, handler });
 */
export function gatewayBodyLimit(config: Pick<OnejobConfig, 'gatewayBodyLimitBytes'> & Partial<Pick<OnejobConfig, 'endpointBodyLimitBytes'>>, path?: string): { readonly bodyLimit: number } {
  const own = path === undefined ? undefined : config.endpointBodyLimitBytes?.[path];
  return { bodyLimit: own ?? config.gatewayBodyLimitBytes };
}
