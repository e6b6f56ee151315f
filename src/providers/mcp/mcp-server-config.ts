/**
 * The configuration of one upstream MCP server (CONTRACT §14,
 * `"mcpServers": {"<name>": …}`), and its validation: every problem one line
 * naming the field, as the rest of the config reports them.
 */
import { isHttpUrl } from '../http-url.ts';

/** The default deadline of one upstream tool call (as for providers): past it the attempt is `unknown`. */
export const DEFAULT_MCP_TIMEOUT_MS = 20_000;

/** What a server's name may be: it is the `<server>` of `<server>.<tool>`, so no dot. */
export const MCP_SERVER_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * One upstream MCP server: a Streamable HTTP endpoint, or a command onejob
 * starts as a child process and speaks to over stdio (restarted when it
 * dies, stopped with onejob).
 *
 * @example { "url": "https://tools.example.com/mcp", "headers": { "Authorization": "Bearer env:TOOLS_TOKEN" } }
 * @example { "command": ["node", "payments-server.js"], "env": { "PAYMENTS_KEY": "env:PAYMENTS_KEY" }, "timeoutMs": 10000 }
 */
export type McpServerConfig = McpHttpServerConfig | McpStdioServerConfig;

/** Settings every upstream has. */
export interface McpServerConfigBase {
  /** One tool call's deadline in ms; past it the call's attempt is `unknown`. Default 20000. */
  readonly timeoutMs: number;
}

/** An upstream reached over the Streamable HTTP transport. */
export interface McpHttpServerConfig extends McpServerConfigBase {
  readonly url: string;
  /** Headers sent with every request (credentials, after `env:` resolution). */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  readonly command?: undefined;
}

/** An upstream onejob runs as a child process, speaking MCP over its stdin/stdout. */
export interface McpStdioServerConfig extends McpServerConfigBase {
  /** The executable and its arguments. */
  readonly command: readonly string[];
  /** Variables added to the child's environment (beside a safe default set: PATH, HOME, …). */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** The child's working directory. Default: onejob's. */
  readonly cwd?: string | undefined;
  readonly url?: undefined;
}

/**
 * Everything wrong with the config of server `name`, one line each
 * (`mcpServers.<name>.<field>: …`); empty when it is valid.
 *
 * @example mcpServerConfigProblems('pay', { url: 'ftp://x' }) // ['mcpServers.pay.url: must be an http(s) URL']
 */
export function mcpServerConfigProblems(name: string, config: unknown): string[] {
  const at = (field?: string) => `mcpServers.${name}${field === undefined ? '' : `.${field}`}`;
  if (!MCP_SERVER_NAME_PATTERN.test(name)) return [`${at()}: a server name is 1–64 letters, digits, "_" or "-" (it prefixes its tools as <server>.<tool>)`];
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return [`${at()}: must be an object with "url" or "command"`];
  const c = config as Record<string, unknown>;
  const problems: string[] = [];
  const hasUrl = c.url !== undefined;
  const hasCommand = c.command !== undefined;
  if (hasUrl === hasCommand) problems.push(`${at()}: give exactly one of "url" (Streamable HTTP) or "command" (stdio)`);
  for (const field of Object.keys(c)) {
    if (!['url', 'headers', 'command', 'env', 'cwd', 'timeoutMs'].includes(field)) problems.push(`${at(field)}: unknown setting (url, headers, command, env, cwd, timeoutMs)`);
  }
  if (hasUrl && !isHttpUrl(c.url)) problems.push(`${at('url')}: must be an http(s) URL`);
  if (hasCommand && (!Array.isArray(c.command) || c.command.length === 0 || !c.command.every((x) => typeof x === 'string' && x !== ''))) {
    problems.push(`${at('command')}: must be a non-empty array of strings, e.g. ["node", "server.js"]`);
  }
  if (hasUrl && (c.env !== undefined || c.cwd !== undefined)) problems.push(`${at(c.env !== undefined ? 'env' : 'cwd')}: only for a "command" server`);
  if (hasCommand && c.headers !== undefined) problems.push(`${at('headers')}: only for a "url" server`);
  for (const field of ['headers', 'env'] as const) {
    const v = c[field];
    if (v === undefined) continue;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) problems.push(`${at(field)}: must be an object of strings`);
    else for (const [k, x] of Object.entries(v)) if (typeof x !== 'string') problems.push(`${at(`${field}.${k}`)}: must be a string`);
  }
  if (c.cwd !== undefined && (typeof c.cwd !== 'string' || c.cwd === '')) problems.push(`${at('cwd')}: must be a non-empty string`);
  if (c.timeoutMs !== undefined && (typeof c.timeoutMs !== 'number' || !Number.isInteger(c.timeoutMs) || c.timeoutMs <= 0)) {
    problems.push(`${at('timeoutMs')}: must be a positive integer`);
  }
  return problems;
}

/** The validated config of server `name` with its defaults. Call {@link mcpServerConfigProblems} first. */
export function mcpServerConfigOf(config: Record<string, unknown>): McpServerConfig {
  const timeoutMs = (config.timeoutMs as number | undefined) ?? DEFAULT_MCP_TIMEOUT_MS;
  if (config.url !== undefined) {
    return { url: config.url as string, headers: config.headers as Record<string, string> | undefined, timeoutMs };
  }
  return {
    command: [...(config.command as string[])],
    env: config.env as Record<string, string> | undefined,
    cwd: config.cwd as string | undefined,
    timeoutMs,
  };
}
