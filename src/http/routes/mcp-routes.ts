/**
 * `/mcp`: onejob as a Model Context Protocol server (CONTRACT §14), one
 * execution per tool call. Built on the official SDK's `Server` and its
 * Streamable HTTP transport, in stateless mode: every POST is answered by a
 * server made for that request (the caller's principal and headers known),
 * so any process behind a load balancer answers any request, and nothing
 * about a session lives in memory. `GET` opens the transport's stream of
 * server-initiated messages, on which onejob sends
 * `notifications/tools/list_changed` when an upstream's tool list changed
 * (each process tells the clients whose stream it holds, from its own
 * upstream connections); `DELETE` answers `405` (no session to end).
 *
 * - `tools/list`: every upstream's tools as `<server>.<tool>`, with their
 *   schemas and annotations (as last read; refreshed on list_changed).
 * - `tools/call` of a tool annotated `readOnlyHint: true`: passed through,
 *   no job.
 * - any other `tools/call`: a job (route `mcp:<server>.<tool>`, input
 *   `{"arguments": …}`), keyed by `params._meta["onejob/idempotencyKey"]`,
 *   else the `Idempotency-Key` header, else the fingerprint of (server,
 *   tool, canonical arguments) in the keyless window. The executor runs
 *   the upstream call as the job's attempt; the answer is the stored
 *   `CallToolResult`, a tool result with `isError: true` naming the job
 *   when its outcome is unknown, or one saying the job is still running
 *   (and how to follow it) when the wait ended first.
 *
 * Authentication is the scope's (build-app.ts): the route is read-only
 * allowed, and a read-only token may list tools and call read-only ones only.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { isOnejobError, OnejobError } from '../../core/errors.ts';
import { fingerprint, isKeylessIdempotencyKey } from '../../core/fingerprint.ts';
import type { JobWithAttempts } from '../../core/types.ts';
import type { McpUpstreams } from '../../providers/mcp/mcp-upstreams.ts';
import { MCP_IDEMPOTENCY_KEY_META, mcpRouteOf, parseMcpToolName } from '../../providers/mcp/mcp-tool-provider.ts';
import { tracedCreateJob } from '../../tracing/tracing.ts';
import { DEFAULT_MCP_STREAM_LIFETIME_MS } from '../../config/config.ts';
import type { AppContext } from '../app-context.ts';
import { OwnerSlots } from '../owner-slots.ts';
import { requestPrincipal, type Principal } from '../request-owner.ts';
import { IDEMPOTENCY_KEY_PATTERN, idempotencyKeyOf, waitForJob, type CreationKey } from './job-routes.ts';

/** The path of the gateway. */
export const MCP_PATH = '/mcp';

/** Options of {@link registerMcpRoutes}. */
export interface McpRoutesOptions {
  /** The longest a `tools/call` waits for its job before answering "still running". Default `config.chatMaxWaitMs`. */
  readonly maxWaitMs?: number | undefined;
  /** The keep-alive comment interval of a `GET /mcp` stream. Default the SDK's (15 s). */
  readonly keepAliveMs?: number | undefined;
  /** How long a `GET /mcp` stream stays open; then it ends (the client opens another). Default `eventFeeds.lifetimeMs` (1 h). */
  readonly streamLifetimeMs?: number | undefined;
}

/** The `_meta` members onejob adds to every tool result it answers for a job (and, on a "still running" one, where to follow it). */
export const MCP_JOB_META = {
  jobId: 'onejob/jobId', idempotencyKey: MCP_IDEMPOTENCY_KEY_META, replayed: 'onejob/replayed', state: 'onejob/state', followUrl: 'onejob/followUrl',
} as const;

/** Registers `POST`, `GET` and `DELETE /mcp` in an authenticated scope. */
export function registerMcpRoutes(app: FastifyInstance, ctx: AppContext, upstreams: McpUpstreams | null, options: McpRoutesOptions = {}): void {
  const maxWaitMs = options.maxWaitMs ?? ctx.config.chatMaxWaitMs;
  // GET /mcp streams: the /v1/events rule (eventFeeds.maxPerOwner per owner, read-only tokens included), and a lifetime.
  const slots = new OwnerSlots('MCP streams', ctx.config.eventFeeds.maxPerOwner, 'eventFeeds.maxPerOwner');
  const lifetimeMs = options.streamLifetimeMs ?? ctx.config.eventFeeds.lifetimeMs ?? DEFAULT_MCP_STREAM_LIFETIME_MS;
  const listeners = new ListChangedListeners(options.keepAliveMs, lifetimeMs);
  const unsubscribe = upstreams?.onToolsChanged((server) => {
    app.log.info({ mcp_server: server, listeners: listeners.size }, 'an MCP server\'s tools changed: telling the connected clients');
    listeners.notify();
  });
  // Before the server closes: open streams would keep it from closing.
  app.addHook('preClose', async () => {
    unsubscribe?.();
    await listeners.close();
  });
  app.post(MCP_PATH, {
    // The session's list calls are reads; what a read-only token may call is decided per tool below.
    config: { readOnlyAllowed: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      const principal = requestPrincipal(request);
      const server = gatewayServer({ ctx, upstreams, principal, request, reply, maxWaitMs });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.setHeader('x-request-id', request.id);
      reply.hijack();
      reply.raw.on('close', () => {
        void transport.close().catch(() => undefined);
        void server.close().catch(() => undefined);
      });
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    },
  });
  app.get(MCP_PATH, {
    // Only notifications flow on this stream: any token may hold one.
    config: { readOnlyAllowed: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      // Refused (429) before anything is written; the slot is given back when the stream ends.
      const release = slots.take(requestPrincipal(request).owner);
      reply.raw.on('close', release);
      reply.raw.setHeader('x-request-id', request.id);
      reply.hijack();
      await listeners.open(request, reply);
    },
  });
  app.delete(MCP_PATH, { schema: { hide: true } }, async (_request: FastifyRequest, reply: FastifyReply) =>
    reply.code(405).header('allow', 'GET, POST').send({ jsonrpc: '2.0', error: { code: ErrorCode.ConnectionClosed, message: 'Method not allowed: this server keeps no session to end' }, id: null }));
}

/**
 * The `GET /mcp` streams this process holds: one SDK server and stateless
 * transport per stream, used only to send `notifications/tools/list_changed`
 * on it. A stream ends when its client goes or the app closes.
 */
class ListChangedListeners {
  readonly #open = new Set<{ server: Server; transport: StreamableHTTPServerTransport }>();
  readonly #keepAliveMs: number | undefined;
  readonly #lifetimeMs: number;

  constructor(keepAliveMs: number | undefined, lifetimeMs: number) {
    this.#keepAliveMs = keepAliveMs;
    this.#lifetimeMs = lifetimeMs;
  }

  get size(): number {
    return this.#open.size;
  }

  async open(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const server = new Server({ name: 'onejob', version: '1' }, { capabilities: { tools: { listChanged: true } } });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, ...(this.#keepAliveMs === undefined ? {} : { keepAliveMs: this.#keepAliveMs }) });
    const entry = { server, transport };
    // A stream does not live for ever: past its lifetime it ends, and the client opens a new one.
    const expire = setTimeout(() => reply.raw.end(), this.#lifetimeMs);
    expire.unref();
    reply.raw.on('close', () => {
      clearTimeout(expire);
      this.#open.delete(entry);
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(transport);
    // A refused GET (no `Accept: text/event-stream`: 406) is answered and closed by the transport itself.
    if (!reply.raw.destroyed) this.#open.add(entry);
    await transport.handleRequest(request.raw, reply.raw);
  }

  /** Sends `notifications/tools/list_changed` on every open stream. */
  notify(): void {
    for (const { server } of this.#open) void server.sendToolListChanged().catch(() => undefined);
  }

  async close(): Promise<void> {
    const open = [...this.#open];
    this.#open.clear();
    await Promise.all(open.map(async ({ server, transport }) => {
      await transport.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    }));
  }
}

interface GatewayRequest {
  readonly ctx: AppContext;
  readonly upstreams: McpUpstreams | null;
  readonly principal: Principal;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  readonly maxWaitMs: number;
}

/** The MCP server answering one HTTP request. */
function gatewayServer(g: GatewayRequest): Server {
  // The low-level Server: the gateway offers tools it learns at run time, with their JSON schemas as the upstreams give them.
  const server = new Server({ name: 'onejob', version: '1' }, { capabilities: { tools: { listChanged: true } } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = g.upstreams === null ? [] : await g.upstreams.tools();
    return { tools: tools.map(({ server: name, tool }) => ({ ...tool, name: `${name}.${tool.name}` }) satisfies Tool) };
  });
  server.setRequestHandler(CallToolRequestSchema, async (call) => {
    try {
      return await callTool(g, call.params);
    } catch (error) {
      throw asMcpError(error);
    }
  });
  return server;
}

async function callTool(g: GatewayRequest, params: { name: string; arguments?: Record<string, unknown> | undefined; _meta?: Record<string, unknown> | undefined }): Promise<CallToolResult> {
  const parsed = parseMcpToolName(params.name);
  const upstream = parsed && g.upstreams?.server(parsed.server);
  if (!parsed || !upstream) throw new McpError(ErrorCode.InvalidParams, `no tool ${JSON.stringify(params.name)}: tools are named <server>.<tool> (see tools/list)`, { code: 'not_found' });
  // The upstream must answer now, or nothing is created (CONTRACT §3: a server that cannot serve now creates nothing).
  let tools: readonly Tool[];
  try {
    tools = await upstream.tools();
  } catch (cause) {
    throw new OnejobError('unavailable', `MCP server ${parsed.server} cannot be reached now; nothing was created, try again later`, { cause, details: { server: parsed.server } });
  }
  const tool = tools.find((t) => t.name === parsed.tool);
  if (!tool) throw new McpError(ErrorCode.InvalidParams, `MCP server ${parsed.server} has no tool ${JSON.stringify(parsed.tool)}`, { code: 'not_found' });
  const args = params.arguments ?? {};
  if (tool.annotations?.readOnlyHint === true) {
    // Read-only: passed through, no job (CONTRACT §14).
    const { [MCP_IDEMPOTENCY_KEY_META]: _key, ...meta } = params._meta ?? {};
    return (await upstream.callTool({ name: parsed.tool, arguments: args, ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}) }, { signal: AbortSignal.timeout(upstream.config.timeoutMs) })) as CallToolResult;
  }
  if (g.principal.readOnly) {
    throw new OnejobError('read_only_token', `this API token is read-only: it may list tools and call read-only ones, not ${params.name}`);
  }
  const route = mcpRouteOf(parsed.server, parsed.tool);
  const key = toolCallKey(g, params._meta);
  const { ctx, request, reply } = g;
  const firstAttempt = key.keyless ? undefined : ctx.inline?.leaseForNewWork(route) ?? undefined;
  const leasedAt = performance.now();
  let result;
  try {
    result = await tracedCreateJob(ctx.store, request.headers, {
      ownerId: g.principal.owner, ...key, route, input: { arguments: args }, providers: [route],
      fingerprint: fingerprint({ endpoint: 'mcp', route, arguments: args }), firstAttempt, whenBusy: 'refuse',
    });
  } catch (error) {
    // The room reserved for the attempt comes back; a create that may have committed hands its lease back.
    firstAttempt?.afterCreate({ error }, g.principal.owner);
    if (isOnejobError(error, 'idempotency_key_reused')) ctx.metrics.conflicts.inc();
    throw error;
  }
  const { job, created, claimed } = result;
  if (created) ctx.metrics.jobsCreated.inc({ route });
  else ctx.metrics.replays.inc({ route });
  request.log.info({ job_id: job.id, route, created, state: job.state }, created ? 'tool job created' : 'tool call joined its job');
  const inline = ctx.inline;
  firstAttempt?.afterCreate({ claimed: Boolean(claimed && inline) }, g.principal.owner);
  let started = false;
  const start = claimed && inline ? () => {
    if (started) return;
    started = true;
    inline.adopt(claimed, leasedAt);
  } : undefined;
  if (start) setImmediate(start);
  const settled = await waitForJob(ctx, request, reply, job, g.maxWaitMs, start);
  return toolAnswerOf(settled, !created, g.maxWaitMs);
}

/** The key of a tool call (CONTRACT §14): `_meta`'s, the header's, else the keyless fingerprint (always on for /mcp). */
function toolCallKey(g: GatewayRequest, meta: Record<string, unknown> | undefined): CreationKey {
  const fromMeta = meta?.[MCP_IDEMPOTENCY_KEY_META];
  if (fromMeta !== undefined) {
    if (typeof fromMeta !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(fromMeta)) {
      throw new OnejobError('idempotency_key_invalid', `params._meta["${MCP_IDEMPOTENCY_KEY_META}"] must be 1–255 visible ASCII characters (! to ~)`);
    }
    return { idempotencyKey: fromMeta };
  }
  const header = g.request.headers['idempotency-key'];
  if (header !== undefined && header !== '') return { idempotencyKey: idempotencyKeyOf(g.request) };
  return { keyless: { windowMs: g.ctx.config.keyless.windowMs } };
}

/**
 * What a tool call answers for its job:
 * - succeeded: the stored result (the upstream's `CallToolResult` as
 *   received, or an operator's resolution: a result that is not a tool
 *   result is given as its JSON text and `structuredContent`);
 * - unknown: `isError: true`, naming the job and saying the outcome is unknown;
 * - still running when the wait (`waitedMs`) ended: a tool result (not an
 *   error: an error invites the model to call again, perhaps with other
 *   arguments, a second job) naming the job, saying it is still running and
 *   how to follow it (repeat this exact call, or `GET /v1/jobs/{id}?wait=…`,
 *   also in `_meta["onejob/followUrl"]`);
 * - failed, cancelled: a JSON-RPC error with `data.code`.
 * Every tool result carries `_meta["onejob/jobId"]`, `["onejob/idempotencyKey"]`, `["onejob/replayed"]`, `["onejob/state"]`.
 */
export function toolAnswerOf(job: JobWithAttempts, replayed: boolean, waitedMs?: number): CallToolResult {
  const meta = { [MCP_JOB_META.jobId]: job.id, [MCP_JOB_META.idempotencyKey]: job.idempotencyKey, [MCP_JOB_META.replayed]: replayed, [MCP_JOB_META.state]: job.state };
  const details = { job_id: job.id, idempotency_key: job.idempotencyKey };
  switch (job.state) {
    case 'succeeded': {
      const result = job.result;
      if (isToolResult(result)) return { ...result, _meta: { ...(isRecord(result._meta) ? result._meta : {}), ...meta } } as CallToolResult;
      return { content: [{ type: 'text', text: JSON.stringify(result) }], ...(isRecord(result) ? { structuredContent: result } : {}), _meta: meta };
    }
    case 'unknown': {
      const doubt = job.attempts.find((a) => a.state === 'unknown' || a.state === 'starting');
      const why = doubt?.error?.code === 'deadline_exceeded' ? 'did not answer in time' : doubt?.error?.code === 'lease_expired' ? 'was being called by a onejob process that stopped' : 'lost its connection';
      return {
        isError: true,
        content: [{
          type: 'text',
          text: `onejob: the outcome of this tool call is unknown. The tool server ${why} (job ${job.id}${doubt ? `, attempt ${doubt.id}` : ''}): it may or may not have run. ` +
            'It will not be called again for this request; repeating the call gives this answer until the attempt is resolved (POST /v1/attempts/{id}/resolve, the CLI or the dashboard) or the job is cancelled.',
        }],
        _meta: { ...meta, ...(doubt ? { 'onejob/attemptId': doubt.id } : {}) },
      };
    }
    case 'failed':
      throw new McpError(ErrorCode.InternalError, `job ${job.id} failed: ${job.error?.message ?? 'the tool call failed'}`, { code: 'job_failed', ...details, job_error: job.error });
    case 'cancelled':
      throw new McpError(ErrorCode.InvalidRequest, `job ${job.id} was cancelled`, { code: 'job_finished', ...details, state: job.state });
    default: {
      const followUrl = `/v1/jobs/${job.id}`;
      const waited = waitedMs === undefined ? '' : ` onejob waited ${Math.round(waitedMs / 1000)} s for it.`;
      return {
        content: [{
          type: 'text',
          text: `onejob: this tool call is still running (job ${job.id}, ${job.state}); it has not finished yet and it is not a failure.${waited} ` +
            'It runs once: do not call the tool again with other arguments, which would be a second, separate call. ' +
            `To get its result, repeat this exact call (${isKeylessIdempotencyKey(job.idempotencyKey) ? 'the same tool and arguments' : `the same tool, arguments and idempotency key ${job.idempotencyKey}`}): ` +
            'it waits for this job and runs nothing again. ' +
            `Or follow the job over onejob's API: GET ${followUrl}?wait=30.`,
        }],
        _meta: { ...meta, [MCP_JOB_META.followUrl]: followUrl },
      };
    }
  }
}

/** An onejob error as the JSON-RPC error the SDK answers: the contract's code in `data.code`. */
function asMcpError(error: unknown): unknown {
  if (!isOnejobError(error)) return error;
  const spec = error.spec;
  const code = spec.status >= 500 ? ErrorCode.InternalError : spec.status === 403 ? ErrorCode.InvalidRequest : ErrorCode.InvalidParams;
  return new McpError(code, error.message, { code: spec.apiCode ?? error.code, ...error.details });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isToolResult(v: unknown): v is Record<string, unknown> & { content: unknown[] } {
  return isRecord(v) && Array.isArray(v.content);
}
