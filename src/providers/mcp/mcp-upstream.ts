/**
 * One upstream MCP server as onejob uses it (CONTRACT §14): a connection made
 * with the official SDK's `Client` (Streamable HTTP, or stdio to a child
 * process onejob starts), the server's tool list kept and refreshed when the
 * server says it changed (`notifications/tools/list_changed`), and raw
 * `tools/call` requests.
 *
 * Life of the connection: opened on first use (or by {@link McpUpstream.start});
 * when it closes (an HTTP server gone, a child process that died) the next
 * use opens a new one, and a stdio child is restarted at once, with a
 * doubling pause (200 ms to 10 s) while it keeps dying. {@link McpUpstream.close}
 * stops it for good (the child is terminated).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';
import type { Logger } from 'pino';
import type { McpServerConfig } from './mcp-server-config.ts';

/** A tool call's answer exactly as the upstream sent it (checked to be an object, nothing stripped or defaulted). */
const ReceivedResultSchema = z.looseObject({});

/** Longest pause between restarts of a stdio server that keeps dying. */
const MAX_RESTART_PAUSE_MS = 10_000;

/** The connection could not be made: nothing was sent. */
export class McpConnectError extends Error {
  override readonly name = 'McpConnectError';
}

/** Options of {@link McpUpstream}. */
export interface McpUpstreamOptions {
  readonly logger?: Logger | undefined;
  /** The first pause before a dead stdio server is started again (doubling to 10 s). Default 200 ms. */
  readonly restartPauseMs?: number | undefined;
}

/**
 * One configured upstream MCP server.
 *
 * @example
 * const upstream = new McpUpstream('payments', { command: ['node', 'payments.js'], timeoutMs: 10_000 });
 * const tools = await upstream.tools();
 * const result = await upstream.callTool({ name: 'charge', arguments: { amount: 5 } }, { signal });
 */
export class McpUpstream {
  readonly name: string;
  readonly config: McpServerConfig;
  readonly #log: Logger | undefined;
  readonly #restartPauseMs: number;
  #client: Client | null = null;
  #stdio: StdioClientTransport | null = null;
  #connecting: Promise<Client> | null = null;
  #tools: readonly Tool[] | null = null;
  #toolsLoading: Promise<readonly Tool[]> | null = null;
  #closed = false;
  #restartTimer: NodeJS.Timeout | null = null;
  #pause: number;
  /** How many times the connection was opened (1 after the first). */
  connections = 0;
  /** Called after the tool list was read anew (first load, list_changed, a reconnect). */
  onToolsChanged: ((tools: readonly Tool[]) => void) | null = null;

  constructor(name: string, config: McpServerConfig, options: McpUpstreamOptions = {}) {
    this.name = name;
    this.config = config;
    this.#log = options.logger?.child({ mcp_server: name });
    this.#restartPauseMs = options.restartPauseMs ?? 200;
    this.#pause = this.#restartPauseMs;
  }

  /** The process id of a stdio server's running child, or null. */
  get pid(): number | null {
    return this.#stdio?.pid ?? null;
  }

  /** Whether a connection is open now. */
  get connected(): boolean {
    return this.#client !== null;
  }

  /** Opens the connection now (a stdio server is started); failures are logged and retried on use, never thrown. */
  async start(): Promise<void> {
    await this.tools().catch((e: unknown) => this.#log?.warn({ err: e }, 'MCP server not reachable yet; it will be tried again on use'));
  }

  /**
   * The open connection, opened if needed.
   *
   * @throws McpConnectError when it cannot be opened (nothing was sent).
   */
  connection(): Promise<Client> {
    if (this.#closed) return Promise.reject(new McpConnectError(`MCP server ${this.name} is stopped`));
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.#open().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  /** The server's tools (its own names), read once per connection and again on list_changed. */
  async tools(): Promise<readonly Tool[]> {
    await this.connection();
    if (this.#tools) return this.#tools;
    return this.#loadTools();
  }

  /** The tools as last read, without any I/O (null before the first read). */
  get knownTools(): readonly Tool[] | null {
    return this.#tools;
  }

  /**
   * Sends `tools/call` and resolves with the upstream's result as received.
   * `onSent` is called once the request is handed to the open connection.
   * The signal is the only deadline (aborting sends `notifications/cancelled`).
   *
   * @throws McpConnectError before anything was sent; otherwise whatever the SDK rejects with (an `McpError`, a transport error, the signal's reason).
   */
  async callTool(
    params: { readonly name: string; readonly arguments?: Record<string, unknown> | undefined; readonly _meta?: Record<string, unknown> | undefined },
    options: { readonly signal: AbortSignal; readonly onSent?: (() => void) | undefined },
  ): Promise<Record<string, unknown>> {
    const client = await this.connection();
    if (options.signal.aborted) throw options.signal.reason;
    options.onSent?.();
    // No SDK timeout of its own (a day): the caller's signal is the deadline.
    return client.request({ method: 'tools/call', params: { ...params } }, ReceivedResultSchema, { signal: options.signal, timeout: 86_400_000 });
  }

  /** Stops for good: closes the connection and terminates a stdio child. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const connecting = this.#connecting;
    const client = this.#client;
    this.#client = null;
    await client?.close().catch(() => undefined);
    if (connecting) await connecting.then((c) => c.close()).catch(() => undefined);
  }

  async #open(): Promise<Client> {
    const client = new Client({ name: 'onejob', version: '1' }, { capabilities: {} });
    const transport = this.config.command !== undefined
      ? new StdioClientTransport({
          command: this.config.command[0]!,
          args: this.config.command.slice(1),
          env: { ...getDefaultEnvironment(), ...(this.config.env ?? {}) },
          cwd: this.config.cwd,
          stderr: 'pipe',
        })
      : new StreamableHTTPClientTransport(new URL(this.config.url), { requestInit: { headers: { ...(this.config.headers ?? {}) } } });
    client.onclose = () => this.#lost(client);
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      this.#log?.info('the MCP server says its tools changed: reading them again');
      await this.#loadTools().catch((e: unknown) => this.#log?.warn({ err: e }, 'reading the tools again failed'));
    });
    try {
      await client.connect(transport, { timeout: this.config.timeoutMs });
    } catch (cause) {
      await client.close().catch(() => undefined);
      if (this.config.command !== undefined) this.#scheduleRestart();
      throw new McpConnectError(`cannot connect to MCP server ${this.name}: ${(cause as Error).message}`, { cause });
    }
    if (transport instanceof StdioClientTransport) {
      this.#stdio = transport;
      transport.stderr?.on('data', (chunk: Buffer) => this.#log?.debug({ stderr: chunk.toString('utf8').slice(0, 2000) }, 'MCP server stderr'));
    }
    if (this.#closed) {
      await client.close().catch(() => undefined);
      throw new McpConnectError(`MCP server ${this.name} is stopped`);
    }
    this.#client = client;
    this.connections++;
    this.#tools = null;
    this.#log?.info({ pid: this.pid, connections: this.connections }, 'connected to the MCP server');
    setTimeout(() => {
      if (this.#client === client) this.#pause = this.#restartPauseMs;
    }, 30_000).unref();
    return client;
  }

  async #loadTools(): Promise<readonly Tool[]> {
    this.#toolsLoading ??= (async () => {
      const client = await this.connection();
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: this.config.timeoutMs });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      this.#tools = tools;
      this.onToolsChanged?.(tools);
      return tools;
    })().finally(() => {
      this.#toolsLoading = null;
    });
    return this.#toolsLoading;
  }

  /** The connection closed: forget it; a stdio child is started again. */
  #lost(client: Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    this.#stdio = null;
    if (this.#closed) return;
    this.#log?.warn('the MCP server connection closed');
    if (this.config.command !== undefined) this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    if (this.#closed || this.#restartTimer) return;
    const pause = this.#pause;
    this.#pause = Math.min(MAX_RESTART_PAUSE_MS, this.#pause * 2);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = null;
      if (this.#closed || this.#client) return;
      this.#log?.info({ pause_ms: pause }, 'starting the MCP server again');
      void this.tools().catch((e: unknown) => this.#log?.warn({ err: e }, 'the MCP server did not start'));
    }, pause);
    this.#restartTimer.unref();
  }
}
