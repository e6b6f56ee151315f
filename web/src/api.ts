/**
 * The dashboard's only way to onejob: its public HTTP API, with the API token
 * the user signed in with (`Authorization: Bearer …`). Errors are the API's
 * problem documents, thrown as {@link ApiError} with their stable `code`.
 */

/** A recorded error. */
export interface RecordedError {
  code: string;
  message: string;
  details?: unknown;
}

/** Token counts of an attempt. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** An attempt body (CONTRACT §3, §8). */
export interface Attempt {
  id: string;
  job_id: string;
  number: number;
  provider: string;
  kind: 'first' | 'failover' | 'hedge' | 'manual';
  state: 'starting' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'unknown' | 'superseded';
  started_at: string;
  deadline_at: string | null;
  finished_at: string | null;
  error: RecordedError | null;
  usage: Usage | null;
  cost_usd: number | null;
  /** The provider's own id of the request (CONTRACT §11), or null. */
  provider_request_id?: string | null;
  /** Who ended the doubt: lookup, callback, policy, late_answer, operator; null otherwise. */
  resolved_by?: 'lookup' | 'callback' | 'policy' | 'late_answer' | 'operator' | null;
  /** When the attempt became unknown, or null. */
  unknown_at?: string | null;
  last_checked_at?: string | null;
  next_check_at?: string | null;
}

/** One row of `GET /v1/doubt`: an attempt in doubt with the job it blocks. */
export interface DoubtRow extends Attempt {
  job: { id: string; idempotency_key: string; route: string; state: Job['state']; created_at: string; input_line: string };
  /** The provider has a lookup: onejob asks it by itself (and `POST /v1/attempts/{id}/check` asks now). */
  can_check: boolean;
  /** When a settle policy resolves it failed, or null. */
  settles_at: string | null;
  /** When it cannot be asked: what would make it askable (the provider type and the setting); null when it can. */
  ask_hint: string | null;
}

/** A job body. */
export interface Job {
  id: string;
  idempotency_key: string;
  route: string;
  input: unknown;
  metadata: Record<string, unknown> | null;
  providers: string[];
  state: 'queued' | 'running' | 'unknown' | 'succeeded' | 'failed' | 'cancelled';
  version: number;
  completed_by: string | null;
  result: unknown;
  error: RecordedError | null;
  attempts: Attempt[];
  skipped: { provider: string; reason: string }[];
  created_at: string;
  updated_at: string;
  cost_usd: number | null;
}

/** One row of a job's event log. */
export interface JobEvent {
  id: number;
  job_id: string;
  attempt_id: string | null;
  type: string;
  at: string;
  data: Record<string, unknown>;
}

/** One row of `GET /v1/usage`. */
export interface UsageRow {
  route: string;
  provider: string;
  outcome: Attempt['state'];
  period_start?: string;
  attempts: number;
  attempts_with_usage?: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  cost_usd: number | null;
}

/** One row of `GET /v1/certifications`. */
export interface Certification {
  route: string;
  provider: string;
  model: string;
  contract: string | null;
  contract_fingerprint: string | null;
  status: 'not_required' | 'passed' | 'failed' | 'void' | 'not_certified';
  eligible: boolean;
  reason: string | null;
  certification: { model: string; contract_fingerprint: string; route: string | null; passed: boolean; verified_at: string; report: unknown } | null;
}

/** A problem answer of the API. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A signed-in client. */
export interface Api {
  get<T>(path: string, signal?: AbortSignal): Promise<T>;
  post<T>(path: string, body?: unknown): Promise<T>;
  /** The live feed; calls `onChange` for every change, `onStatus` when connected or not. Returns a stop function. */
  live(onChange: (jobId: string | null) => void, onStatus: (connected: boolean) => void): () => void;
}

async function answer<T>(res: Response): Promise<T> {
  const text = await res.text();
  const body: unknown = text === '' ? null : JSON.parse(text);
  if (!res.ok) {
    const p = (body ?? {}) as { code?: string; detail?: string; title?: string };
    throw new ApiError(res.status, p.code ?? 'http_error', p.detail ?? p.title ?? `HTTP ${res.status}`);
  }
  return body as T;
}

/** A client for `token` against this origin. */
export function createApi(token: string): Api {
  const headers = { authorization: `Bearer ${token}` };
  return {
    async get<T>(path: string, signal?: AbortSignal) {
      return answer<T>(await fetch(path, { headers, signal }));
    },
    async post<T>(path: string, body?: unknown) {
      const init: RequestInit = { method: 'POST', headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' } };
      if (body !== undefined) init.body = JSON.stringify(body);
      return answer<T>(await fetch(path, init));
    },
    live(onChange, onStatus) {
      // fetch streaming rather than EventSource: EventSource cannot send the Authorization header.
      const stop = new AbortController();
      let lastId: string | null = null;
      const run = async (): Promise<void> => {
        let delay = 500;
        while (!stop.signal.aborted) {
          try {
            const res = await fetch('/v1/events', { headers: lastId ? { ...headers, 'last-event-id': lastId } : headers, signal: stop.signal });
            if (!res.ok || !res.body) throw new ApiError(res.status, 'http_error', `live feed: HTTP ${res.status}`);
            onStatus(true);
            delay = 500;
            const reader = res.body.getReader();
            const decoder = new TextDecoder();
            let buffer = '';
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buffer += decoder.decode(value, { stream: true });
              let cut: number;
              while ((cut = buffer.indexOf('\n\n')) >= 0) {
                const block = buffer.slice(0, cut);
                buffer = buffer.slice(cut + 2);
                let event = 'message';
                let data = '';
                for (const line of block.split('\n')) {
                  if (line.startsWith('event: ')) event = line.slice(7);
                  else if (line.startsWith('data: ')) data += line.slice(6);
                  else if (line.startsWith('id: ')) lastId = line.slice(4);
                }
                if (event === 'job_event' || event === 'job_changed') {
                  const parsed = JSON.parse(data) as { job_id?: string };
                  onChange(parsed.job_id ?? null);
                }
              }
            }
          } catch {
            // fall through to a reconnect
          }
          if (stop.signal.aborted) break;
          onStatus(false);
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 10_000);
        }
      };
      void run();
      return () => stop.abort();
    },
  };
}

/** The key the token is kept under in sessionStorage (gone when the tab closes). */
export const TOKEN_KEY = 'onejob.token';
