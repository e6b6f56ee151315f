/**
 * The Idempotency-Key of a step of a durable engine (DBOS, Restate,
 * Temporal, an AI SDK agent loop), made from the engine's own identity of
 * the step so that every re-run of the step sends the same key
 * (docs/durable-engines.md).
 *
 * Format (stable: a key written today must be written the same way by every
 * later version, or a re-run after an upgrade would be a new call):
 *
 *     step:<engine>:<part>:<part>…
 *
 * - `<engine>` names the engine (`dbos`, `restate`, `temporal`, `ai-sdk`, or
 *   your own): 1–32 of `a-z 0-9 -`, starting with a letter.
 * - each `<part>` is a string or a safe integer, percent-encoded: every byte
 *   of its UTF-8 outside `A-Z a-z 0-9 - _ .` becomes `%XX` (upper-case hex),
 *   so `:` separates parts unambiguously and every key is visible ASCII (the
 *   contract's key syntax: 1–255 of `!`..`~`). An empty part stays empty.
 * - a key longer than 255 characters keeps its first 190 and ends with `~`
 *   and the SHA-256 (hex) of the whole long form: 255 characters exactly. `~`
 *   appears in no other key, so a shortened key never equals a full one;
 *   two long keys are equal only if their long forms are.
 *
 * Deterministic: the same engine and parts give the same key in every
 * process, browser or Node, on every run.
 */
import { sha256Hex } from './sha256.ts';

/** The prefix of every step key. */
export const STEP_KEY_PREFIX = 'step:';
/** The longest key (the contract's limit). */
export const MAX_STEP_KEY_LENGTH = 255;
/** How much of a long key's readable form is kept before `~<sha256>`. */
const KEPT_PREFIX = MAX_STEP_KEY_LENGTH - 1 - 64;

/** One part of a step's identity. */
export type StepKeyPart = string | number;

/**
 * The key of a step from its engine's stable identity.
 *
 * @example
 * stepKey('dbos', 'order-7', 2)          // 'step:dbos:order-7:2'
 * stepKey('restate', 'inv_1a2b', 0)      // 'step:restate:inv_1a2b:0'
 * stepKey('my-engine', 'run/42', 'plan') // 'step:my-engine:run%2F42:plan'
 */
export function stepKey(engine: string, ...parts: readonly StepKeyPart[]): string {
  if (typeof engine !== 'string' || !/^[a-z][a-z0-9-]{0,31}$/.test(engine)) {
    throw new TypeError(`stepKey(engine, ...parts): the engine must be 1-32 of a-z, 0-9 and -, starting with a letter, got ${JSON.stringify(engine)}`);
  }
  if (parts.length === 0) throw new TypeError('stepKey(engine, ...parts): give at least one part of the step\'s identity (a workflow id, an invocation id, ...)');
  const long = `${STEP_KEY_PREFIX}${engine}:${parts.map(encodePart).join(':')}`;
  if (long.length <= MAX_STEP_KEY_LENGTH) return long;
  return `${long.slice(0, KEPT_PREFIX)}~${sha256Hex(long)}`;
}

function encodePart(part: StepKeyPart, index: number): string {
  if (typeof part === 'number') {
    if (!Number.isSafeInteger(part)) throw new TypeError(`stepKey: part ${index + 1} is the number ${part}; a number part must be a safe integer`);
    return String(part);
  }
  if (typeof part !== 'string') throw new TypeError(`stepKey: part ${index + 1} must be a string or an integer, got ${part === null ? 'null' : typeof part}`);
  let out = '';
  for (const byte of new TextEncoder().encode(part)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
