/**
 * The callback replayer of a chaos run (CONTRACT §15, issue 35). The doubt
 * fake's tasks call back when they end (signed v4 with the `dt` provider's
 * `callbackSecret`); they call this relay, which forwards each delivery
 * verbatim to the cluster's load balancer and keeps it. A doubt fault
 * ({@link CallbackRelay.replay}) then sends kept deliveries again, byte for
 * byte: to their own attempt (a reuse: must be 401) and to another attempt's
 * callback path (the signature names the attempt: must be 401). A replay
 * that was accepted is counted in the fault's record; the damage it could
 * do is what the checker's `foreign_answer` and `settled_while_live` rules
 * look for (chaos/trust-checker.ts).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One delivery the relay forwarded. */
interface Delivery {
  readonly attemptId: string;
  readonly signature: string;
  readonly body: Buffer;
  readonly status: number;
}

/** What one replay round sent and how it was answered. */
export interface ReplayRound {
  readonly sent: number;
  /** Replays not answered 401 (each one a promise of §15 broken, unless the server was unreachable: status 0). */
  readonly accepted: number;
  readonly statuses: Readonly<Record<string, number>>;
}

const PATH = /^\/v1\/attempts\/([^/]+)\/callback$/;

/** The relay between the doubt fake's callbacks and onejob, and the replayer of what it relayed. */
export class CallbackRelay {
  readonly #server: Server;
  readonly #kept: Delivery[] = [];
  #target = '';
  #port = 0;
  /** Replays answered other than 401, over the run. */
  accepted = 0;

  constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const m = PATH.exec(req.url ?? '');
        const signature = req.headers['onejob-signature'];
        if (m === null || typeof signature !== 'string' || this.#target === '') return void res.writeHead(503).end();
        const body = Buffer.concat(chunks);
        void this.#send(decodeURIComponent(m[1]!), signature, body).then((status) => {
          if (status === 200) this.#kept.push({ attemptId: decodeURIComponent(m[1]!), signature, body, status });
          if (this.#kept.length > 500) this.#kept.shift();
          res.writeHead(status === 0 ? 502 : status).end();
        });
      });
    });
  }

  /** Listens on a free loopback port. */
  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.#server.unref(); // the rig's own: never what keeps the run's process alive
    this.#port = (this.#server.address() as AddressInfo).port;
  }

  /** The URL template the doubt fake calls back (`{attempt}` is its task's Idempotency-Key). */
  get callbackUrl(): string {
    return `http://127.0.0.1:${this.#port}/v1/attempts/{attempt}/callback`;
  }

  /** Where deliveries and replays go (the load balancer), once the cluster is up. */
  setTarget(url: string): void {
    this.#target = url;
  }

  async #send(attemptId: string, signature: string, body: Buffer): Promise<number> {
    try {
      const res = await fetch(`${this.#target}/v1/attempts/${encodeURIComponent(attemptId)}/callback`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'onejob-signature': signature }, body: new Uint8Array(body), signal: AbortSignal.timeout(10_000),
      });
      await res.body?.cancel();
      return res.status;
    } catch {
      return 0;
    }
  }

  /** Replays up to `n` kept deliveries, each to its own attempt and to another kept one's attempt. */
  async replay(n: number, random: () => number): Promise<ReplayRound> {
    const statuses: Record<string, number> = {};
    let sent = 0;
    let accepted = 0;
    const count = (status: number): void => {
      sent++;
      statuses[status] = (statuses[status] ?? 0) + 1;
      // Accepted: a 2xx. A 401 is the refusal §15 asks for; 0 (no answer) and 5xx (the cluster down under a fault) changed nothing.
      if (status >= 200 && status < 300) accepted++;
    };
    for (let i = 0; i < n && this.#kept.length > 0; i++) {
      const d = this.#kept[Math.floor(random() * this.#kept.length)]!;
      count(await this.#send(d.attemptId, d.signature, d.body));
      const others = this.#kept.filter((o) => o.attemptId !== d.attemptId);
      const other = others[Math.floor(random() * others.length)];
      if (other !== undefined) count(await this.#send(other.attemptId, d.signature, d.body));
    }
    this.accepted += accepted;
    return { sent, accepted, statuses };
  }

  /** How many deliveries were relayed and kept. */
  get kept(): number {
    return this.#kept.length;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }
}
