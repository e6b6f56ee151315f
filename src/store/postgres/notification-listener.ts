/**
 * The LISTEN side of the PostgreSQL driver: one dedicated connection per
 * driver, shared by every subscription on every channel, reconnecting with
 * backoff when lost (see docs/postgres-driver.md, "Wake-ups").
 */
import pg from 'pg';
import type { JobState } from '../../core/states.ts';

/** The channel of work wake-ups. */
export const WORK_CHANNEL = 'onejob_work';

/** The channel of job state changes: `["<owner>", "<job id>", "<state>"]`, sent by the trigger of migration 0008. */
export const JOB_CHANNEL = 'onejob_job';

/** `["owner", "job id", "state"]` of a job notification, or null when it is not one. */
export function parseJobPayload(payload: string): [string, string, JobState] | null {
  try {
    const v: unknown = JSON.parse(payload);
    if (Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'string')) return v as [string, string, JobState];
  } catch {
    // not ours
  }
  return null;
}

/** A subscriber of {@link NotificationListener}: its channel, and what it is called with (undefined: after a reconnect). */
interface Subscriber {
  readonly channel: string;
  /** `backend`: the process id of the server backend that sent the notification. */
  readonly listener: (payload: string | undefined, backend: number | undefined) => void;
}

/**
 * The one LISTEN connection of a driver: shared by every subscription, on
 * each channel subscribed (LISTEN once per channel), reconnecting with
 * backoff (100 ms doubling to 5 s) when lost; after a reconnect every
 * subscriber is called once without a payload (notifications may have been
 * missed meanwhile).
 */
export class NotificationListener {
  readonly #config: pg.ClientConfig;
  readonly #unavailable: (cause: unknown) => Error;
  readonly #onBackgroundError: (e: Error) => void;
  readonly #subscribers = new Set<Subscriber>();
  /** Channels LISTENed on the current connection. */
  #listening = new Set<string>();
  #client: pg.Client | null = null;
  #ready: Promise<void> | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #backoffMs = 100;

  constructor(config: pg.ClientConfig, unavailable: (cause: unknown) => Error, onBackgroundError: (e: Error) => void) {
    this.#config = config;
    this.#unavailable = unavailable;
    this.#onBackgroundError = onBackgroundError;
  }

  async subscribe(channel: string, listener: Subscriber['listener']): Promise<() => Promise<void>> {
    const entry: Subscriber = { channel, listener };
    this.#subscribers.add(entry);
    try {
      try {
        await (this.#ready ??= this.#open());
      } catch (e) {
        this.#ready = null; // the next subscription tries to connect again
        throw e;
      }
      await this.#listen(channel);
    } catch (e) {
      this.#subscribers.delete(entry);
      throw e;
    }
    let unsubscribed = false;
    return async () => {
      if (unsubscribed) return;
      unsubscribed = true;
      this.#subscribers.delete(entry);
      if (this.#subscribers.size === 0) await this.stop();
    };
  }

  /** Closes the connection and cancels any reconnect; subscriptions made later open a new one. */
  async stop(): Promise<void> {
    this.#ready = null;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    const client = this.#client;
    this.#client = null;
    this.#listening = new Set();
    if (client) await client.end().catch(() => {});
  }

  /** LISTENs on `channel` on the current connection, once. */
  async #listen(channel: string): Promise<void> {
    const client = this.#client;
    if (!client || this.#listening.has(channel)) return;
    this.#listening.add(channel);
    try {
      await client.query(`LISTEN ${channel}`);
    } catch (e) {
      this.#listening.delete(channel);
      throw this.#unavailable(e);
    }
  }

  /** Connects and LISTENs on every subscribed channel; throws `database_unavailable` on failure. */
  async #open(): Promise<void> {
    const client = new pg.Client(this.#config);
    client.on('error', (e) => this.#lost(client, e));
    client.on('end', () => this.#lost(client, new Error('LISTEN connection ended')));
    client.on('notification', (msg) => this.#fire(msg.channel, msg.payload ?? '', msg.processId));
    this.#client = client;
    this.#listening = new Set();
    try {
      await client.connect();
      for (const channel of new Set([...this.#subscribers].map((s) => s.channel))) {
        this.#listening.add(channel);
        await client.query(`LISTEN ${channel}`);
      }
    } catch (e) {
      if (this.#client === client) this.#client = null;
      await client.end().catch(() => {});
      throw this.#unavailable(e);
    }
    this.#backoffMs = 100;
  }

  /** Calls the subscribers of `channel` (every subscriber, without a payload, when `channel` is null: after a reconnect). */
  #fire(channel: string | null, payload: string | undefined, backend?: number): void {
    for (const s of [...this.#subscribers]) {
      if (channel !== null && s.channel !== channel) continue;
      try {
        s.listener(payload, backend);
      } catch (e) {
        this.#onBackgroundError(e instanceof Error ? e : new Error(String(e)));
      }
    }
  }

  /** The current connection broke: drop it and reconnect, unless it is no longer ours. */
  #lost(client: pg.Client, e: Error): void {
    if (this.#client !== client) return;
    this.#client = null;
    client.end().catch(() => {});
    this.#onBackgroundError(e);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#retryTimer || this.#subscribers.size === 0 || this.#ready === null) return;
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, 5_000);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      if (this.#subscribers.size === 0 || this.#ready === null) return;
      this.#open().then(
        () => this.#fire(null, undefined),
        (err: unknown) => {
          this.#onBackgroundError(err instanceof Error ? err : new Error(String(err)));
          this.#scheduleReconnect();
        },
      );
    }, delay);
  }
}
