/**
 * What each of the fake provider's protocol objects (`fake-*-api.ts`) gets
 * from the server that routes to it: the script, the gates, the key, the
 * lookup counter. The server owns these once; a protocol only speaks its wire.
 */
import type { FakeBehaviour, FakeProtocol } from './fake-behaviour.ts';

/** Where a call's behaviour came from. */
export type FakeCallSource = 'header' | 'rule' | 'queue' | 'default';

/** The server's services, as a protocol object sees them. */
export interface FakeApiContext {
  /** `http://host:port` of the server. */
  readonly url: string;
  /** With the server's `apiKey`: the 401 a request without it gets, else null. */
  checkAuth(protocol: FakeProtocol, headers: Readonly<Record<string, string>>): { readonly status: number; readonly message: string } | null;
  /**
   * The behaviour for a request (header, rule, queue, default: the first that applies).
   *
   * @throws TypeError when the `Onejob-Fake-Behaviour` header is not a behaviour.
   */
  choose(protocol: FakeProtocol, headers: Readonly<Record<string, string>>, body: unknown): { readonly behaviour: FakeBehaviour; readonly source: FakeCallSource };
  /** Resolves true once `gate` is open, false when `signal` aborts first. */
  waitGate(gate: string, signal: AbortSignal): Promise<boolean>;
  /**
   * Counts a create of the attempt named by `headers`' `Onejob-Attempt-Id`
   * (`FakeProvider.submits`): without `behaviour` one more create arrived; with
   * it, the create chose that behaviour.
   */
  noteSubmit(headers: Readonly<Record<string, string>>, behaviour?: FakeBehaviour): void;
  /** Counts one question about earlier work (`FakeProvider.lookups`). */
  countLookup(): void;
  /** What response and task ids carry between `…_fake_` and their number: '' or a token of this start and `_`. */
  readonly idPart: string;
  /** Aborted when the server closes: work in progress stops. */
  readonly closing: AbortSignal;
}
