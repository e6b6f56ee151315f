/**
 * An intent key for the official SDKs: {@link intentFetch} makes a `fetch`
 * to give to `new OpenAI({ fetch })` or `new Anthropic({ fetch })` that
 * attaches ONE `Idempotency-Key` to each logical call and sends the same key
 * again on every retry the SDK makes of it.
 *
 * How it tells a retry from a new call: every client resends the same
 * request (method, URL, JSON body) when it retries. The Stainless SDKs also
 * count their tries in `X-Stainless-Retry-Count` (0, then 1, 2, …); a retry
 * (count ≥ 1) takes the key of the earlier try of the same request that is
 * not in flight (a retry starts only after its previous try ended). A try
 * with no count, or count 0, takes the key of the same request when that
 * request's last try ended without a final answer (a timeout, a lost
 * connection, a 409, 429 or 5xx), else mints one: that is how the clients
 * that retry by themselves, without the SDK's count, keep their key (the
 * Vercel AI SDK, LangChain, which runs the openai SDK with `maxRetries: 0`,
 * the OpenAI Agents SDK when its runner retries). So the same body sent
 * again after an answer that was not final is the same call, however it was
 * sent; after a final answer it is a new call with a new key. Two identical
 * requests in flight at once may trade keys on retry, which is harmless:
 * their bodies, so their jobs, are the same. A request that already carries
 * an Idempotency-Key is left as it is.
 */
import { newIntentKey } from './intent-key.ts';

/** The header the Stainless-generated SDKs (openai, @anthropic-ai/sdk) count their tries in. */
export const RETRY_COUNT_HEADER = 'x-stainless-retry-count';

/** Options of {@link intentFetch}. */
export interface IntentFetchOptions {
  /** The `fetch` to wrap. Default `globalThis.fetch`. */
  readonly fetch?: typeof fetch;
  /** Mints a key for a new logical call. Default {@link newIntentKey}. */
  readonly mintKey?: () => string;
  /**
   * How long a call's key is kept for a retry after its last try ended
   * without a final answer. Default 900 000 ms (15 minutes: past the SDKs'
   * longest backoff).
   */
  readonly keepMs?: number;
  /** Which methods get a key. Default `['POST']`. */
  readonly methods?: readonly string[];
}

/** A `fetch` that attaches intent keys, with a look at what it holds. */
export interface IntentFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** Calls whose keys are kept for a retry (not yet answered finally). */
  readonly pending: number;
}

interface Call {
  readonly signature: string;
  readonly key: string;
  lastTry: number;
  inFlight: boolean;
  expiresAt: number;
}

/**
 * A `fetch` for an official SDK: one Idempotency-Key per logical call, kept
 * across the SDK's own retries.
 *
 * @example
 * import OpenAI from 'openai';
 * import { intentFetch } from 'onejob/client';
 * const openai = new OpenAI({ baseURL: 'http://127.0.0.1:8080/v1', apiKey: token, fetch: intentFetch() });
 * await openai.chat.completions.create({ model: 'summarize', messages }); // one job, whatever the retries
 */
export function intentFetch(options: IntentFetchOptions = {}): IntentFetch {
  const base = options.fetch ?? globalThis.fetch;
  const mintKey = options.mintKey ?? newIntentKey;
  const keepMs = options.keepMs ?? 900_000;
  const methods = new Set((options.methods ?? ['POST']).map((m) => m.toUpperCase()));
  let calls: Call[] = [];

  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : null;
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init?.headers ?? request?.headers);
    if (!methods.has(method) || headers.has('idempotency-key')) return base(input, init);

    const url = request?.url ?? String(input);
    const body = init?.body ?? null;
    const bodyText = typeof body === 'string' ? body : body === null && request !== null ? await request.clone().text() : '';
    const signature = `${method} ${url}\n${bodyText}`;
    const tryNumber = Number.parseInt(headers.get(RETRY_COUNT_HEADER) ?? '0', 10) || 0;

    const now = Date.now();
    calls = calls.filter((c) => c.inFlight || c.expiresAt > now);
    let call = calls.find((c) => c.signature === signature && !c.inFlight && (tryNumber === 0 || c.lastTry < tryNumber));
    if (call === undefined) {
      call = { signature, key: mintKey(), lastTry: tryNumber, inFlight: false, expiresAt: 0 };
      calls.push(call);
    }
    call.lastTry = tryNumber;
    call.inFlight = true;
    headers.set('idempotency-key', call.key);

    let response: Response;
    try {
      response = request !== null && init === undefined ? await base(new Request(request, { headers })) : await base(input, { ...init, headers });
    } catch (error) {
      call.inFlight = false;
      call.expiresAt = Date.now() + keepMs;
      throw error;
    }
    call.inFlight = false;
    if (isFinalAnswer(response)) calls = calls.filter((c) => c !== call);
    else call.expiresAt = Date.now() + keepMs;
    return response;
  };
  Object.defineProperty(wrapped, 'pending', { get: () => calls.length });
  return wrapped as IntentFetch;
}

/**
 * Whether the SDKs will not retry this answer (their rule: `x-should-retry`
 * decides, else 408, 409, 429 and 5xx are retried), so its key can be let go.
 */
export function isFinalAnswer(response: Response): boolean {
  const should = response.headers.get('x-should-retry');
  if (should === 'true') return false;
  if (should === 'false') return true;
  return !(response.status === 408 || response.status === 409 || response.status === 429 || response.status >= 500);
}
