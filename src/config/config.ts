/**
 * Configuration: a JSON file plus the environment (CONTRACT §4).
 *
 * {@link loadConfig} reads the file named by `--config`, else `ONEJOB_CONFIG`,
 * else `onejob.config.json` in the working directory when it exists; then the
 * environment overrides it (`DATABASE_URL`, `PORT`, `HOST`, `ONEJOB_API_KEYS`). String
 * values written `"env:NAME"` are read from the environment. The result is
 * validated with Ajv and every problem is reported with its path and reason as
 * one {@link OnejobError} `config_invalid`. See `docs/config.md`.
 */
import { PASS_THROUGH_KINDS, type PassThroughKind } from '../core/pass-through.ts';
import { existsSync, readFileSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { OnejobError } from '../core/errors.ts';
import { describeAjvError } from './describe-ajv-error.ts';
import { providerConfigProblems } from '../providers/create-provider.ts';
import { PRICING_SCHEMA } from './pricing.ts';
import { mcpServerConfigOf, mcpServerConfigProblems, type McpServerConfig } from '../providers/mcp/mcp-server-config.ts';
import { RETRY_SCHEMA } from './retry-policy.ts';
import { LIMITS_SCHEMA, MAX_OUTPUT_TOKENS_SCHEMA, limitsConfigOf } from './limits-config.ts';
import type { LimitsConfig } from '../core/limits.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

/** Provider types onejob knows how to call. Extend here when a new adapter lands. */
export const PROVIDER_TYPES = ['openai', 'anthropic', 'fake', 'task', 'openai-responses'] as const;
/** A provider type. */
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/** The default database when neither the file nor `DATABASE_URL` names one. */
export const DEFAULT_DATABASE_URL = 'sqlite:./onejob.db';
/** The default port of `onejob serve`. */
export const DEFAULT_PORT = 8080;
/** The listen address of a configured `onejob serve` that names none (the demo listens on {@link LOOPBACK_HOST}). */
export const DEFAULT_HOST = '0.0.0.0';
/** The listen address of the unconfigured demo: this machine only. */
export const LOOPBACK_HOST = '127.0.0.1';
/** How long a finished job (and so its idempotency key) is kept: 30 days. */
export const DEFAULT_FINISHED_JOBS_DAYS = 30;
/** The default request body limit: 1 MiB. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;
/**
 * The default body limit of the gateway endpoints (`/v1/chat/completions`,
 * `/v1/messages`, `/v1/responses`): 32 MiB, room for images sent inline as
 * base64 (CONTRACT §3, v3). A route opts in with `gatewayBodyLimit` (src/http/body-limits.ts).
 */
export const DEFAULT_GATEWAY_BODY_LIMIT_BYTES = 32 * 1024 * 1024;
/** The default cap of open `GET /v1/events` feeds per owner and process. */
export const DEFAULT_EVENT_FEEDS_PER_OWNER = 20;
/** The default re-read interval of the events feeds (changes made by other processes). */
export const DEFAULT_EVENT_FEEDS_POLL_MS = 2000;
/** The default server-side wait of `POST /v1/chat/completions`: 5 minutes, below the OpenAI SDK's 10-minute timeout. */
export const DEFAULT_CHAT_MAX_WAIT_MS = 300_000;
/** The default `timeoutMs`: to the answer of a non-streamed attempt, to the first output of a streamed one. */
export const DEFAULT_TIMEOUT_MS = 20_000;
/** How long a finished keyless job is replayed to the same body (CONTRACT §12): 10 minutes. */
export const DEFAULT_KEYLESS_WINDOW_MS = 600_000;
/** The default `idleTimeoutMs`: the longest silence between events of a stream after its first output. */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
/** The config file read when no path is given, if it exists. */
export const DEFAULT_CONFIG_FILE = 'onejob.config.json';

/** One configured provider. Unknown fields are kept for the provider's adapter. */
export interface ProviderConfig {
  readonly type: ProviderType;
  /** The API root; absent for a `fake` provider that runs its own embedded server. */
  readonly baseUrl?: string;
  /** The API key (after `env:` resolution), or null when the provider needs none (a local server). */
  readonly apiKey: string | null;
  readonly model: string;
  /** To the answer of a non-streamed attempt, to the first output of a streamed one; past it the attempt is `unknown` (`deadline_exceeded`). Default 20000. */
  readonly timeoutMs: number;
  /** The longest silence between a stream's events after its first output; past it the attempt is `unknown` (`stream_stalled`). Default 30000. */
  readonly idleTimeoutMs: number;
  /** The provider's promise that no request runs longer on its side, or null (none; the default). */
  readonly maxDurationMs: number | null;
  readonly [extra: string]: unknown;
}

/** One configured route: an ordered provider chain and its policies. */
export interface RouteConfig {
  /** Provider names, in failover order; each exists in `providers`. */
  readonly providers: readonly string[];
  /** Start a hedge after this much silence from a running attempt; null (default) means never. */
  readonly hedgeAfterMs: number | null;
  /** The name of the route's contract in `contracts`, or null. */
  readonly contract: string | null;
  /** Provider refusals returned to the caller instead of failing over (`["content_filter"]`); default none. See src/core/pass-through.ts. */
  readonly passThrough?: readonly PassThroughKind[] | undefined;
}

/** The validated configuration of one onejob process. */
export interface OnejobConfig {
  /** `sqlite:<path>`, `sqlite::memory:` or `postgres://…`. Default `sqlite:./onejob.db`. */
  readonly databaseUrl: string;
  /** HTTP port. Default 8080. */
  readonly port: number;
  /** HTTP listen address (`HOST` wins over the file). Default `0.0.0.0`; `onejob serve` without any configuration (the demo) uses 127.0.0.1. */
  readonly host: string;
  /** Whether `host` was given (file or `HOST`) rather than defaulted. */
  readonly hostConfigured: boolean;
  /** Retention of finished jobs (CONTRACT §9). */
  readonly retention: RetentionConfig;
  /** How executors keep answers through a database outage (docs/failure-modes.md). */
  readonly executor: ExecutorConfig;
  /** Largest accepted request body (`POST /v1/jobs` and every route but the gateway's). Default 1 MiB. */
  readonly bodyLimitBytes: number;
  /** Largest accepted body on the gateway endpoints (`/v1/chat/completions`, `/v1/messages`, `/v1/responses`). Default 32 MiB. */
  readonly gatewayBodyLimitBytes: number;
  /**
   * The largest conversation a `POST /v1/responses` may continue to
   * (`previous_response_id` expanded, plus this request's input), in bytes
   * of JSON; past it `413 conversation_too_large`. Default
   * `gatewayBodyLimitBytes`: a conversation no larger than one request could send.
   */
  readonly maxConversationBytes?: number | undefined;
  /** Per gateway endpoint (its path, e.g. `/v1/messages`): a body limit that replaces `gatewayBodyLimitBytes` there. Default none. */
  readonly endpointBodyLimitBytes: Readonly<Record<string, number>>;
  /** `GET /metrics` needs `Authorization: Bearer <metricsToken>` when set; null (default) leaves it open, as Prometheus expects. */
  readonly metricsToken: string | null;
  /** The `GET /v1/events` feeds: how many an owner may hold open (per process) and how often they re-read. */
  readonly eventFeeds: EventFeedsConfig;
  /** How long `POST /v1/chat/completions` waits for its job before answering "retry with the same key". Default 300000 (5 min). */
  readonly chatMaxWaitMs: number;
  /** Creates that send no Idempotency-Key (CONTRACT §12). Default `{ mode: "reject", windowMs: 600000 }`. */
  readonly keyless: KeylessConfig;
  /** Budgets and limits per owner (CONTRACT §16, docs/limits.md). Default: none. */
  readonly limits: LimitsConfig;
  /** Batch lines (CONTRACT §17): `maxShare` of an executor's concurrency they may take. Absent: `{ maxShare: 0.5 }`. */
  readonly batch?: { readonly maxShare: number } | undefined;
  /** API token → owner (a name), or `{ owner, readOnly: true }` for a read-only token (reads and live updates only). */
  readonly apiKeys: Readonly<Record<string, ApiKeyGrant>>;
  readonly providers: Readonly<Record<string, ProviderConfig>>;
  readonly routes: Readonly<Record<string, RouteConfig>>;
  /**
   * Upstream MCP servers whose tools `/mcp` offers as `<server>.<tool>`
   * (CONTRACT §14, docs/mcp.md). Default: none.
   */
  readonly mcpServers: Readonly<Record<string, McpServerConfig>>;
  /** Route contracts, kept as opaque objects for the contracts module. */
  readonly contracts: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** The absolute path of the file that was read, or null. */
  readonly configPath: string | null;
}

/**
 * What an API token grants: the owner it acts for, as a plain name, or
 * `{ "owner": "alice", "readOnly": true }` for a token that may read jobs and
 * follow them live but never create, resolve or cancel (403 `read_only_token`),
 * as the dashboard of an on-call viewer needs.
 */
export type ApiKeyGrant = string | { readonly owner: string; readonly readOnly?: boolean };

/** How executors keep answers through a database outage (docs/failure-modes.md). */
export interface ExecutorConfig {
  /** How long an answer in hand is held while the database is unreachable before it is given up. Default 600000 (10 min). */
  readonly answerHoldMs: number;
  /** Most answers held in memory at once per executor. Default 10000. */
  readonly maxHeldAnswers: number;
}

/** The owners' long-lived streams: live feeds `GET /v1/events` (docs/dashboard.md), `GET /mcp` streams, stream followers. */
export interface EventFeedsConfig {
  /** Open feeds one owner may hold on one process; one more is `429 too_many_requests`. The same bound holds, counted apart, for `GET /mcp` streams. Default 20. */
  readonly maxPerOwner: number;
  /** How often an owner's feeds re-read the event log for changes made by other processes (one read per owner, shared by its feeds). Default 2000 ms. */
  readonly pollMs: number;
  /** A `GET /mcp` notification stream ends after this long (MCP clients open a new one). Default 3 600 000 (1 h). */
  readonly lifetimeMs?: number | undefined;
  /** SSE followers of job streams (a duplicate or a resume, `GET /v1/responses/{id}?stream=true`) one owner may hold on one process; one more is `429`. Default 100. */
  readonly maxFollowersPerOwner?: number | undefined;
}

/** Default of {@link EventFeedsConfig.lifetimeMs}. */
export const DEFAULT_MCP_STREAM_LIFETIME_MS = 3_600_000;
/** Default of {@link EventFeedsConfig.maxFollowersPerOwner}. */
export const DEFAULT_STREAM_FOLLOWERS_PER_OWNER = 100;

/**
 * Callers that send no Idempotency-Key (CONTRACT §12, README "Callers that
 * cannot send a key").
 *
 * @example { "mode": "fingerprint", "windowMs": 600000 }
 */
export interface KeylessConfig {
  /**
   * `reject` (default): a create without the header is `400
   * idempotency_key_missing`. `fingerprint`: the canonical fingerprint of
   * (route, body) stands for the key: an undecided job with it is joined,
   * one finished less than `windowMs` ago is replayed, and after that the
   * same body creates a new job. Two intents with the same body cannot be
   * told apart, which is why it is opt-in. `/mcp` uses `fingerprint`
   * whatever this says (CONTRACT §14).
   */
  readonly mode: 'reject' | 'fingerprint';
  /** How long a finished keyless job is replayed, in ms. Default 600000 (10 minutes). */
  readonly windowMs: number;
}

/** Retention of finished jobs (CONTRACT §9, docs/retention.md). */
export interface RetentionConfig {
  /**
   * A job terminal for longer than this many days is deleted with its
   * attempts and events, and its idempotency key can be used again.
   * Fractions allowed. Default 30.
   */
  readonly finishedJobsDays: number;
}

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** The `--config` flag, if given; it wins over `ONEJOB_CONFIG`. */
  readonly argvConfigPath?: string | undefined;
  /** The environment (usually `process.env`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Directory that relative paths are resolved against. Default `process.cwd()`. */
  readonly cwd?: string | undefined;
  /**
   * When false, an `env:NAME` secret whose variable is unset becomes null
   * instead of an error (for commands that never call a provider, such as
   * `migrate` and `jobs list`). Default true.
   */
  readonly requireSecrets?: boolean | undefined;
}

/** The JSON Schema of the config file (draft 2020-12 subset Ajv understands). */
export const CONFIG_FILE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string' },
    database: { type: 'string', minLength: 1 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    host: { type: 'string', minLength: 1 },
    bodyLimitBytes: { type: 'integer', minimum: 1 },
    gatewayBodyLimitBytes: { type: 'integer', minimum: 1 },
    maxConversationBytes: { type: 'integer', minimum: 1 },
    endpointBodyLimitBytes: { type: 'object', propertyNames: { pattern: '^/v1/[!-~]+$' }, additionalProperties: { type: 'integer', minimum: 1 } },
    metricsToken: { type: ['string', 'null'], pattern: '^[!-~]+$' },
    eventFeeds: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxPerOwner: { type: 'integer', minimum: 1, maximum: 100_000 }, pollMs: { type: 'integer', minimum: 50, maximum: 3_600_000 },
        lifetimeMs: { type: 'integer', minimum: 1000, maximum: 86_400_000 }, maxFollowersPerOwner: { type: 'integer', minimum: 1, maximum: 100_000 },
      },
    },
    chatMaxWaitMs: { type: 'integer', minimum: 1, maximum: 3_600_000 },
    retention: {
      type: 'object',
      additionalProperties: false,
      properties: { finishedJobsDays: { type: 'number', exclusiveMinimum: 0, maximum: 36_500 } },
    },
    executor: {
      type: 'object',
      additionalProperties: false,
      properties: {
        answerHoldMs: { type: 'integer', minimum: 0, maximum: 86_400_000 },
        maxHeldAnswers: { type: 'integer', minimum: 0, maximum: 1_000_000 },
      },
    },
    keyless: {
      type: 'object',
      additionalProperties: false,
      properties: { mode: { enum: ['reject', 'fingerprint'] }, windowMs: { type: 'integer', minimum: 1, maximum: 2_592_000_000 } },
    },
    limits: LIMITS_SCHEMA,
    batch: { type: 'object', additionalProperties: false, properties: { maxShare: { type: 'number', minimum: 0, maximum: 1 } } },
    apiKeys: {
      type: 'object',
      propertyNames: { pattern: '^[!-~]+$' },
      additionalProperties: {
        oneOf: [
          { type: 'string', minLength: 1 },
          {
            type: 'object',
            additionalProperties: false,
            required: ['owner'],
            properties: { owner: { type: 'string', minLength: 1 }, readOnly: { type: 'boolean' } },
          },
        ],
      },
    },
    providers: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        // baseUrl and model are checked per type by the adapter (`fake` may omit both).
        required: ['type'],
        properties: {
          type: { enum: [...PROVIDER_TYPES] },
          baseUrl: { type: 'string', minLength: 1 },
          apiKey: { type: ['string', 'null'] },
          model: { type: 'string', minLength: 1 },
          timeoutMs: { type: 'integer', minimum: 1 },
          idleTimeoutMs: { type: 'integer', minimum: 1 },
          maxDurationMs: { type: ['integer', 'null'], minimum: 1 },
          retry: RETRY_SCHEMA,
          pricing: PRICING_SCHEMA,
          maxOutputTokens: MAX_OUTPUT_TOKENS_SCHEMA,
        },
      },
    },
    routes: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['providers'],
        properties: {
          providers: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1 } },
          hedgeAfterMs: { type: ['integer', 'null'], minimum: 0 },
          contract: { type: ['string', 'null'], minLength: 1 },
          passThrough: { type: 'array', uniqueItems: true, items: { enum: [...PASS_THROUGH_KINDS] } },
        },
      },
    },
    contracts: { type: 'object', additionalProperties: { type: 'object' } },
    // Each server is checked by mcpServerConfigProblems (one line per problem, with its field).
    mcpServers: { type: 'object', additionalProperties: { type: 'object' } },
  },
} as const;

let validateFile: ReturnType<Ajv['compile']> | undefined;

function validator(): ReturnType<Ajv['compile']> {
  if (!validateFile) {
    const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
    addFormats(ajv);
    validateFile = ajv.compile(CONFIG_FILE_SCHEMA);
  }
  return validateFile;
}

function invalid(source: string, problems: readonly string[]): OnejobError {
  return new OnejobError('config_invalid', `${source}: ${problems.join('; ')}`, { details: { problems } });
}

/**
 * Parses `ONEJOB_API_KEYS` (`token=owner,token=owner`; spaces around entries ignored).
 *
 * @example parseApiKeys('tok_a=alice, tok_b=bob') // { tok_a: 'alice', tok_b: 'bob' }
 * @throws OnejobError `config_invalid` naming the bad entry.
 */
export function parseApiKeys(text: string): Record<string, string> {
  const keys: Record<string, string> = {};
  const problems: string[] = [];
  text.split(',').forEach((raw, index) => {
    const entry = raw.trim();
    if (entry === '') return;
    const eq = entry.indexOf('=');
    const token = eq < 0 ? '' : entry.slice(0, eq).trim();
    const owner = eq < 0 ? '' : entry.slice(eq + 1).trim();
    if (eq < 0 || token === '' || owner === '') {
      problems.push(`entry ${index + 1} must be token=owner`);
    } else if (!/^[!-~]+$/.test(token)) {
      problems.push(`entry ${index + 1}: the token must be visible ASCII without spaces`);
    } else if (Object.hasOwn(keys, token)) {
      problems.push(`entry ${index + 1}: the token is listed twice`);
    } else {
      keys[token] = owner;
    }
  });
  if (problems.length > 0) throw invalid('ONEJOB_API_KEYS', problems);
  return keys;
}

/** Resolves one `env:NAME` value; other strings pass through. */
function secret(value: string, path: string, env: LoadConfigOptions['env'], requireSecrets: boolean, problems: string[]): string | null {
  if (!value.startsWith('env:')) return value;
  const name = value.slice(4);
  const found = env[name];
  if (found !== undefined && found !== '') return found;
  if (requireSecrets) problems.push(`${path}: environment variable ${name || '(empty name)'} is not set`);
  return null;
}

function readFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    const why = (cause as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (cause as Error).message;
    throw new OnejobError('config_invalid', `${path}: cannot read the config file (${why})`, { cause });
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new OnejobError('config_invalid', `${path}:${jsonErrorPlace(text, (cause as Error).message)}`, { cause });
  }
}

/**
 * A JSON syntax error as a person reads it: `" line 3, column 5: not valid JSON (Expected ',' …)"`.
 * V8 says "at position N" (a character offset; Node 22 and later add the line and column
 * themselves, Node 20 does not), or "Unexpected end of JSON input"; lines and columns count from 1.
 */
function jsonErrorPlace(text: string, message: string): string {
  const at = /\s*in JSON at position (\d+)(?: \(line \d+ column \d+\))?/.exec(message);
  const offset = at ? Number(at[1]) : /end of JSON input/.test(message) ? text.length : null;
  const reason = at ? message.slice(0, at.index) + message.slice(at.index + at[0].length) : message;
  if (offset === null) return ` not valid JSON (${reason})`;
  const before = text.slice(0, offset).split('\n');
  return ` line ${before.length}, column ${before[before.length - 1]!.length + 1}: not valid JSON (${reason})`;
}

function checkDatabaseUrl(url: string, source: string): void {
  if (!/^(sqlite:.+|postgres(ql)?:\/\/.+)$/.test(url)) {
    throw invalid(source, [`must be sqlite:<path>, sqlite::memory: or postgres://…, got ${JSON.stringify(url)}`]);
  }
}

/**
 * Loads, merges and validates the configuration.
 *
 * Precedence: environment over file over defaults. The file is `argvConfigPath`,
 * else `ONEJOB_CONFIG`, else `onejob.config.json` if it exists (none is fine).
 *
 * @example const config = loadConfig({ argvConfigPath: opts.config, env: process.env });
 * @throws OnejobError `config_invalid` with every problem found (path and reason).
 */
export function loadConfig(options: LoadConfigOptions): OnejobConfig {
  const { env } = options;
  const cwd = options.cwd ?? process.cwd();
  const requireSecrets = options.requireSecrets ?? true;

  const explicit = options.argvConfigPath ?? (env.ONEJOB_CONFIG ? env.ONEJOB_CONFIG : undefined);
  let configPath: string | null = null;
  if (explicit !== undefined) configPath = resolvePath(cwd, explicit);
  else if (existsSync(resolvePath(cwd, DEFAULT_CONFIG_FILE))) configPath = resolvePath(cwd, DEFAULT_CONFIG_FILE);

  const raw: unknown = configPath === null ? {} : readFile(configPath);
  const source = configPath ?? 'config';
  const validate = validator();
  if (!validate(raw)) throw invalid(source, (validate.errors ?? []).map((e) => describeAjvError(e, '', { propertyNames: 'has a key that is not visible ASCII' })));
  const file = raw as {
    database?: string;
    port?: number;
    host?: string;
    bodyLimitBytes?: number;
    gatewayBodyLimitBytes?: number;
    maxConversationBytes?: number;
    endpointBodyLimitBytes?: Record<string, number>;
    metricsToken?: string | null;
    eventFeeds?: { maxPerOwner?: number; pollMs?: number; lifetimeMs?: number; maxFollowersPerOwner?: number };
    chatMaxWaitMs?: number;
    retention?: { finishedJobsDays?: number };
    executor?: Partial<ExecutorConfig>;
    keyless?: { mode?: KeylessConfig['mode']; windowMs?: number };
    limits?: LimitsConfig;
    batch?: { maxShare?: number };
    apiKeys?: Record<string, ApiKeyGrant>;
    providers?: Record<string, Record<string, unknown>>;
    routes?: Record<string, { providers: string[]; hedgeAfterMs?: number | null; contract?: string | null; passThrough?: PassThroughKind[] }>;
    contracts?: Record<string, Record<string, unknown>>;
    mcpServers?: Record<string, Record<string, unknown>>;
  };

  const problems: string[] = [];

  // Providers: resolve env: secrets in every top-level string field.
  const providers: Record<string, ProviderConfig> = {};
  for (const [name, p] of Object.entries(file.providers ?? {})) {
    const resolved: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(p)) {
      resolved[field] = typeof value === 'string' ? secret(value, `/providers/${name}/${field}`, env, requireSecrets, problems) : value;
    }
    const provider: ProviderConfig = {
      ...resolved,
      type: p.type as ProviderType,
      baseUrl: (resolved.baseUrl as string | null) ?? undefined,
      apiKey: (resolved.apiKey as string | null | undefined) ?? null,
      model: (resolved.model as string | null) ?? (p.type === 'fake' ? 'fake-model' : p.type === 'task' ? 'task' : ''),
      timeoutMs: (p.timeoutMs as number | undefined) ?? DEFAULT_TIMEOUT_MS,
      idleTimeoutMs: (p.idleTimeoutMs as number | undefined) ?? DEFAULT_IDLE_TIMEOUT_MS,
      maxDurationMs: (p.maxDurationMs as number | null | undefined) ?? null,
    } as ProviderConfig;
    // The adapter's own checks (URL shape, fake scripts…), reported with the file's paths.
    if (!problems.some((x) => x.startsWith(`/providers/${name}/`))) {
      problems.push(...providerConfigProblems(name, provider).map((x) => `/${x.replace(/^providers\.([^.:]+)\.?/, 'providers/$1/').replace(/\/:/, ':')}`));
    }
    providers[name] = provider;
  }

  // MCP servers: checked first, then env: secrets resolved in their headers and env values.
  const mcpServers: Record<string, McpServerConfig> = {};
  for (const [name, m] of Object.entries(file.mcpServers ?? {})) {
    const found = mcpServerConfigProblems(name, m);
    if (found.length > 0) {
      problems.push(...found.map((x) => `/${x.replace(/^mcpServers\.([^.:]+)\.?/, 'mcpServers/$1/').replace(/\/:/, ':')}`));
      continue;
    }
    const resolved: Record<string, unknown> = { ...m };
    for (const field of ['headers', 'env'] as const) {
      const values = m[field] as Record<string, string> | undefined;
      if (values === undefined) continue;
      resolved[field] = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, secret(v, `/mcpServers/${name}/${field}/${k}`, env, requireSecrets, problems) ?? '']));
    }
    if (typeof m.url === 'string') resolved.url = secret(m.url, `/mcpServers/${name}/url`, env, requireSecrets, problems) ?? '';
    mcpServers[name] = mcpServerConfigOf(resolved);
  }

  const contracts = { ...(file.contracts ?? {}) };
  const routes: Record<string, RouteConfig> = {};
  for (const [name, r] of Object.entries(file.routes ?? {})) {
    r.providers.forEach((p, i) => {
      if (!Object.hasOwn(providers, p)) problems.push(`/routes/${name}/providers/${i}: provider ${JSON.stringify(p)} is not configured`);
    });
    const contract = r.contract ?? null;
    if (contract !== null && !Object.hasOwn(contracts, contract)) {
      problems.push(`/routes/${name}/contract: contract ${JSON.stringify(contract)} is not configured`);
    }
    routes[name] = { providers: [...r.providers], hedgeAfterMs: r.hedgeAfterMs ?? null, contract, ...(r.passThrough === undefined ? {} : { passThrough: [...r.passThrough] }) };
    problems.push(...hedgeProblems(name, routes[name]!, providers));
  }

  // API keys: file keys may be env: references; ONEJOB_API_KEYS replaces the whole set.
  let apiKeys: Record<string, ApiKeyGrant> = {};
  if (env.ONEJOB_API_KEYS !== undefined && env.ONEJOB_API_KEYS.trim() !== '') {
    apiKeys = parseApiKeys(env.ONEJOB_API_KEYS);
  } else {
    for (const [token, owner] of Object.entries(file.apiKeys ?? {})) {
      const t = secret(token, `/apiKeys/${token}`, env, requireSecrets, problems);
      if (t !== null) apiKeys[t] = owner;
    }
  }

  // The metrics token: ONEJOB_METRICS_TOKEN wins over the file's (which may be an env: reference).
  let metricsToken: string | null = null;
  if (env.ONEJOB_METRICS_TOKEN !== undefined && env.ONEJOB_METRICS_TOKEN.trim() !== '') {
    metricsToken = env.ONEJOB_METRICS_TOKEN.trim();
    if (!/^[!-~]+$/.test(metricsToken)) problems.push('ONEJOB_METRICS_TOKEN: must be visible ASCII without spaces');
  } else if (typeof file.metricsToken === 'string') {
    metricsToken = secret(file.metricsToken, '/metricsToken', env, requireSecrets, problems);
  }

  let databaseUrl = DEFAULT_DATABASE_URL;
  if (file.database !== undefined) databaseUrl = secret(file.database, '/database', env, true, problems) ?? DEFAULT_DATABASE_URL;
  if (problems.length > 0) throw invalid(source, problems);
  if (env.DATABASE_URL !== undefined && env.DATABASE_URL !== '') {
    databaseUrl = env.DATABASE_URL;
    checkDatabaseUrl(databaseUrl, 'DATABASE_URL');
  } else {
    checkDatabaseUrl(databaseUrl, `${source}: /database`);
  }

  let port = file.port ?? DEFAULT_PORT;
  if (env.PORT !== undefined && env.PORT !== '') {
    if (!/^\d{1,5}$/.test(env.PORT) || Number(env.PORT) > 65535) throw invalid('PORT', [`must be an integer from 0 to 65535, got ${JSON.stringify(env.PORT)}`]);
    port = Number(env.PORT);
  }

  const hostFromEnv = env.HOST !== undefined && env.HOST.trim() !== '' ? env.HOST.trim() : undefined;
  if (hostFromEnv !== undefined && !/^[!-~]+$/.test(hostFromEnv)) throw invalid('HOST', [`must be an address such as 127.0.0.1 or ::, got ${JSON.stringify(env.HOST)}`]);
  const host = hostFromEnv ?? file.host;

  return {
    databaseUrl,
    port,
    host: host ?? DEFAULT_HOST,
    hostConfigured: host !== undefined,
    retention: { finishedJobsDays: file.retention?.finishedJobsDays ?? DEFAULT_FINISHED_JOBS_DAYS },
    executor: executorConfig(file.executor),
    bodyLimitBytes: file.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    gatewayBodyLimitBytes: file.gatewayBodyLimitBytes ?? DEFAULT_GATEWAY_BODY_LIMIT_BYTES,
    ...(file.maxConversationBytes === undefined ? {} : { maxConversationBytes: file.maxConversationBytes }),
    endpointBodyLimitBytes: { ...(file.endpointBodyLimitBytes ?? {}) },
    metricsToken,
    eventFeeds: {
      maxPerOwner: file.eventFeeds?.maxPerOwner ?? DEFAULT_EVENT_FEEDS_PER_OWNER, pollMs: file.eventFeeds?.pollMs ?? DEFAULT_EVENT_FEEDS_POLL_MS,
      ...(file.eventFeeds?.lifetimeMs === undefined ? {} : { lifetimeMs: file.eventFeeds.lifetimeMs }),
      ...(file.eventFeeds?.maxFollowersPerOwner === undefined ? {} : { maxFollowersPerOwner: file.eventFeeds.maxFollowersPerOwner }),
    },
    chatMaxWaitMs: file.chatMaxWaitMs ?? DEFAULT_CHAT_MAX_WAIT_MS,
    keyless: { mode: file.keyless?.mode ?? 'reject', windowMs: file.keyless?.windowMs ?? DEFAULT_KEYLESS_WINDOW_MS },
    limits: limitsConfigOf(file.limits),
    ...(file.batch?.maxShare === undefined ? {} : { batch: { maxShare: file.batch.maxShare } }),
    apiKeys,
    providers,
    routes,
    contracts,
    mcpServers,
    configPath,
  };
}

/**
 * A route's hedge that could never start (issue 35): the executor arms the
 * hedge and the attempt's deadline from the same start, so on a provider
 * whose `timeoutMs` is not above `hedgeAfterMs` the deadline fires first, the
 * attempt ends `unknown`, and a hedge beside an attempt in doubt is refused.
 * Every provider of the chain but the last can be hedged (the hedge goes to
 * the next one). The problems, one per such provider, with the file's paths.
 *
 * @example hedgeProblems('r', { providers: ['a', 'b'], hedgeAfterMs: 20000, contract: null }, { a: { timeoutMs: 20000, … }, … })
 * // ['/routes/r/hedgeAfterMs: 20000 is not below the timeoutMs of provider "a" (20000): …']
 */
export function hedgeProblems(route: string, r: RouteConfig, providers: Readonly<Record<string, ProviderConfig>>): string[] {
  const hedge = r.hedgeAfterMs;
  if (hedge === null) return [];
  const problems: string[] = [];
  for (const name of r.providers.slice(0, -1)) {
    const p = Object.hasOwn(providers, name) ? providers[name] : undefined;
    if (p === undefined || hedge < p.timeoutMs) continue;
    problems.push(
      `/routes/${route}/hedgeAfterMs: ${hedge} is not below the timeoutMs of provider ${JSON.stringify(name)} (${p.timeoutMs}): `
      + `that attempt's deadline fires first (it ends unknown) and a hedge beside an attempt in doubt never starts; `
      + `set hedgeAfterMs below ${p.timeoutMs}, or raise /providers/${name}/timeoutMs above ${hedge}`,
    );
  }
  return problems;
}

/**
 * A configuration built in code (tests, embedding), with the same defaults as {@link loadConfig}.
 * Not validated: give routes whose providers exist.
 *
 * @example defineConfig({ apiKeys: { tok: 'alice' }, routes: { r: { providers: ['p'] } }, providers: { p: { type: 'openai', baseUrl: 'http://x', model: 'm' } } })
 */
export function defineConfig(partial: {
  databaseUrl?: string;
  port?: number;
  host?: string;
  bodyLimitBytes?: number;
  gatewayBodyLimitBytes?: number;
  maxConversationBytes?: number;
  endpointBodyLimitBytes?: Record<string, number>;
  metricsToken?: string | null;
  eventFeeds?: Partial<EventFeedsConfig>;
  chatMaxWaitMs?: number;
  retention?: Partial<RetentionConfig>;
  executor?: Partial<ExecutorConfig>;
  keyless?: Partial<KeylessConfig>;
  limits?: LimitsConfig;
  batch?: { maxShare: number };
  apiKeys?: Record<string, ApiKeyGrant>;
  providers?: Record<string, { type: ProviderType; baseUrl: string; model: string; apiKey?: string | null; timeoutMs?: number; idleTimeoutMs?: number; maxDurationMs?: number | null; [extra: string]: unknown }>;
  routes?: Record<string, { providers: string[]; hedgeAfterMs?: number | null; contract?: string | null; passThrough?: PassThroughKind[] }>;
  contracts?: Record<string, Record<string, unknown>>;
  mcpServers?: Record<string, ({ url: string; headers?: Record<string, string> } | { command: string[]; env?: Record<string, string>; cwd?: string }) & { timeoutMs?: number }>;
}): OnejobConfig {
  const providers: Record<string, ProviderConfig> = {};
  for (const [name, p] of Object.entries(partial.providers ?? {})) {
    providers[name] = {
      ...p, apiKey: p.apiKey ?? null, timeoutMs: p.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      idleTimeoutMs: p.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS, maxDurationMs: p.maxDurationMs ?? null,
    };
  }
  const routes: Record<string, RouteConfig> = {};
  for (const [name, r] of Object.entries(partial.routes ?? {})) {
    routes[name] = { providers: [...r.providers], hedgeAfterMs: r.hedgeAfterMs ?? null, contract: r.contract ?? null, ...(r.passThrough === undefined ? {} : { passThrough: [...r.passThrough] }) };
  }
  return {
    databaseUrl: partial.databaseUrl ?? DEFAULT_DATABASE_URL,
    port: partial.port ?? DEFAULT_PORT,
    host: partial.host ?? DEFAULT_HOST,
    hostConfigured: partial.host !== undefined,
    retention: { finishedJobsDays: partial.retention?.finishedJobsDays ?? DEFAULT_FINISHED_JOBS_DAYS },
    executor: executorConfig(partial.executor),
    bodyLimitBytes: partial.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    gatewayBodyLimitBytes: partial.gatewayBodyLimitBytes ?? DEFAULT_GATEWAY_BODY_LIMIT_BYTES,
    ...(partial.maxConversationBytes === undefined ? {} : { maxConversationBytes: partial.maxConversationBytes }),
    endpointBodyLimitBytes: { ...(partial.endpointBodyLimitBytes ?? {}) },
    metricsToken: partial.metricsToken ?? null,
    eventFeeds: { ...(partial.eventFeeds ?? {}), maxPerOwner: partial.eventFeeds?.maxPerOwner ?? DEFAULT_EVENT_FEEDS_PER_OWNER, pollMs: partial.eventFeeds?.pollMs ?? DEFAULT_EVENT_FEEDS_POLL_MS },
    chatMaxWaitMs: partial.chatMaxWaitMs ?? DEFAULT_CHAT_MAX_WAIT_MS,
    keyless: { mode: partial.keyless?.mode ?? 'reject', windowMs: partial.keyless?.windowMs ?? DEFAULT_KEYLESS_WINDOW_MS },
    limits: limitsConfigOf(partial.limits),
    ...(partial.batch === undefined ? {} : { batch: { maxShare: partial.batch.maxShare } }),
    apiKeys: { ...(partial.apiKeys ?? {}) },
    providers,
    routes,
    contracts: { ...(partial.contracts ?? {}) },
    mcpServers: Object.fromEntries(Object.entries(partial.mcpServers ?? {}).map(([name, m]) => [name, mcpServerConfigOf(m as Record<string, unknown>)])),
    configPath: null,
  };
}

/** The executor settings with their defaults (an answer held 10 minutes at most, 10 000 at once). */
function executorConfig(e: Partial<ExecutorConfig> | undefined): ExecutorConfig {
  return { answerHoldMs: e?.answerHoldMs ?? 600_000, maxHeldAnswers: e?.maxHeldAnswers ?? 10_000 };
}
