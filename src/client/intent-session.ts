/**
 * One user intent, from the click to the job's outcome (CONTRACT §10),
 * without a UI framework: `onejob/react`'s `useIntent()` is a thin hook over
 * it, and any other UI can subscribe to it the same way.
 *
 * The key's lifetime: minted when the intent starts ({@link IntentSession.start}
 * with no key held), written to `sessionStorage` with the request before the
 * request is sent, reused by every later start, retry and page reload, and let
 * go only when the job is terminal or on {@link IntentSession.reset}.
 */
import type { ChatCompletionRequest, Job } from './api-shapes.ts';
import { OnejobClientError, isOnejobClientError } from './client-error.ts';
import { newIntentKey } from './intent-key.ts';
import { isTerminalJob, type OnejobClient } from './onejob-client.ts';

/**
 * What the UI shows: `idle` (no job yet, nothing in flight), `submitting`
 * (the create request is on its way), then the job's `queued`, `running`,
 * `in_doubt` (an attempt is `unknown`: the provider may have run it) and
 * `done` (terminal: see `job.state`).
 */
export type IntentStatus = 'idle' | 'submitting' | 'queued' | 'running' | 'in_doubt' | 'done';

/** A snapshot of an intent (a new object on every change). */
export interface IntentSnapshot {
  readonly status: IntentStatus;
  /** The Idempotency-Key held for this intent, or null when none is held. */
  readonly key: string | null;
  /** The input of the held intent (restored after a reload), else the job's, else null. */
  readonly input: unknown;
  /** The job as last read, or null. */
  readonly job: Job | null;
  /** The last error, or null; cleared by the next action. */
  readonly error: OnejobClientError | null;
  /**
   * A streaming intent (`stream: true`): the answer's text as received so
   * far, kept across reloads (the stream resumes after the last event it
   * saw, CONTRACT §13); null otherwise.
   */
  readonly text: string | null;
}

/** The storage an intent is kept in: `sessionStorage`, or anything with its three methods. */
export type IntentStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

/** Options of {@link IntentSession}. */
export interface IntentSessionOptions {
  readonly client: OnejobClient;
  /** The route the intent's job runs on. */
  readonly route: string;
  /** Names the intent in storage (`onejob:intent:<name>`); two intents of one page need two names. Default: the route. */
  readonly name?: string;
  /** Where the held intent survives a reload. Default `globalThis.sessionStorage` (none outside browsers). */
  readonly storage?: IntentStorage | null;
  /**
   * Stream the answer: the intent's input is a chat completion request
   * without `model` (`{ messages, … }`), sent to `POST /v1/chat/completions`
   * with `model: <route>` and `stream: true`; {@link IntentSnapshot.text}
   * grows as it arrives, and a broken stream or a reload resumes after the
   * last event received, never from the start. Default false (`POST /v1/jobs`).
   */
  readonly stream?: boolean;
}

/** What is kept in storage while a key is held. */
interface HeldIntent {
  readonly v: 1;
  readonly key: string;
  readonly route: string;
  readonly input: unknown;
  readonly metadata?: Record<string, unknown> | undefined;
  jobId: string | null;
  /** A streaming intent: the id of the last event received, and the text so far. */
  lastEventId?: string | null;
  text?: string;
}

/** The storage key of an intent named `name`. */
export function intentStorageKey(name: string): string {
  return `onejob:intent:${name}`;
}

/** The {@link IntentStatus} of a job. */
export function intentStatusOf(job: Job): IntentStatus {
  switch (job.state) {
    case 'queued':
    case 'running':
      return job.state;
    case 'unknown':
      return 'in_doubt';
    default:
      return 'done';
  }
}

function defaultStorage(): IntentStorage | null {
  try {
    return typeof globalThis.sessionStorage === 'undefined' ? null : globalThis.sessionStorage;
  } catch {
    return null; // a sandboxed frame may refuse access
  }
}

/**
 * One intent and its key.
 *
 * @example
 * const intent = new IntentSession({ client, route: 'summarize' });
 * intent.subscribe(() => render(intent.getSnapshot()));
 * intent.resume();                       // after a reload: carries on with the held key
 * button.onclick = () => intent.start({ messages });
 */
export class IntentSession {
  readonly #client: OnejobClient;
  readonly #route: string;
  readonly #storageKey: string;
  readonly #storage: IntentStorage | null;
  readonly #listeners = new Set<() => void>();
  #held: HeldIntent | null = null;
  #snapshot: IntentSnapshot = { status: 'idle', key: null, input: null, job: null, error: null, text: null };
  #run: AbortController | null = null;
  readonly #stream: boolean;

  constructor(options: IntentSessionOptions) {
    this.#client = options.client;
    this.#route = options.route;
    this.#storageKey = intentStorageKey(options.name ?? options.route);
    this.#storage = options.storage === undefined ? defaultStorage() : options.storage;
    this.#stream = options.stream === true;
    this.#held = this.#load();
    if (this.#held !== null) this.#snapshot = { ...this.#snapshot, key: this.#held.key, input: this.#held.input, text: this.#stream ? (this.#held.text ?? '') : null };
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  };

  /** The current snapshot (the same object until something changes). */
  getSnapshot = (): IntentSnapshot => this.#snapshot;

  /** Carries on with the intent held in storage, if any (after a reload): the same key, the same request. */
  resume = (): void => {
    this.#held = this.#load();
    if (this.#held === null || this.#run !== null) return;
    void this.#follow(this.#held, this.#held.jobId === null ? 'create' : 'read');
  };

  /**
   * Starts the intent, or, while a key is held, sends its request again with
   * that key (a double click, a "try again": the server answers with the same
   * job). A different `input` under a held key is refused by the server
   * (`idempotency_key_reused`); call {@link reset} first for a new intent.
   */
  start = (input: unknown, options: { readonly metadata?: Record<string, unknown> } = {}): void => {
    if (this.#held === null) {
      this.#held = { v: 1, key: newIntentKey(), route: this.#route, input, metadata: options.metadata, jobId: null };
    } else {
      this.#held = { ...this.#held, input, metadata: options.metadata ?? this.#held.metadata };
    }
    // Written before the request leaves, so a reload in the middle finds it.
    this.#save(this.#held);
    void this.#follow(this.#held, 'create');
  };

  /**
   * The fallback button: an attempt in doubt is resolved `cancelled` (the
   * job then moves on down its chain by itself); with none in doubt, a new
   * attempt is started on `provider` (or the next of the chain), which the
   * server refuses with `attempt_in_flight` while one runs and the route
   * allows no hedge. Resolves when the server has answered.
   */
  fallback = async (options: { readonly provider?: string } = {}): Promise<void> => {
    const jobId = this.#held?.jobId ?? this.#snapshot.job?.id ?? null;
    if (jobId === null) return this.#fail(new OnejobClientError('job_not_found', 'no job yet: start the intent first'));
    try {
      let job = await this.#client.getJob(jobId);
      const doubt = job.attempts.find((a) => a.state === 'unknown');
      if (doubt !== undefined) {
        job = (await this.#client.resolveAttempt(doubt.id, { state: 'cancelled' })).job;
        this.#apply(job);
      }
      const active = job.attempts.some((a) => a.state === 'starting' || a.state === 'running');
      if (!isTerminalJob(job) && (!active || doubt === undefined)) {
        await this.#client.startAttempt(jobId, options.provider === undefined ? {} : { provider: options.provider });
      }
    } catch (error) {
      this.#fail(error);
    }
    // Keep following the job, showing the refusal (if any) until the next action.
    if (this.#held !== null) void this.#follow(this.#held, 'read', this.#snapshot.error);
  };

  /** Cancels the job (`POST /v1/jobs/{id}/cancel`); the key is let go with the cancelled job. */
  cancel = async (): Promise<void> => {
    const jobId = this.#held?.jobId ?? this.#snapshot.job?.id ?? null;
    if (jobId === null) return this.reset();
    try {
      this.#apply(await this.#client.cancelJob(jobId));
    } catch (error) {
      this.#fail(error);
    }
  };

  /** Lets go of the key and forgets the job: the next {@link start} is a new intent. */
  reset = (): void => {
    this.#stopRun();
    this.#held = null;
    this.#remove();
    this.#set({ status: 'idle', key: null, input: null, job: null, error: null, text: null });
  };

  /** Stops waiting (a component unmounting); the held intent stays in storage for {@link resume}. */
  pause = (): void => {
    this.#stopRun();
  };

  async #follow(held: HeldIntent, how: 'create' | 'read', error: OnejobClientError | null = null): Promise<void> {
    this.#stopRun();
    const run = new AbortController();
    this.#run = run;
    const signal = run.signal;
    this.#set({ ...this.#snapshot, key: held.key, input: held.input, error, status: how === 'create' && this.#snapshot.job === null ? 'submitting' : this.#snapshot.status });
    // A streaming intent streams, except when it follows the job after its stream ended in an error.
    const viaStream = this.#stream && !(how === 'read' && error !== null);
    try {
      let job: Job;
      if (viaStream) {
        const streamed = await this.#followStream(held, signal);
        if (streamed === null || signal.aborted) return;
        job = streamed;
      } else if (how === 'create' || held.jobId === null) {
        ({ job } = await this.#client.createJob({ route: held.route, input: held.input, ...(held.metadata === undefined ? {} : { metadata: held.metadata }) }, { idempotencyKey: held.key, signal }));
        if (this.#held === held) {
          held.jobId = job.id;
          this.#save(held);
        }
      } else {
        job = await this.#client.getJob(held.jobId, { signal });
      }
      if (signal.aborted) return;
      this.#apply(job);
      if (isTerminalJob(job)) return;
      job = await this.#client.waitForJob(job.id, { until: 'terminal', signal, onChange: (j) => signal.aborted || this.#apply(j) });
      if (!signal.aborted) this.#apply(job);
    } catch (error) {
      if (signal.aborted) return;
      if (viaStream && isOnejobClientError(error) && error.jobId !== null && this.#held === held) {
        // The stream ended in doubt or failure: follow the job (a resolve, a failover) as a non-streaming intent does.
        if (this.#run === run) this.#run = null;
        void this.#follow(held, 'read', error);
        return;
      }
      if (isOnejobClientError(error, 'job_not_found') && how === 'read') {
        // Gone (retention): nothing to follow; the key is let go.
        this.#held = null;
        this.#remove();
      }
      this.#fail(error, this.#snapshot.job === null ? 'idle' : undefined);
    } finally {
      if (this.#run === run) this.#run = null;
    }
  }

  /**
   * A streaming intent: creates or joins the job's stream, from after the
   * last event this intent received (kept with the held intent), and grows
   * the snapshot's `text`. Returns the job as read after the stream's end;
   * a stream ended by a doubt or a failure throws (the job id attached).
   */
  async #followStream(held: HeldIntent, signal: AbortSignal): Promise<Job | null> {
    const request = { ...(held.input as Record<string, unknown>), model: held.route } as unknown as ChatCompletionRequest;
    let text = held.text ?? '';
    try {
      for await (const e of this.#client.streamChatCompletions(request, {
        idempotencyKey: held.key, signal, lastEventId: held.lastEventId ?? null,
        onOpen: ({ jobId }) => {
          if (jobId !== null && this.#held === held && held.jobId !== jobId) {
            held.jobId = jobId;
            this.#save(held);
          }
        },
      })) {
        if (signal.aborted) return null;
        text += e.data.choices[0]?.delta.content ?? '';
        if (this.#held === held) {
          held.text = text;
          held.lastEventId = e.id;
          this.#save(held);
        }
        this.#set({ ...this.#snapshot, status: 'running', text });
      }
    } catch (error) {
      // A job to follow (in doubt, failed): show it as the non-streaming intent would.
      if (isOnejobClientError(error) && error.jobId !== null && this.#held === held && held.jobId === null) {
        held.jobId = error.jobId;
        this.#save(held);
      }
      throw error;
    }
    if (held.jobId === null) return null;
    return this.#client.getJob(held.jobId, { signal });
  }

  /** Shows `job`; a terminal job lets the key go. */
  #apply(job: Job): void {
    if (this.#held !== null && this.#held.jobId !== null && this.#held.jobId !== job.id) return;
    const terminal = isTerminalJob(job);
    if (terminal && this.#held !== null) {
      this.#held = null;
      this.#remove();
    }
    this.#set({
      status: intentStatusOf(job), key: terminal ? null : (this.#held?.key ?? this.#snapshot.key), input: this.#stream ? this.#snapshot.input : job.input, job, error: this.#snapshot.error,
      text: this.#snapshot.text,
    });
  }

  #fail(error: unknown, status?: IntentStatus): void {
    const e = isOnejobClientError(error) ? error : new OnejobClientError('network_error', String(error), { cause: error });
    this.#set({ ...this.#snapshot, status: status ?? this.#snapshot.status, error: e });
  }

  #stopRun(): void {
    this.#run?.abort();
    this.#run = null;
  }

  #set(next: IntentSnapshot): void {
    this.#snapshot = next;
    for (const listener of this.#listeners) listener();
  }

  #load(): HeldIntent | null {
    try {
      const text = this.#storage?.getItem(this.#storageKey) ?? null;
      if (text === null) return null;
      const held = JSON.parse(text) as HeldIntent;
      return held?.v === 1 && typeof held.key === 'string' && held.route === this.#route ? held : null;
    } catch {
      return null;
    }
  }

  #save(held: HeldIntent): void {
    try {
      this.#storage?.setItem(this.#storageKey, JSON.stringify(held));
    } catch {
      // Storage full or refused: the key still lives in memory for this page.
    }
  }

  #remove(): void {
    try {
      this.#storage?.removeItem(this.#storageKey);
    } catch {
      // nothing to do
    }
  }
}
