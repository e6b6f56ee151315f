/**
 * Normalized {@link ChatDelta}s → OpenAI `chat.completion.chunk` events, for
 * `POST /v1/chat/completions` with `stream: true` (CONTRACT §7): live relays
 * and replays of a stored result write the same chunks. Pure.
 */
import { completionDeltas } from '../providers/completion-accumulator.ts';
import type { ChatDelta, CompletionUsage } from '../providers/provider.ts';
import type { OpenAIChatChunk } from '../providers/wire-types.ts';
import { normalizedOf } from './anthropic-messages.ts';

type ChunkChoice = OpenAIChatChunk['choices'][number];
type ChunkDelta = ChunkChoice['delta'];

/** Options of {@link ChatChunkEncoder}. */
export interface ChatChunkEncoderOptions {
  /** The completion id, the same for every answer of a job (e.g. `chatcmpl-<jobId>`). */
  readonly id: string;
  /** The model to report until a `model` delta says otherwise. */
  readonly model: string;
  /** Unix seconds. */
  readonly created: number;
  /** `stream_options.include_usage`: a last chunk with `choices: []` and `usage`. */
  readonly includeUsage: boolean;
}

/**
 * Encodes deltas as chunks: the first chunk carries `role: "assistant"`,
 * `finish` becomes the finish chunk, `usage` is sent last (when asked) by
 * {@link finish}. Then write `data: [DONE]`.
 *
 * @example
 * const enc = new ChatChunkEncoder({ id: `chatcmpl-${jobId}`, model: 'chat', created, includeUsage: true });
 * for (const c of [...enc.delta({ type: 'text', text: 'Hi' }), ...enc.finish()]) res.write(chatSseEvent(c));
 * res.write('data: [DONE]\n\n');
 */
export class ChatChunkEncoder {
  readonly #o: ChatChunkEncoderOptions;
  #model: string;
  #roleSent = false;
  #finish: string | null = null;
  #usage: CompletionUsage | null = null;

  constructor(options: ChatChunkEncoderOptions) {
    this.#o = options;
    this.#model = options.model;
  }

  /** The chunks for one delta (none for `model`, `finish` and `usage`, which are held for {@link finish}). */
  delta(d: ChatDelta): OpenAIChatChunk[] {
    switch (d.type) {
      case 'model':
        this.#model = d.model;
        return [];
      case 'finish':
        this.#finish = d.finish_reason;
        return [];
      case 'usage':
        this.#usage = d.usage;
        return [];
      case 'text':
        return [this.#chunk({ content: d.text })];
      case 'refusal':
        return [this.#chunk({ refusal: d.text })];
      case 'tool_call':
        return [
          this.#chunk({
            tool_calls: [
              {
                index: d.index,
                ...(d.id === undefined ? {} : { id: d.id, type: 'function' as const }),
                function: { ...(d.name === undefined ? {} : { name: d.name }), arguments: d.arguments ?? '' },
              },
            ],
          }),
        ];
      case 'logprobs':
        return [this.#chunk({}, null, { content: d.content ? [...d.content] : null, refusal: d.refusal ? [...d.refusal] : null })];
    }
  }

  /** The finish chunk, and the usage chunk when `includeUsage`. */
  finish(): OpenAIChatChunk[] {
    const out = [this.#chunk({}, (this.#finish ?? 'stop') as ChunkChoice['finish_reason'])];
    if (this.#o.includeUsage) {
      out.push({ id: this.#o.id, object: 'chat.completion.chunk', created: this.#o.created, model: this.#model, choices: [], usage: this.#usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
    }
    return out;
  }

  /** Every chunk of a stored result (a replay), finish and usage included. */
  replay(result: unknown): OpenAIChatChunk[] {
    return [...completionDeltas(normalizedOf(result, this.#model)).flatMap((d) => this.delta(d)), ...this.finish()];
  }

  #chunk(delta: ChunkDelta, finish: ChunkChoice['finish_reason'] = null, logprobs?: ChunkChoice['logprobs']): OpenAIChatChunk {
    const first = !this.#roleSent;
    this.#roleSent = true;
    return {
      id: this.#o.id,
      object: 'chat.completion.chunk',
      created: this.#o.created,
      model: this.#model,
      choices: [{ index: 0, delta: first ? { role: 'assistant', ...delta } : delta, finish_reason: finish, ...(logprobs === undefined ? {} : { logprobs }) }],
    };
  }
}

/**
 * One chunk as SSE text (`data: <json>`); end the stream with `data: [DONE]`.
 *
 * @example chatSseEvent(chunk) // 'data: {"id":"chatcmpl-…",…}\n\n'
 */
export function chatSseEvent(chunk: OpenAIChatChunk): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}
