/**
 * Anthropic Messages answers → normalized {@link ChatDelta}s: a whole
 * `message` ({@link anthropicMessageDeltas}) and the streamed event sequence
 * `message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`,
 * `message_stop` ({@link AnthropicStreamDecoder}). Text blocks become
 * content, `tool_use` blocks OpenAI tool calls, `stop_reason` a
 * `finish_reason`, usage OpenAI's counts. Thinking and server-tool blocks are
 * not carried (OpenAI's vocabulary has no place for them).
 */
import { usageOf } from '../completion-accumulator.ts';
import type { StreamDecoder, StreamStep } from '../http-chat-provider.ts';
import type { ChatDelta, CompletionUsage } from '../provider.ts';
import type { AnthropicMessage, AnthropicStreamEvent } from '../wire-types.ts';

/** Anthropic `stop_reason` → OpenAI `finish_reason`; unmapped values pass through. */
export const ANTHROPIC_FINISH_REASONS: Readonly<Record<string, string>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

/** The OpenAI `finish_reason` of an Anthropic `stop_reason` (`end_turn` when absent). */
export function finishReasonOf(stopReason: unknown): string {
  const stop = typeof stopReason === 'string' ? stopReason : 'end_turn';
  return ANTHROPIC_FINISH_REASONS[stop] ?? stop;
}

/**
 * Anthropic usage → OpenAI's: `prompt_tokens` = input + cache creation +
 * cache read tokens (OpenAI counts cached tokens in `prompt_tokens`),
 * `completion_tokens` = `output_tokens`.
 */
export function anthropicUsage(usage: unknown): CompletionUsage {
  const u = (typeof usage === 'object' && usage !== null ? usage : {}) as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  return usageOf(n(u.input_tokens) + n(u.cache_creation_input_tokens) + n(u.cache_read_input_tokens), u.output_tokens);
}

/** The deltas a whole Messages API response would have streamed, or why it is not a message. */
export function anthropicMessageDeltas(body: unknown): ChatDelta[] | { readonly malformed: string } {
  if (typeof body !== 'object' || body === null) return { malformed: 'not an object' };
  const b = body as Partial<AnthropicMessage>;
  if (b.type !== 'message') return { malformed: `type is ${JSON.stringify(b.type)}, not "message"` };
  if (!Array.isArray(b.content)) return { malformed: 'content is not an array' };
  const deltas: ChatDelta[] = [];
  if (typeof b.model === 'string' && b.model !== '') deltas.push({ type: 'model', model: b.model });
  let toolIndex = 0;
  for (const block of b.content) {
    if (typeof block !== 'object' || block === null) continue;
    if (block.type === 'text') {
      if (typeof block.text === 'string' && block.text !== '') deltas.push({ type: 'text', text: block.text });
    } else if (block.type === 'tool_use') {
      deltas.push({ type: 'tool_call', index: toolIndex++, id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
  }
  deltas.push({ type: 'finish', finish_reason: finishReasonOf(b.stop_reason) });
  deltas.push({ type: 'usage', usage: anthropicUsage(b.usage) });
  return deltas;
}

/**
 * Reads Anthropic's stream event by event. `ping` and unknown event types
 * are ignored (Anthropic may add event types); an `error` event is the
 * provider reporting a failure; `message_stop` is the terminator.
 */
export class AnthropicStreamDecoder implements StreamDecoder {
  #done = false;
  /** Content block index → tool call index (tool calls are numbered in order). */
  readonly #toolIndexOfBlock = new Map<number, number>();
  #usage: Record<string, unknown> = {};

  get done(): boolean {
    return this.#done;
  }

  decode(event: string | undefined, data: string): StreamStep {
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      return { malformed: `a stream event is not JSON: ${data.slice(0, 80)}` };
    }
    if (typeof json !== 'object' || json === null) return { malformed: 'a stream event is not an object' };
    const type = (json as { type?: unknown }).type ?? event;
    if (type === 'error') {
      const e = ((json as { error?: unknown }).error ?? {}) as { type?: unknown; message?: unknown };
      return { error: { ...(typeof e.type === 'string' ? { type: e.type } : {}), ...(typeof e.message === 'string' ? { message: e.message } : {}) } };
    }
    const ev = json as AnthropicStreamEvent;
    const deltas: ChatDelta[] = [];
    switch (ev.type) {
      case 'message_start': {
        if (typeof ev.message?.model === 'string' && ev.message.model !== '') deltas.push({ type: 'model', model: ev.message.model });
        this.#usage = { ...(ev.message?.usage ?? {}) };
        deltas.push({ type: 'usage', usage: anthropicUsage(this.#usage) });
        break;
      }
      case 'content_block_start': {
        const block = ev.content_block;
        if (block?.type === 'text' && typeof block.text === 'string' && block.text !== '') deltas.push({ type: 'text', text: block.text });
        if (block?.type === 'tool_use') {
          const index = this.#toolIndexOfBlock.size;
          this.#toolIndexOfBlock.set(ev.index, index);
          deltas.push({ type: 'tool_call', index, id: block.id, name: block.name, arguments: '' });
        }
        break;
      }
      case 'content_block_delta': {
        const d = ev.delta;
        if (d?.type === 'text_delta' && d.text !== '') deltas.push({ type: 'text', text: d.text });
        if (d?.type === 'input_json_delta') {
          const index = this.#toolIndexOfBlock.get(ev.index);
          if (index === undefined) return { malformed: `input_json_delta for block ${ev.index}, which is not a tool_use block` };
          if (d.partial_json !== '') deltas.push({ type: 'tool_call', index, arguments: d.partial_json });
        }
        break;
      }
      case 'message_delta': {
        if (ev.delta?.stop_reason !== null && ev.delta?.stop_reason !== undefined) deltas.push({ type: 'finish', finish_reason: finishReasonOf(ev.delta.stop_reason) });
        for (const [k, v] of Object.entries(ev.usage ?? {})) if (v !== null && v !== undefined) this.#usage[k] = v;
        deltas.push({ type: 'usage', usage: anthropicUsage(this.#usage) });
        break;
      }
      case 'message_stop':
        this.#done = true;
        break;
      default:
        break; // content_block_stop, ping, and event types added later
    }
    return { deltas };
  }
}
