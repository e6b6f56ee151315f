/**
 * `onejob/react`: {@link useIntent}, one Idempotency-Key per user intent
 * (CONTRACT §10). React (18 or later) is a peer dependency. See docs/client.md.
 *
 * @example
 * import { OnejobClient } from 'onejob/client';
 * import { useIntent } from 'onejob/react';
 * const client = new OnejobClient();
 * function Summarize({ text }: { text: string }) {
 *   const intent = useIntent({ client, route: 'summarize' });
 *   return <button onClick={() => intent.start({ messages: [{ role: 'user', content: text }] })}>{intent.status}</button>;
 * }
 */
export { useIntent } from './use-intent.ts';
export type { Intent, UseIntentOptions } from './use-intent.ts';
export { IntentSession, intentStatusOf, intentStorageKey } from '../client/intent-session.ts';
export type { IntentSnapshot, IntentStatus, IntentStorage } from '../client/intent-session.ts';
