/**
 * Idempotency-Keys for intents: one key per thing the user meant to do.
 */

/** The prefix of keys minted by {@link newIntentKey}. */
export const INTENT_KEY_PREFIX = 'ik_';

/**
 * A new Idempotency-Key: `ik_` and a random UUID (122 random bits), within the
 * contract's syntax (1–255 visible ASCII characters). Uses
 * `crypto.randomUUID` where the page is a secure context, else
 * `crypto.getRandomValues`.
 *
 * @example newIntentKey() // 'ik_3b241101-e2bb-4255-8caf-4136c566a962'
 */
export function newIntentKey(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === 'function') return INTENT_KEY_PREFIX + c.randomUUID();
  const bytes = c.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${INTENT_KEY_PREFIX}${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Whether `key` has the contract's Idempotency-Key syntax: 1–255 characters, each `!`..`~`. */
export function isValidIdempotencyKey(key: string): boolean {
  return /^[!-~]{1,255}$/.test(key);
}
