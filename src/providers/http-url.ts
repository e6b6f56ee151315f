/**
 * The one check the config runs on a provider's `baseUrl` and an MCP server's `url`.
 */

/**
 * Whether `value` is an absolute `http:` or `https:` URL.
 *
 * @example isHttpUrl('https://api.openai.com/v1') // true; isHttpUrl('file:///x') // false
 */
export function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
