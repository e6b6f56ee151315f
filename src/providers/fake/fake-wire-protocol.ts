/**
 * One chat wire protocol the fake provider speaks (`fake-chat-completions.ts`,
 * `fake-anthropic-messages.ts`): how a request is checked, how a reply, an
 * error and a stream look on that wire. The behaviour of a call (gates,
 * delays, resets, cuts) is run once for both, by `fake-chat-api.ts`.
 */
import type { ServerResponse } from 'node:http';
import type { FakeCall } from './fake-call.ts';
import type { FakeBehaviour, FakeProtocol } from './fake-behaviour.ts';

/** One SSE event: an `event:` name (Anthropic's named events) and its data (a string is sent as it is). */
export interface FakeSseEvent {
  readonly name?: string;
  readonly data: unknown;
}

/**
 * One event of a planned stream: `content` events (a text piece, a piece of
 * tool-call arguments, a refusal) are counted for `afterChunks`; `end` is the
 * first event after the content (the finish chunk, `message_delta`), where a
 * gate, error or cut "after all content" happens; the rest is `framing`.
 */
export interface FakeStreamStep {
  readonly kind: 'content' | 'framing' | 'end';
  readonly event: FakeSseEvent;
}

/** An error body's overrides (a behaviour's `error`, or the fake's own refusal). */
export interface FakeErrorOverride {
  readonly type?: string | undefined;
  readonly message?: string | undefined;
  readonly code?: string | undefined;
}

/** What makes one chat wire protocol. */
export interface FakeWireProtocol {
  readonly protocol: FakeProtocol;
  /** The 400 the real API answers a body it refuses (no `model`, no `messages`, …), else null. */
  validate(body: unknown): { readonly status: number; readonly message: string } | null;
  /** The request id header of call `seq` (`x-request-id`, `request-id`). */
  requestIdHeader(seq: number): Record<string, string>;
  /** The whole answer to a call. */
  completion(call: FakeCall, b: FakeBehaviour): Record<string, unknown>;
  /** The answer as the protocol's event sequence. */
  streamPlan(call: FakeCall, b: FakeBehaviour): FakeStreamStep[];
  /** The error event sent mid-stream (`streamError`). */
  errorEvent(e: { readonly type?: string; readonly message?: string }): FakeSseEvent;
  /** Answers `status` with an error body in the protocol's real shape. */
  sendError(res: ServerResponse, status: number, override: FakeErrorOverride, headers?: Record<string, string>): void;
}

/** One SSE event as text (`event:` line for named events, then `data:`). */
export function sseEvent(event: FakeSseEvent): string {
  const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
  return `${event.name === undefined ? '' : `event: ${event.name}\n`}data: ${data}\n\n`;
}

/** Collects the steps of a stream plan. */
export function streamSteps(): { readonly steps: FakeStreamStep[]; framing(data: unknown, name?: string): void; content(data: unknown, name?: string): void; end(data: unknown, name?: string): void } {
  const steps: FakeStreamStep[] = [];
  const add = (kind: FakeStreamStep['kind']) => (data: unknown, name?: string) => {
    steps.push({ kind, event: { ...(name === undefined ? {} : { name }), data } });
  };
  return { steps, framing: add('framing'), content: add('content'), end: add('end') };
}

/** Checks the fields both chat APIs insist on: a JSON object with `model` and non-empty `messages`. */
export function chatBodyProblem(body: unknown): { status: number; message: string } | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { status: 400, message: 'request body must be a JSON object' };
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') return { status: 400, message: 'model: Field required' };
  if (!Array.isArray(b.messages) || b.messages.length === 0) return { status: 400, message: 'messages: must be a non-empty array' };
  return null;
}
