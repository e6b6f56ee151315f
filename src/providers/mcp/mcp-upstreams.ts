/**
 * Every configured upstream MCP server of a process (`mcpServers`), shared
 * by the `/mcp` gateway (tool lists, read-only calls passed through) and the
 * executor (a tool job's attempts run through {@link McpUpstreams.providerFor}).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Provider } from '../provider.ts';
import type { McpServerConfig } from './mcp-server-config.ts';
import { McpToolProvider, parseMcpToolName } from './mcp-tool-provider.ts';
import { McpUpstream, type McpUpstreamOptions } from './mcp-upstream.ts';

/** A tool of an upstream, as the gateway offers it. */
export interface GatewayTool {
  readonly server: string;
  /** The upstream's own tool (its name unprefixed). */
  readonly tool: Tool;
}

/**
 * The upstream MCP servers of one process.
 *
 * @example
 * const upstreams = new McpUpstreams(config.mcpServers, { logger });
 * await upstreams.start();
 * const provider = upstreams.providerFor('mcp:payments.charge');
 */
export class McpUpstreams {
  readonly #servers = new Map<string, McpUpstream>();
  readonly #providers = new Map<string, Provider>();
  readonly #wrap: (provider: Provider) => Provider;
  readonly #listeners = new Set<(server: string) => void>();
  /** Each server's tool list as last read (JSON), to tell a change from a plain re-read. */
  readonly #listed = new Map<string, string>();

  /** `options.wrapProvider` wraps each tool provider once when it is made (the runtime traces them as it traces every provider). */
  constructor(configs: Readonly<Record<string, McpServerConfig>>, options: McpUpstreamOptions & { readonly wrapProvider?: ((provider: Provider) => Provider) | undefined } = {}) {
    for (const [name, config] of Object.entries(configs)) {
      const upstream = new McpUpstream(name, config, options);
      upstream.onToolsChanged = (tools) => this.#toolsRead(name, tools);
      this.#servers.set(name, upstream);
    }
    this.#wrap = options.wrapProvider ?? ((p) => p);
  }

  /** The configured server names. */
  get names(): string[] {
    return [...this.#servers.keys()];
  }

  /** Whether any server is configured. */
  get any(): boolean {
    return this.#servers.size > 0;
  }

  /** The upstream named `server`, or undefined. */
  server(server: string): McpUpstream | undefined {
    return this.#servers.get(server);
  }

  /** The provider of `mcp:<server>.<tool>` (made on first use), or undefined when the server is not configured. */
  providerFor(name: string): Provider | undefined {
    if (!name.startsWith('mcp:')) return undefined;
    const existing = this.#providers.get(name);
    if (existing) return existing;
    const parsed = parseMcpToolName(name);
    const upstream = parsed && this.#servers.get(parsed.server);
    if (!parsed || !upstream) return undefined;
    const provider = this.#wrap(new McpToolProvider(upstream, parsed.tool));
    this.#providers.set(name, provider);
    return provider;
  }

  /** Every server's tools; a server that cannot be reached now is left out (and logged by its upstream). */
  async tools(): Promise<GatewayTool[]> {
    const lists = await Promise.all([...this.#servers.values()].map(async (u) => {
      try {
        return (await u.tools()).map((tool) => ({ server: u.name, tool }));
      } catch {
        return [];
      }
    }));
    return lists.flat();
  }

  /**
   * Calls `listener(server)` whenever a server's tool list was read and
   * differs from the list read before (the first read, a read after
   * `notifications/tools/list_changed` or a reconnect), so the gateway can
   * tell its own clients. Returns the
   * unsubscribe function.
   */
  onToolsChanged(listener: (server: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #toolsRead(server: string, tools: readonly Tool[]): void {
    const listed = JSON.stringify(tools);
    const before = this.#listed.get(server);
    this.#listed.set(server, listed);
    if (before === listed) return;
    for (const listener of this.#listeners) listener(server);
  }

  /** Connects every server now (stdio children are started); never throws. */
  async start(): Promise<void> {
    await Promise.all([...this.#servers.values()].map((u) => u.start()));
  }

  /** Stops every server (stdio children are terminated). */
  async close(): Promise<void> {
    await Promise.all([...this.#servers.values()].map((u) => u.close()));
  }
}

/**
 * A process's providers by name, with the tool providers of `upstreams`
 * found on demand (`mcp:<server>.<tool>`, whatever tools the servers offer
 * now): what the executor is given, so it runs tool jobs like any other.
 */
export class ProvidersWithTools extends Map<string, Provider> {
  readonly #upstreams: McpUpstreams;

  constructor(providers: Iterable<[string, Provider]>, upstreams: McpUpstreams) {
    super(providers);
    this.#upstreams = upstreams;
  }

  override get(name: string): Provider | undefined {
    return super.get(name) ?? this.#upstreams.providerFor(name);
  }

  override has(name: string): boolean {
    return super.has(name) || this.#upstreams.providerFor(name) !== undefined;
  }
}
