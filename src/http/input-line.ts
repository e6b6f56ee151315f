/**
 * A job's input as one short line, for lists where the whole input would be
 * too much (the dashboard's doubt queue): what a person reads to recognise
 * the job.
 */

/** The longest line {@link inputLine} returns, in characters (an ellipsis included). */
export const INPUT_LINE_MAX = 160;

/** The text of a message's content: a string, or the text parts of a content array (images and other parts left out). */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  const texts = content
    .map((part: unknown) => (part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : null))
    .filter((t): t is string => t !== null);
  return texts.length > 0 ? texts.join(' ') : null;
}

/** The last user message of a `messages` (Chat Completions, Messages) or `input` (Responses) list. */
function lastUserText(list: unknown): string | null {
  if (!Array.isArray(list)) return null;
  for (let i = list.length - 1; i >= 0; i--) {
    const m = list[i] as { role?: unknown; content?: unknown } | null;
    if (m !== null && typeof m === 'object' && m.role === 'user') {
      const text = contentText(m.content);
      if (text !== null) return text;
    }
  }
  return null;
}

/**
 * The input as one line of at most `max` characters: the last user message's
 * text (chat `messages`, or a Responses `input` string or item list), else a
 * `prompt` string, else the input as compact JSON; whitespace runs become one
 * space, and a longer text is cut with `…`.
 *
 * @example inputLine({ messages: [{ role: 'user', content: 'Refund\norder 42' }] }) // 'Refund order 42'
 * @example inputLine({ arguments: { city: 'Oslo' } }) // '{"arguments":{"city":"Oslo"}}'
 */
export function inputLine(input: unknown, max = INPUT_LINE_MAX): string {
  const o = input !== null && typeof input === 'object' && !Array.isArray(input) ? (input as Record<string, unknown>) : null;
  const text =
    (o && lastUserText(o.messages)) ??
    (o && (typeof o.input === 'string' ? o.input : lastUserText(o.input))) ??
    (o && typeof o.prompt === 'string' ? o.prompt : null) ??
    (typeof input === 'string' ? input : JSON.stringify(input) ?? 'null');
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= max ? line : `${line.slice(0, max - 1).trimEnd()}…`;
}
