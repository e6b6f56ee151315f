/** The one line of a job's input that the doubt queue shows (src/http/input-line.ts). */
import { describe, expect, it } from 'vitest';
import { INPUT_LINE_MAX, inputLine } from '../../src/http/input-line.ts';

describe('inputLine', () => {
  it('takes the last user message, its text parts only, with whitespace folded', () => {
    expect(inputLine({ messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'first' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'Refund\n\n  order 42' }] })).toBe('Refund order 42');
    expect(inputLine({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'text', text: 'what is this?' }] }] })).toBe('what is this?');
  });

  it('reads a Responses input (a string or items) and a prompt; anything else as compact JSON', () => {
    expect(inputLine({ input: 'tell me a joke' })).toBe('tell me a joke');
    expect(inputLine({ input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi there' }] }] })).toBe('hi there');
    expect(inputLine({ prompt: 'a fox, watercolour' })).toBe('a fox, watercolour');
    expect(inputLine({ arguments: { city: 'Oslo' } })).toBe('{"arguments":{"city":"Oslo"}}');
    expect(inputLine(null)).toBe('null');
    expect(inputLine('plain text')).toBe('plain text');
  });

  it('cuts a long line with an ellipsis, within the limit', () => {
    const line = inputLine({ messages: [{ role: 'user', content: 'word '.repeat(100) }] });
    expect(line.length).toBeLessThanOrEqual(INPUT_LINE_MAX);
    expect(line.endsWith('…')).toBe(true);
    expect(inputLine('x'.repeat(10), 5)).toBe('xxxx…');
  });
});
