/**
 * The one place where a provider's answer becomes a
 * {@link NormalizedCompletion}: a fold over {@link ChatDelta}s. Streamed
 * answers feed it their deltas as they arrive; whole answers are first turned
 * into the deltas they would have streamed (`openAICompletionDeltas`,
 * `anthropicMessageDeltas`) and folded the same way, so the two paths cannot
 * disagree on the result's shape.
 */
import type { ChatDelta, CompletionUsage, NormalizedCompletion } from './provider.ts';
import type { OpenAITokenLogprob, OpenAIToolCall } from './wire-types.ts';

interface ToolCallState {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Folds deltas into a normalized completion.
 *
 * @example
 * const acc = new CompletionAccumulator();
 * acc.add({ type: 'text', text: 'Hel' }); acc.add({ type: 'text', text: 'lo' }); acc.add({ type: 'finish', finish_reason: 'stop' });
 * acc.result('primary', 'gpt-4o-mini').content // 'Hello'
 */
export class CompletionAccumulator {
  #content = '';
  #refusal: string | null = null;
  #model: string | null = null;
  #finish: string | null = null;
  #usage: CompletionUsage | null = null;
  readonly #toolCalls = new Map<number, ToolCallState>();
  #logprobContent: OpenAITokenLogprob[] | null = null;
  #logprobRefusal: OpenAITokenLogprob[] | null = null;
  #outputSeen = false;

  /** Adds one delta. */
  add(delta: ChatDelta): void {
    switch (delta.type) {
      case 'text':
        this.#content += delta.text;
        this.#outputSeen = true;
        return;
      case 'refusal':
        this.#refusal = (this.#refusal ?? '') + delta.text;
        this.#outputSeen = true;
        return;
      case 'tool_call': {
        let call = this.#toolCalls.get(delta.index);
        if (call === undefined) {
          call = { id: '', name: '', arguments: '' };
          this.#toolCalls.set(delta.index, call);
        }
        if (delta.id !== undefined && delta.id !== '') call.id = delta.id;
        if (delta.name !== undefined && delta.name !== '' && call.name === '') call.name = delta.name;
        if (delta.arguments !== undefined) call.arguments += delta.arguments;
        this.#outputSeen = true;
        return;
      }
      case 'logprobs':
        if (delta.content !== undefined) this.#logprobContent = [...(this.#logprobContent ?? []), ...delta.content];
        if (delta.refusal !== undefined) this.#logprobRefusal = [...(this.#logprobRefusal ?? []), ...delta.refusal];
        return;
      case 'model':
        if (delta.model !== '') this.#model = delta.model;
        return;
      case 'finish':
        this.#finish = delta.finish_reason;
        return;
      case 'usage':
        this.#usage = delta.usage;
        return;
    }
  }

  /** Whether any output (text, refusal, tool call) has been added. */
  get hasOutput(): boolean {
    return this.#outputSeen;
  }

  /** Whether a finish reason has been added. */
  get finished(): boolean {
    return this.#finish !== null;
  }

  /**
   * The completion so far. `finish_reason` defaults to `tool_calls` when
   * there are tool calls, else `stop`; usage to zeros; `model` to
   * `configuredModel`.
   */
  result(provider: string, configuredModel: string): NormalizedCompletion {
    const toolCalls: OpenAIToolCall[] = [...this.#toolCalls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, c]) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    const usage = this.#usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    return {
      content: this.#content,
      finish_reason: this.#finish ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
      model: this.#model ?? configuredModel,
      provider,
      usage,
      tool_calls: toolCalls.length > 0 ? toolCalls : null,
      ...(this.#refusal === null ? {} : { refusal: this.#refusal }),
      ...(this.#logprobContent === null && this.#logprobRefusal === null
        ? {}
        : { logprobs: { content: this.#logprobContent, refusal: this.#logprobRefusal } }),
    };
  }
}

/**
 * Folds a whole sequence of deltas.
 *
 * @example accumulateDeltas([{ type: 'text', text: 'hi' }], 'primary', 'm').content // 'hi'
 */
export function accumulateDeltas(deltas: Iterable<ChatDelta>, provider: string, configuredModel: string): NormalizedCompletion {
  const acc = new CompletionAccumulator();
  for (const d of deltas) acc.add(d);
  return acc.result(provider, configuredModel);
}

/**
 * The deltas that stream a normalized completion again (a stored result
 * replayed as a stream): model, text, refusal, tool calls, logprobs, finish,
 * usage. `accumulateDeltas(completionDeltas(c), c.provider, c.model)` equals `c`.
 */
export function completionDeltas(completion: NormalizedCompletion): ChatDelta[] {
  const out: ChatDelta[] = [{ type: 'model', model: completion.model }];
  if (completion.content !== '') out.push({ type: 'text', text: completion.content });
  if (completion.refusal !== undefined) out.push({ type: 'refusal', text: completion.refusal });
  for (const [index, call] of (completion.tool_calls ?? []).entries()) {
    out.push({ type: 'tool_call', index, id: call.id, name: call.function.name, arguments: call.function.arguments });
  }
  if (completion.logprobs !== undefined) {
    out.push({
      type: 'logprobs',
      ...(completion.logprobs.content === null ? {} : { content: completion.logprobs.content }),
      ...(completion.logprobs.refusal === null ? {} : { refusal: completion.logprobs.refusal }),
    });
  }
  out.push({ type: 'finish', finish_reason: completion.finish_reason });
  out.push({ type: 'usage', usage: completion.usage });
  return out;
}

/** Token counts from possibly missing or bad numbers; `total` defaults to the sum. */
export function usageOf(prompt: unknown, completion: unknown, total?: unknown): CompletionUsage {
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  const p = count(prompt);
  const c = count(completion);
  return { prompt_tokens: p, completion_tokens: c, total_tokens: typeof total === 'number' ? count(total) : p + c };
}
