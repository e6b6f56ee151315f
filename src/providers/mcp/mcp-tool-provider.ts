/**
 * One upstream MCP tool as a provider (CONTRACT §14): the executor runs a
 * tool job's attempt through it like any provider's, and needs no MCP
 * knowledge. The attempt's input is `{"arguments": …}`; the call goes
 * upstream as `tools/call` with `params._meta["onejob/idempotencyKey"]` set
 * to the attempt's id, so a tool server that honours it can dedupe too.
 *
 * The outcome is classified once, as for HTTP providers:
 * - a `CallToolResult` (also one with `isError: true`: the tool ran and said
 *   so) → success, the job's result exactly as received;
 * - no connection, or the signal fired before the request was handed over,
 *   or a JSON-RPC error saying the request was refused (parse error,
 *   invalid request, unknown method, invalid params), or an HTTP 4xx → a
 *   definite failure (not executed);
 * - the connection lost after sending, the deadline, an internal error, an
 *   HTTP 5xx, a result that is not a tool result → ambiguous (`unknown`).
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ChatRequest, NormalizedCompletion, Provider, ProviderError, ProviderErrorCode, ProviderOutcome, ProviderRequest } from '../provider.ts';
import { McpConnectError, type McpUpstream } from './mcp-upstream.ts';

/** The `_meta` member carrying an idempotency key, to onejob (from a client) and from onejob (to a tool server). */
export const MCP_IDEMPOTENCY_KEY_META = 'onejob/idempotencyKey';

/** The route (and provider) name of tool `tool` of server `server`: `mcp:<server>.<tool>`. */
export function mcpRouteOf(server: string, tool: string): string {
  return `mcp:${server}.${tool}`;
}

/** The server and tool a `mcp:<server>.<tool>` name (or a `<server>.<tool>` tool name) means, or null. */
export function parseMcpToolName(name: string): { server: string; tool: string } | null {
  const bare = name.startsWith('mcp:') ? name.slice(4) : name;
  const dot = bare.indexOf('.');
  if (dot <= 0 || dot === bare.length - 1) return null;
  return { server: bare.slice(0, dot), tool: bare.slice(dot + 1) };
}

/** JSON-RPC errors that say the request was refused before anything ran. */
const REFUSED_CODES = new Set<number>([ErrorCode.ParseError, ErrorCode.InvalidRequest, ErrorCode.MethodNotFound, ErrorCode.InvalidParams]);

/** Connection errors that mean nothing reached the server. */
const UNREACHABLE_CAUSES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * The provider `mcp:<server>.<tool>`.
 *
 * @example
 * const provider = new McpToolProvider(upstream, 'charge');
 * const outcome = await provider.call({ input: { arguments: { amount: 5 } } as never, jobId, attemptId, attemptNumber: 1, signal });
 */
export class McpToolProvider implements Provider {
  readonly name: string;
  readonly type = 'mcp' as const;
  readonly model: string;
  readonly contextWindow = null;
  readonly #upstream: McpUpstream;
  readonly #tool: string;

  constructor(upstream: McpUpstream, tool: string) {
    this.#upstream = upstream;
    this.#tool = tool;
    this.name = mcpRouteOf(upstream.name, tool);
    this.model = `${upstream.name}.${tool}`;
  }

  /** The server's `timeoutMs`: past it the attempt is `unknown`. */
  get timeoutMs(): number {
    return this.#upstream.config.timeoutMs;
  }

  unsupportedMembers(_input: ChatRequest): string[] {
    return [];
  }

  /** A tool call is never streamed: the same as {@link call}. */
  stream(request: ProviderRequest): Promise<ProviderOutcome> {
    return this.call(request);
  }

  async call(request: ProviderRequest): Promise<ProviderOutcome> {
    const input = request.input as unknown;
    const args = typeof input === 'object' && input !== null ? (input as { arguments?: unknown }).arguments : undefined;
    if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
      return this.#failure('invalid_input', 'before_send', 'a tool job\'s input is {"arguments": {…}}');
    }
    let sent = false;
    try {
      const result = await this.#upstream.callTool(
        { name: this.#tool, arguments: args as Record<string, unknown> | undefined, _meta: { [MCP_IDEMPOTENCY_KEY_META]: request.attemptId, 'onejob/jobId': request.jobId } },
        {
          signal: request.signal,
          onSent: () => {
            sent = true;
            try {
              request.onDispatched?.();
            } catch {
              // ignored, as the interface says
            }
          },
        },
      );
      if (!Array.isArray(result.content) && result.structuredContent === undefined && result.toolResult === undefined) {
        return this.#ambiguous('malformed_response', 'after_body', 'the tool answered something that is not a tool result');
      }
      return { kind: 'success', completion: this.#completionOf(result), raw: result, result };
    } catch (error) {
      return this.#classify(error, sent, request.signal);
    }
  }

  async close(): Promise<void> {
    // The upstream's connection belongs to its McpUpstream (shared by every tool of the server).
  }

  #classify(error: unknown, sent: boolean, signal: AbortSignal): ProviderOutcome {
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof McpConnectError) return this.#failure('provider_unreachable', 'before_send', message, error);
    if (!sent) return this.#failure(signal.aborted ? 'aborted_before_send' : 'provider_unreachable', 'before_send', message, error);
    if (signal.aborted) return this.#ambiguous('aborted_after_send', 'after_send', `the call was stopped after it was sent: ${message}`, error);
    if (error instanceof McpError) {
      if (REFUSED_CODES.has(error.code)) return this.#failure('provider_rejected', 'after_body', message, error, { jsonrpc_code: error.code });
      if (error.code === ErrorCode.ConnectionClosed) return this.#ambiguous('connection_lost', 'after_send', message, error);
      if (error.code === ErrorCode.RequestTimeout) return this.#ambiguous('aborted_after_send', 'after_send', message, error);
      return this.#ambiguous('provider_server_error', 'after_body', message, error, { jsonrpc_code: error.code });
    }
    if (error instanceof StreamableHTTPError && error.code !== undefined) {
      if (error.code === 429) return this.#failure('provider_rate_limited', 'after_headers', message, error, { status: error.code });
      if (error.code >= 400 && error.code < 500 && error.code !== 408 && error.code !== 409) return this.#failure('provider_rejected', 'after_headers', message, error, { status: error.code });
      return this.#ambiguous('provider_server_error', 'after_headers', message, error, { status: error.code });
    }
    const cause = (error as { cause?: { code?: string } } | null)?.cause?.code;
    if (cause !== undefined && UNREACHABLE_CAUSES.has(cause)) return this.#failure('provider_unreachable', 'before_send', message, error, { cause_code: cause });
    return this.#ambiguous('connection_lost', 'after_send', message, error, cause === undefined ? {} : { cause_code: cause });
  }

  #error(code: ProviderErrorCode, phase: ProviderError['details']['phase'], message: string, cause: unknown, extra: Record<string, unknown>): ProviderError {
    return { code, message, details: { provider: this.name, phase, ...extra }, cause };
  }

  #failure(code: ProviderErrorCode, phase: ProviderError['details']['phase'], message: string, cause?: unknown, extra: Record<string, unknown> = {}): ProviderOutcome {
    return { kind: 'failure', error: this.#error(code, phase, message, cause, extra) };
  }

  #ambiguous(code: ProviderErrorCode, phase: ProviderError['details']['phase'], message: string, cause?: unknown, extra: Record<string, unknown> = {}): ProviderOutcome {
    return { kind: 'ambiguous', error: this.#error(code, phase, message, cause, extra) };
  }

  /** A completion view of a tool result (its text blocks); the job's result is the tool result itself. */
  #completionOf(result: Record<string, unknown>): NormalizedCompletion {
    const blocks = Array.isArray(result.content) ? (result.content as { type?: unknown; text?: unknown }[]) : [];
    const text = blocks.filter((b) => b?.type === 'text' && typeof b.text === 'string').map((b) => b.text as string).join('\n');
    return {
      content: text, finish_reason: result.isError === true ? 'tool_error' : 'stop', model: this.model, provider: this.name,
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, tool_calls: null,
    };
  }
}
