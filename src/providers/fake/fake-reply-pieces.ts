/**
 * How the fake provider cuts a reply into the pieces of a stream, the same
 * for every protocol it speaks (chat chunks, Messages deltas, Responses
 * deltas).
 */

/** Splits text into words with their trailing spaces (the default `chunks`). */
export function defaultChunks(text: string): string[] {
  return text === '' ? [] : (text.match(/\S+\s*|\s+/g) ?? [text]);
}

/** Splits a tool call's argument text into up to three pieces, the way providers stream them. */
export function argumentPieces(text: string): string[] {
  if (text.length < 3) return [text];
  const third = Math.ceil(text.length / 3);
  return [text.slice(0, third), text.slice(third, 2 * third), text.slice(2 * third)].filter((p) => p !== '');
}
