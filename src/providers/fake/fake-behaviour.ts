/**
 * The fake provider's script language: what one call does (a
 * {@link FakeBehaviour}), when a behaviour applies (a {@link FakeRule}), and
 * the validation of scripts that arrive as JSON (a file, `POST /script`, the
 * `Onejob-Fake-Behaviour` header).
 *
 * Everything here is plain JSON, so a script means the same in-process, over
 * HTTP from another process, and in a config file.
 */

/** The wire protocols the fake speaks. */
export type FakeProtocol = 'openai' | 'anthropic';

/** Where the connection is cut by a `reset` behaviour. */
export type FakeResetPoint = 'before-headers' | 'after-headers' | 'mid-body';

/**
 * What the fake does with one call. Steps run in this order: wait for the
 * `gate`, wait `delayMs`, then exactly one action: `hang`, `reset`,
 * `status` ≥ 300 (an error in the protocol's real error shape), `malformed`,
 * `rawBody`, or a reply (the default).
 *
 * @example { delayMs: 1000, reply: { summary: 'ok' } }  // JSON rendered as the text content
 * @example { status: 529 }                               // Anthropic's overloaded_error (OpenAI shape on the OpenAI path)
 * @example { reset: 'before-headers' }                   // the request arrives, the socket is reset
 * @example { gate: 'late', reply: 'finally' }            // answers when `fake.release('late')` is called
 */
export interface FakeBehaviour {
  /** The reply's text; a non-string JSON value is sent as its JSON text. Default: the last user message's text (an echo). */
  readonly reply?: unknown;
  /** OpenAI vocabulary (`stop`, `length`, `tool_calls`, `content_filter`), mapped to Anthropic's on `/v1/messages`. Default `stop`. */
  readonly finishReason?: string;
  /** The `model` of the reply. Default: the request's `model`. */
  readonly model?: string;
  /** Token counts of the reply. Default: about one token per four characters. */
  readonly usage?: { readonly prompt_tokens?: number; readonly completion_tokens?: number };
  /** Milliseconds to wait before acting (after the gate). */
  readonly delayMs?: number;
  /** Wait until `release(gate)` (or `POST /release`) before acting. */
  readonly gate?: string;
  /** Never answer (until the fake closes or the client goes away). */
  readonly hang?: boolean;
  /** Cut the connection at this point. */
  readonly reset?: FakeResetPoint;
  /** Answer with this status. ≥ 300: an error body in the protocol's shape (see `error`). */
  readonly status?: number;
  /** Overrides of the error body for `status` ≥ 300. */
  readonly error?: { readonly type?: string; readonly message?: string; readonly code?: string };
  /** Answer 200 (or `status`) with a truncated, unparseable JSON body. */
  readonly malformed?: boolean;
  /** Answer with exactly this body (content type JSON) and `status` (default 200). */
  readonly rawBody?: string;
  /** Extra response headers (e.g. `{ "retry-after": "2" }`). */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Tool calls of the reply (OpenAI `tool_calls`, Anthropic `tool_use`
   * blocks); `arguments` is the JSON text, or any JSON value sent as its
   * text. `finishReason` then defaults to `tool_calls`.
   */
  readonly toolCalls?: readonly FakeToolCall[];
  /** A refusal (OpenAI `message.refusal`; Anthropic: the text, with `stop_reason: refusal`). */
  readonly refusal?: string;
  /**
   * With no `reply`, `toolCalls`, `refusal` or `chunks`: answer as a model would the request's
   * own shape instead of echoing it: a call of its tool when it offers tools (the one
   * `tool_choice` names, else the first; not after a tool's result), JSON that fits its JSON
   * schema when it asks for one (`response_format`), else the echo. The demo sets it. Default false.
   */
  readonly fitRequest?: boolean;
  /** Streaming: the text's pieces, one content event each (default: the reply split into words). */
  readonly chunks?: readonly string[];
  /** Streaming: milliseconds to wait before each event after the first. */
  readonly chunkDelayMs?: number;
  /** Streaming: after `afterChunks` content events, wait until `release(gate)`. */
  readonly streamGate?: { readonly afterChunks: number; readonly gate: string };
  /** Streaming: after `afterChunks` content events, send the protocol's error event and end the stream. */
  readonly streamError?: { readonly afterChunks: number; readonly type?: string; readonly message?: string };
  /** Streaming: after `afterChunks` content events, cut the connection (no end event, no end of body). */
  readonly streamCut?: { readonly afterChunks: number };
  /**
   * Do the work, then lose the answer (CONTRACT §11): the completion is
   * made (and stored, for a request with `store: true`; a task is created
   * and runs), then the connection is cut before the status line. A lookup
   * finds the work; the caller never saw it.
   */
  readonly loseAnswer?: boolean;
  /**
   * A task (`POST /v1/tasks`): how it runs. `runMs` (default 0) in
   * `processing`, then `status` (default `succeeded`) with `output` (default
   * `{"echo": <input>}`).
   */
  readonly task?: { readonly runMs?: number; readonly status?: 'succeeded' | 'failed' | 'canceled'; readonly output?: unknown };
}

/** One scripted tool call. */
export interface FakeToolCall {
  /** Default `call_fake_<seq>_<i>` (OpenAI) or `toolu_fake_<seq>_<i>` (Anthropic). */
  readonly id?: string;
  readonly name: string;
  /** The arguments: JSON text, or a JSON value sent as its text. Default `{}`. */
  readonly arguments?: unknown;
}

/**
 * When a rule applies. Every given field must match.
 *
 * @example { contains: 'please hang' }
 * @example { header: { name: 'onejob-job-id', value: 'job_123' } }
 */
export interface FakeMatch {
  /** A substring of the request's message text (all messages, system included). */
  readonly contains?: string;
  /** A request header (name case-insensitive); without `value`, its presence. */
  readonly header?: { readonly name: string; readonly value?: string };
  /** The wire protocol of the call. */
  readonly protocol?: FakeProtocol;
  /** The request's `model`. */
  readonly model?: string;
}

/** A behaviour applied to matching calls, optionally only `times` times. */
export interface FakeRule {
  readonly match: FakeMatch;
  readonly behaviour: FakeBehaviour;
  /** How many matching calls it applies to; default unlimited. */
  readonly times?: number;
}

/**
 * A whole script, as a file, `POST /script` body, or start option. A bare
 * array is shorthand for `{ queue: [...] }`.
 */
export interface FakeScript {
  /** Behaviours for the next calls, one each, in order (appended to the queue). */
  readonly queue?: readonly FakeBehaviour[];
  /** The behaviour when nothing else applies. */
  readonly default?: FakeBehaviour;
  /** Rules, checked in order before the queue (appended). */
  readonly rules?: readonly FakeRule[];
  /** Clear the queue and rules before adding these. Default false. */
  readonly replace?: boolean;
}

/** The request header whose JSON value overrides every other choice for that call. */
export const FAKE_BEHAVIOUR_HEADER = 'onejob-fake-behaviour';

const BEHAVIOUR_KEYS = new Set([
  'reply', 'finishReason', 'model', 'usage', 'delayMs', 'gate', 'hang', 'reset', 'status', 'error', 'malformed', 'rawBody', 'headers',
  'toolCalls', 'refusal', 'chunks', 'chunkDelayMs', 'streamGate', 'streamError', 'streamCut', 'fitRequest', 'loseAnswer', 'task',
]);
const RESET_POINTS = new Set<string>(['before-headers', 'after-headers', 'mid-body']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(path: string, message: string): never {
  throw new TypeError(`${path}: ${message}`);
}

/**
 * Checks that `value` is a {@link FakeBehaviour} and returns it.
 *
 * @throws TypeError naming the offending path, e.g. `script.queue[2].delayMs: must be a non-negative number`.
 * @example parseFakeBehaviour(JSON.parse('{"status":503}'))
 */
export function parseFakeBehaviour(value: unknown, path = 'behaviour'): FakeBehaviour {
  if (!isRecord(value)) fail(path, 'must be an object');
  for (const key of Object.keys(value)) {
    if (!BEHAVIOUR_KEYS.has(key)) fail(`${path}.${key}`, `unknown field (known: ${[...BEHAVIOUR_KEYS].join(', ')})`);
  }
  const v = value;
  const num = (key: string, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const x = v[key];
    if (x !== undefined && (typeof x !== 'number' || !Number.isFinite(x) || x < min || x > max)) {
      fail(`${path}.${key}`, `must be a number between ${min} and ${max}`);
    }
  };
  const str = (key: string) => {
    if (v[key] !== undefined && typeof v[key] !== 'string') fail(`${path}.${key}`, 'must be a string');
  };
  num('delayMs', 0);
  num('chunkDelayMs', 0);
  str('refusal');
  if (v.toolCalls !== undefined) {
    if (!Array.isArray(v.toolCalls)) fail(`${path}.toolCalls`, 'must be an array');
    for (const [i, call] of v.toolCalls.entries()) {
      if (!isRecord(call) || typeof call.name !== 'string' || (call.id !== undefined && typeof call.id !== 'string')) {
        fail(`${path}.toolCalls[${i}]`, 'must be { name: string, id?: string, arguments?: JSON }');
      }
    }
  }
  if (v.chunks !== undefined && (!Array.isArray(v.chunks) || v.chunks.some((c) => typeof c !== 'string'))) fail(`${path}.chunks`, 'must be an array of strings');
  const afterChunks = (key: string, extra: readonly string[]) => {
    const x = v[key];
    if (x === undefined) return;
    if (!isRecord(x) || typeof x.afterChunks !== 'number' || !Number.isInteger(x.afterChunks) || x.afterChunks < 0) {
      fail(`${path}.${key}`, 'must be an object with a non-negative integer afterChunks');
    }
    for (const k of Object.keys(x)) if (k !== 'afterChunks' && !extra.includes(k)) fail(`${path}.${key}.${k}`, 'unknown field');
    for (const k of extra) if (x[k] !== undefined && typeof x[k] !== 'string') fail(`${path}.${key}.${k}`, 'must be a string');
  };
  afterChunks('streamGate', ['gate']);
  if (v.streamGate !== undefined && typeof (v.streamGate as { gate?: unknown }).gate !== 'string') fail(`${path}.streamGate.gate`, 'must be a string');
  afterChunks('streamError', ['type', 'message']);
  afterChunks('streamCut', []);
  num('status', 100, 599);
  str('finishReason');
  str('model');
  str('gate');
  str('rawBody');
  if (v.hang !== undefined && typeof v.hang !== 'boolean') fail(`${path}.hang`, 'must be a boolean');
  if (v.malformed !== undefined && typeof v.malformed !== 'boolean') fail(`${path}.malformed`, 'must be a boolean');
  if (v.fitRequest !== undefined && typeof v.fitRequest !== 'boolean') fail(`${path}.fitRequest`, 'must be a boolean');
  if (v.loseAnswer !== undefined && typeof v.loseAnswer !== 'boolean') fail(`${path}.loseAnswer`, 'must be a boolean');
  if (v.task !== undefined) {
    if (!isRecord(v.task)) fail(`${path}.task`, 'must be an object');
    for (const k of Object.keys(v.task)) if (k !== 'runMs' && k !== 'status' && k !== 'output') fail(`${path}.task.${k}`, 'unknown field');
    const runMs = v.task.runMs;
    if (runMs !== undefined && (typeof runMs !== 'number' || !Number.isFinite(runMs) || runMs < 0)) fail(`${path}.task.runMs`, 'must be a non-negative number');
    if (v.task.status !== undefined && v.task.status !== 'succeeded' && v.task.status !== 'failed' && v.task.status !== 'canceled') {
      fail(`${path}.task.status`, 'must be one of succeeded, failed, canceled');
    }
  }
  if (v.reset !== undefined && (typeof v.reset !== 'string' || !RESET_POINTS.has(v.reset))) {
    fail(`${path}.reset`, `must be one of ${[...RESET_POINTS].join(', ')}`);
  }
  if (v.usage !== undefined) {
    if (!isRecord(v.usage)) fail(`${path}.usage`, 'must be an object');
    for (const [k, x] of Object.entries(v.usage)) {
      if (k !== 'prompt_tokens' && k !== 'completion_tokens') fail(`${path}.usage.${k}`, 'unknown field');
      if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) fail(`${path}.usage.${k}`, 'must be a non-negative integer');
    }
  }
  if (v.error !== undefined) {
    if (!isRecord(v.error)) fail(`${path}.error`, 'must be an object');
    for (const [k, x] of Object.entries(v.error)) {
      if (k !== 'type' && k !== 'message' && k !== 'code') fail(`${path}.error.${k}`, 'unknown field');
      if (typeof x !== 'string') fail(`${path}.error.${k}`, 'must be a string');
    }
  }
  if (v.headers !== undefined) {
    if (!isRecord(v.headers)) fail(`${path}.headers`, 'must be an object');
    for (const [k, x] of Object.entries(v.headers)) {
      if (typeof x !== 'string') fail(`${path}.headers.${k}`, 'must be a string');
    }
  }
  return v as FakeBehaviour;
}

/**
 * Checks that `value` is a {@link FakeRule} and returns it.
 *
 * @throws TypeError naming the offending path.
 */
export function parseFakeRule(value: unknown, path = 'rule'): FakeRule {
  if (!isRecord(value)) fail(path, 'must be an object');
  for (const key of Object.keys(value)) {
    if (key !== 'match' && key !== 'behaviour' && key !== 'times') fail(`${path}.${key}`, 'unknown field (known: match, behaviour, times)');
  }
  const match = value.match;
  if (!isRecord(match)) fail(`${path}.match`, 'must be an object');
  for (const [k, x] of Object.entries(match)) {
    if (k === 'contains' || k === 'model') {
      if (typeof x !== 'string') fail(`${path}.match.${k}`, 'must be a string');
    } else if (k === 'protocol') {
      if (x !== 'openai' && x !== 'anthropic') fail(`${path}.match.protocol`, 'must be "openai" or "anthropic"');
    } else if (k === 'header') {
      if (!isRecord(x) || typeof x.name !== 'string' || (x.value !== undefined && typeof x.value !== 'string')) {
        fail(`${path}.match.header`, 'must be { name: string, value?: string }');
      }
    } else {
      fail(`${path}.match.${k}`, 'unknown field (known: contains, header, protocol, model)');
    }
  }
  if (value.times !== undefined && (typeof value.times !== 'number' || !Number.isInteger(value.times) || value.times < 1)) {
    fail(`${path}.times`, 'must be a positive integer');
  }
  return { match: match as FakeMatch, behaviour: parseFakeBehaviour(value.behaviour, `${path}.behaviour`), ...(value.times === undefined ? {} : { times: value.times as number }) };
}

/**
 * Checks that `value` is a {@link FakeScript} (or a bare array of behaviours) and returns the script.
 *
 * @throws TypeError naming the offending path.
 * @example parseFakeScript([{ status: 503 }, { reply: 'ok' }]) // { queue: [...] }
 */
export function parseFakeScript(value: unknown, path = 'script'): FakeScript {
  if (Array.isArray(value)) return { queue: value.map((b, i) => parseFakeBehaviour(b, `${path}[${i}]`)) };
  if (!isRecord(value)) fail(path, 'must be an array of behaviours or an object { queue, default, rules, replace }');
  for (const key of Object.keys(value)) {
    if (key !== 'queue' && key !== 'default' && key !== 'rules' && key !== 'replace') {
      fail(`${path}.${key}`, 'unknown field (known: queue, default, rules, replace)');
    }
  }
  const out: { -readonly [K in keyof FakeScript]: FakeScript[K] } = {};
  if (value.queue !== undefined) {
    if (!Array.isArray(value.queue)) fail(`${path}.queue`, 'must be an array');
    out.queue = value.queue.map((b, i) => parseFakeBehaviour(b, `${path}.queue[${i}]`));
  }
  if (value.rules !== undefined) {
    if (!Array.isArray(value.rules)) fail(`${path}.rules`, 'must be an array');
    out.rules = value.rules.map((r, i) => parseFakeRule(r, `${path}.rules[${i}]`));
  }
  if (value.default !== undefined) out.default = parseFakeBehaviour(value.default, `${path}.default`);
  if (value.replace !== undefined) {
    if (typeof value.replace !== 'boolean') fail(`${path}.replace`, 'must be a boolean');
    out.replace = value.replace;
  }
  return out;
}
