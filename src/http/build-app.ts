/**
 * The HTTP app (CONTRACT §3): Fastify with one error handler, bearer-token
 * auth, strict JSON, and routes grouped per resource.
 *
 * Request lifecycle, in order: `onRequest` authenticates every `/v1/`
 * request (401 before anything else: before the body is read, so before 413
 * or 400) and, for `POST /v1/jobs`, checks the Idempotency-Key; the body is
 * then read (limit → 413) and parsed strictly (→ 400); the schema is checked
 * (wrong shape → 422, bad query → 400); then the handler calls the store.
 * Every error, thrown anywhere, is rendered by {@link toProblem}.
 */
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { pino, type Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { OnejobError } from '../core/errors.ts';
import { systemClock, type Clock } from '../core/clock.ts';
import type { OnejobConfig } from '../config/config.ts';
import type { Store } from '../store/store.ts';
import { SHARED_SCHEMAS } from './api-schemas.ts';
import { createApiTokenAuthenticator } from './api-token-auth.ts';
import { readOnlyRefusal } from './request-owner.ts';
import { addLogFields, type AppContext, type InlineRunner } from './app-context.ts';
import { JobWatch } from './job-watch.ts';
import { everyProviderEligible, type EligibilityCheck } from '../core/job-rules.ts';
import { createMetrics, storeMetricSources, type Metrics } from './metrics.ts';
import { toProblem } from './problem-details.ts';
import { registerServerTiming } from './server-timing.ts';
import { registerAttemptRoutes } from './routes/attempt-routes.ts';
import { registerCallbackRoutes, SIGNED_PATHS } from './routes/callback-routes.ts';
import type { Reconciler } from '../executor/reconciler.ts';
import { registerChatRoutes, type ChatRoutesOptions } from './routes/chat-routes.ts';
import { MESSAGES_PATH, registerMessagesRoutes } from './routes/messages-routes.ts';
import { registerResponsesRoutes } from './routes/responses-routes.ts';
import { registerJobRoutes } from './routes/job-routes.ts';
import { registerOpsRoutes } from './routes/ops-routes.ts';
import { registerUsageRoutes } from './routes/usage-routes.ts';
import { registerLimitRoutes } from './routes/limit-routes.ts';
import { registerEventRoutes } from './routes/event-routes.ts';
import { registerCertificationRoutes } from './routes/certification-routes.ts';
import { registerDoubtQueueRoutes } from './routes/doubt-queue-routes.ts';
import { registerDashboardRoutes } from './routes/dashboard-routes.ts';
import { MCP_PATH, registerMcpRoutes, type McpRoutesOptions } from './routes/mcp-routes.ts';
import type { McpUpstreams } from '../providers/mcp/mcp-upstreams.ts';
import { registerModelRoutes } from './routes/model-routes.ts';
import { registerBatchRoutes } from './routes/batch-routes.ts';
import { registerFileRoutes } from './routes/file-routes.ts';
import type { UploadLimits } from '../batches/file-upload.ts';
import { withOpenAiError } from './chat-completion.ts';
import { anthropicErrorOf } from './routes/messages-routes.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  readonly store: Store;
  readonly config: OnejobConfig;
  /** Batches (CONTRACT §17): upload limits (default 200 MB, 50,000 lines) and what wakes this process's batch runner. */
  readonly batches?: { readonly uploadLimits?: UploadLimits | undefined; readonly onChange?: (() => void) | undefined } | undefined;
  /** Where logs go. Default: a silent logger (pass a pino logger to see JSON lines). */
  readonly logger?: Logger | undefined;
  /** Default: the system clock. */
  readonly clock?: Clock | undefined;
  /** Default: new metrics on their own registry (give the executor's to share). */
  readonly metrics?: Metrics | undefined;
  /** Re-read interval of long-polls. Default 1000 ms. */
  readonly waitRecheckMs?: number | undefined;
  /** The certification gate of a route, for manual attempts (CONTRACT §5). Default: every provider eligible. */
  readonly eligible?: ((route: string) => EligibilityCheck) | undefined;
  /**
   * The executor of this process (`onejob serve` without `--no-executor`):
   * chat jobs lease their first attempt to it when created and it runs them
   * at once (docs/performance.md, the fast path). Default: none (every job
   * is queued and claimed by an executor).
   */
  readonly executor?: InlineRunner | undefined;
  /** `POST /v1/chat/completions`: its longest wait and its `Retry-After` (see {@link ChatRoutesOptions}). */
  readonly chatCompletions?: ChatRoutesOptions | undefined;
  /**
   * Asks providers about attempts in doubt for `POST /v1/attempts/{id}/check`
   * and applies the task callbacks of `POST /v1/attempts/{id}/callback`
   * (CONTRACT §11; not started here: the executors' reconcilers read the
   * queue). Default: none (check answers `lookup_unsupported`, callbacks 401).
   */
  readonly reconciler?: Reconciler | undefined;
  /**
   * The upstream MCP servers `/mcp` offers the tools of (CONTRACT §14): the
   * runtime's `mcp`. Default: none (`/mcp` lists no tools).
   */
  readonly mcp?: McpUpstreams | undefined;
  /** `/mcp`: its longest wait for a tool job (see {@link McpRoutesOptions}). */
  readonly mcpRoutes?: McpRoutesOptions | undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }); // a BOM stays in the text: JSON.parse refuses it, as before

/** The body as text; JSON must be UTF-8 (RFC 8259), so invalid bytes are a 400, never silently replaced. */
function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw Object.assign(new Error('the body is not valid UTF-8'), { code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 });
  }
}

/** How deeply a JSON body may nest; deeper documents are refused (400) before anything walks them recursively. */
export const MAX_JSON_DEPTH = 128;

/** Throws a 400 when `value` nests deeper than {@link MAX_JSON_DEPTH} (checked without recursion). */
function checkDepth(value: unknown): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth > MAX_JSON_DEPTH) {
      throw Object.assign(new Error(`the body nests deeper than ${MAX_JSON_DEPTH} levels`), { code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 });
    }
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
}

/** Parses a JSON body strictly: JSON only, no `__proto__` keys. */
function parseStrictJson(text: string): unknown {
  if (text.trim() === '') throw Object.assign(new Error('the body is empty'), { code: 'FST_ERR_CTP_EMPTY_JSON_BODY', statusCode: 400 });
  try {
    return JSON.parse(text, text.includes('__proto__') ? rejectProtoKey : undefined);
  } catch (cause) {
    throw Object.assign(new Error((cause as Error).message), { code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 });
  }
}

function rejectProtoKey(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new SyntaxError('the key "__proto__" is not allowed');
  return value;
}

/**
 * One log line per request, written when it completes, after authentication
 * and the handler have bound `owner`, `job_id` and `attempt_id` to it (an
 * "incoming request" line would be written before anyone knows the owner).
 */
class RequestLogController extends LogController {
  override incomingRequest(): void {}
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = { req: { method: request.method, url: request.url }, res: { statusCode: reply.statusCode }, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...fields, err: error }, 'request errored');
    else reply.log.info(fields, 'request completed');
  }
}

/**
 * Builds the app; call `app.listen()` or `app.inject()` on it. The store's
 * lifetime is the caller's: closing the app does not close the store.
 *
 * @example const app = buildApp({ store, config }); await app.listen({ port: 8080, host: '0.0.0.0' });
 */
export function buildApp(options: BuildAppOptions): FastifyInstance {
  const { store, config } = options;
  const logger = options.logger ?? pino({ level: 'silent' });
  const closing = new AbortController();
  // Every waiting request (long-poll, chat completion) listens for shutdown: no listener cap.
  setMaxListeners(0, closing.signal);
  const ctx: AppContext = {
    store,
    config,
    metrics: options.metrics ?? createMetrics(storeMetricSources(options.store)),
    clock: options.clock ?? systemClock,
    waitRecheckMs: options.waitRecheckMs ?? 1000,
    closing: closing.signal,
    eligible: options.eligible ?? (() => everyProviderEligible),
    jobs: new JobWatch({ store, recheckMs: options.waitRecheckMs ?? 1000 }),
    inline: options.executor ?? null,
    reconciler: options.reconciler ?? null,
  };
  const authenticate = createApiTokenAuthenticator(config.apiKeys);

  const app = Fastify({
    loggerInstance: logger,
    logController: new RequestLogController(),
    bodyLimit: config.bodyLimitBytes,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;

  // Request validation: bodies exactly as sent (no coercion, no stripping);
  // query strings and paths coerced from text.
  const bodyAjv = new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, discriminator: true, strict: false, allErrors: false });
  const partsAjv = new Ajv({ coerceTypes: true, useDefaults: true, removeAdditional: false, strict: false, allErrors: false });
  addFormats(bodyAjv);
  addFormats(partsAjv);
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') return partsAjv.compile(schema);
    const validate = bodyAjv.compile(schema);
    // A body schema with no required member makes the body optional (e.g. start an attempt).
    const optional = !Array.isArray((schema as { required?: unknown }).required);
    if (!optional) return validate;
    const optionalBody = (data: unknown): boolean => {
      if (data === undefined || data === null) {
        optionalBody.errors = null;
        return true;
      }
      const ok = validate(data);
      optionalBody.errors = validate.errors ?? null;
      return ok;
    };
    optionalBody.errors = null as typeof validate.errors;
    return optionalBody;
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      const value = parseStrictJson(decodeUtf8(body as Buffer));
      checkDepth(value);
      done(null, value);
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.addHook('preClose', async () => closing.abort());
  app.addHook('onClose', async () => ctx.jobs.close());
  registerServerTiming(app, ctx.metrics);
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (_request, reply) => {
    // The request id (the load balancer's X-Request-Id, else a new one) is answered and logged with every line.
    reply.header('x-request-id', _request.id);
  });
  /**
   * Authentication of the `/v1/` scope (CONTRACT §3): a hook of the scope
   * that holds the routes, so it runs for every spelling of a path the
   * router matched (`/%761/jobs` is `/v1/jobs` to the router, and so to this
   * hook). Runs before the body is read (401 before 413 or 400); a read-only
   * token may use only GET and HEAD unless a route says it is read-only too.
   */
  const requireCredential = async (request: FastifyRequest): Promise<void> => {
    const principal = authenticate(credentialOf(request));
    if (principal === null) throw new OnejobError('unauthorized', 'send Authorization: Bearer <token> with a configured API token');
    request.principal = principal;
    addLogFields(request, { owner: principal.owner });
    if (principal.readOnly && request.method !== 'GET' && request.method !== 'HEAD' && (request.routeOptions.config as RouteAccess | undefined)?.readOnlyAllowed !== true) {
      throw readOnlyRefusal();
    }
  };

  app.setErrorHandler((error, request, reply) => {
    const problem = toProblem(error);
    if (problem.unexpected) request.log.error({ err: error }, 'unexpected error');
    else if (problem.status >= 500) request.log.warn({ err: error, code: problem.body.code }, 'request failed');
    else request.log.info({ code: problem.body.code, status: problem.status }, 'request rejected');
    return reply.code(problem.status).headers(problem.headers).type('application/problem+json').send(problem.body);
  });
  // An unknown /v1/ path answers in the shape its SDK reads (CONTRACT §12): problem+json with OpenAI's `error`
  // member, or Anthropic's error body under /v1/messages; without a valid token it is 401, never a hint of what exists.
  app.setNotFoundHandler(async (request, reply) => {
    const path = routedPathOf(request.url);
    const v1 = isV1Path(path);
    // An unknown path spelled like the MCP gateway's is guarded as it is: 401 without a token, before any 404.
    const error =
      (v1 || isMcpPath(path)) && authenticate(credentialOf(request)) === null
        ? new OnejobError('unauthorized', 'send Authorization: Bearer <token> with a configured API token')
        : new OnejobError('not_found', `no route ${request.method} ${path}`, { details: { path } });
    const problem = toProblem(error);
    request.log.info({ code: problem.body.code, status: problem.status }, 'request rejected');
    reply.code(problem.status).headers(problem.headers);
    if (!v1) return reply.type('application/problem+json').send(problem.body);
    if (/^\/+v1\/+messages(\/|$)/i.test(path)) return reply.type('application/json; charset=utf-8').send(anthropicErrorOf(problem.body));
    return reply.type('application/problem+json').send(withOpenAiError(problem.body));
  });

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'onejob',
        version: '1',
        description: 'One job per intent: safe retries and fallbacks for provider calls. Errors are RFC 9457 problem documents with a stable `code`.',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
      tags: [
        { name: 'jobs', description: 'Idempotent jobs' },
        { name: 'attempts', description: 'Attempts of a job' },
        { name: 'openai', description: 'OpenAI-compatible endpoints' },
        { name: 'anthropic', description: 'Anthropic-compatible endpoints' },
        { name: 'operations', description: 'Health, readiness, metrics' },
      ],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  // Every /v1/ route lives in this scope, behind its authentication hook; nothing else does.
  app.register(async (v1) => {
    restrictScope(v1, isV1Path, 'is registered in the authenticated /v1/ scope but is not a /v1/ path');
    v1.addHook('onRequest', requireCredential);
    // The OpenAI SDKs read `error.message` / `error.code`: every problem of a /v1/ route carries that view too
    // (CONTRACT §12; /v1/messages turns it into Anthropic's error body in its own onSend, which runs after this one).
    v1.addHook('onSend', async (_request, reply, payload) => {
      const type = reply.getHeader('content-type');
      if (typeof payload !== 'string' || typeof type !== 'string' || !type.startsWith('application/problem+json')) return payload;
      try {
        return JSON.stringify(withOpenAiError(JSON.parse(payload) as Record<string, unknown>));
      } catch {
        return payload;
      }
    });
    registerJobRoutes(v1, ctx);
    registerAttemptRoutes(v1, ctx);
    registerChatRoutes(v1, ctx, options.chatCompletions);
    registerMessagesRoutes(v1, ctx, options.chatCompletions);
    registerResponsesRoutes(v1, ctx, options.chatCompletions);
    registerUsageRoutes(v1, ctx);
    registerLimitRoutes(v1, ctx);
    registerEventRoutes(v1, ctx);
    registerCertificationRoutes(v1, ctx);
    registerDoubtQueueRoutes(v1, ctx);
    registerModelRoutes(v1, ctx);
    registerFileRoutes(v1, ctx, options.batches?.uploadLimits);
    registerBatchRoutes(v1, ctx, options.batches?.onChange);
  });
  // The one /v1/ route that authenticates by signature, not by token (CONTRACT §11): its own scope and hook.
  app.register(async (signed) => {
    restrictScope(signed, (url) => SIGNED_PATHS.has(url), 'is registered in the signature-authenticated scope but is not one of its routes');
    registerCallbackRoutes(signed, ctx);
  });
  // The MCP gateway (CONTRACT §14): not under /v1/, behind the same authentication hook in a scope of its own.
  app.register(async (mcp) => {
    restrictScope(mcp, isMcpPath, 'is registered in the authenticated /mcp scope but is not an /mcp path');
    mcp.addHook('onRequest', requireCredential);
    registerMcpRoutes(mcp, ctx, options.mcp ?? null, options.mcpRoutes);
  });
  // Routes that need no token: health, readiness, metrics, the API document and the dashboard's assets.
  app.register(async (open) => {
    restrictScope(open, (url) => !isV1Path(url) && !isMcpPath(url), 'is a /v1/ or /mcp path registered outside the authenticated scopes');
    registerOpsRoutes(open, ctx);
    registerDashboardRoutes(open);
  });
  return app;
}

/**
 * Makes a scope refuse, at start-up, a route whose path does not belong in it (`allowed` false): the guard that a
 * route never lands outside the authentication it needs, or inside one it does not. Call it before the scope's routes.
 */
function restrictScope(scope: FastifyInstance, allowed: (url: string) => boolean, what: string): void {
  scope.addHook('onRoute', (route) => {
    for (const url of Array.isArray(route.url) ? route.url : [route.url]) if (!allowed(url)) throw new Error(`route ${url} ${what}`);
  });
}

/** A route's declaration of what a read-only token may do with it (route `config`). */
export interface RouteAccess {
  /** A non-GET route that changes nothing (a search, an MCP session's list calls): read-only tokens may call it. */
  readonly readOnlyAllowed?: boolean;
}

/** The path of a URL as the router sees it: without the query, percent-decoded (a malformed escape stays as sent). */
export function routedPathOf(url: string): string {
  const raw = url.split('?')[0] ?? '';
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** Whether a (decoded) path is under `/v1`, in any letter case, however its slashes and dot segments are spelled. */
export function isV1Path(path: string): boolean {
  const segments = path.split(/[/\\]+/).filter((s) => s !== '' && s !== '.');
  return segments[0]?.split(';')[0]?.toLowerCase() === 'v1' || segments.some((s) => s === '..');
}

/** Whether a (decoded) path is the MCP gateway's, in any letter case, however its slashes and dot segments are spelled. */
export function isMcpPath(path: string): boolean {
  const segments = path.split(/[/\\]+/).filter((s) => s !== '' && s !== '.');
  return segments[0]?.split(';')[0]?.toLowerCase() === MCP_PATH.slice(1) || segments.some((s) => s === '..');
}

/**
 * The credential of a request, as an `Authorization` value: the header
 * itself, or on `/v1/messages` (and only there) `x-api-key: <token>` as
 * Anthropic's clients send it (CONTRACT §3). `Authorization` wins when both
 * are sent. The route is the one the router matched, never the raw URL.
 */
function credentialOf(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) return authorization;
  const apiKey = request.headers['x-api-key'];
  if (typeof apiKey !== 'string' || apiKey === '') return undefined;
  // Matched routes by their pattern; an unknown path (the 404 answer) by its decoded spelling.
  const path = request.routeOptions.url ?? routedPathOf(request.url);
  return path === MESSAGES_PATH || path.startsWith(`${MESSAGES_PATH}/`) ? `Bearer ${apiKey}` : undefined;
}
