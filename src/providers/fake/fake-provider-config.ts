/**
 * The configuration of a `fake` provider: onejob's fake server, either
 * embedded (started in-process at the first call) or external (`onejob
 * fake-provider`, another process, reached at `baseUrl`).
 */
import type { FakeBehaviour, FakeScript } from './fake-behaviour.ts';
import type { ProviderConfigBase } from '../provider-config.ts';

/**
 * A `fake` provider: the `openai` (or `anthropic`) adapter pointed at a fake
 * server, so everything but the real network behaves as in production.
 *
 * @example { type: 'fake' }                                            // embedded; echoes the last user message
 * @example { type: 'fake', script: { default: { delayMs: 30000 } } }  // embedded; every call times out
 * @example { type: 'fake', baseUrl: 'http://127.0.0.1:4010/v1' }     // an external `onejob fake-provider --port 4010`
 */
export interface FakeProviderConfig extends ProviderConfigBase {
  readonly type: 'fake';
  /**
   * An external fake server's URL (with `/v1` for the OpenAI protocol, like a
   * real OpenAI-compatible `baseUrl`). Absent: an embedded server is started
   * on 127.0.0.1 (a free port) at the first call and stopped by `close()`.
   */
  readonly baseUrl?: string | undefined;
  /** The wire protocol to speak; default `openai`. */
  readonly protocol?: 'openai' | 'anthropic' | undefined;
  /** The model name; default `fake-model`. */
  readonly model?: string | undefined;
  /** Sent as the API key (an external fake may require one). */
  readonly apiKey?: string | null | undefined;
  /** Embedded only: the server's initial script (a bare array is a queue). */
  readonly script?: FakeScript | readonly FakeBehaviour[] | undefined;
}
