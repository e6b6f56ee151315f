/**
 * Prompt rendering per provider (CONTRACT §5): turn a case's chat input into
 * what the provider's model will actually read, count its tokens, and find
 * what would make the case meaningless on that provider.
 *
 * - OpenAI models: the message list is counted with the model's BPE encoding
 *   (`gpt-tokenizer`, encodings shipped in the package), with OpenAI's
 *   per-message overhead. Exact for models the package knows; other model
 *   names (an OpenAI-compatible server without a chat template) are counted
 *   with `o200k_base` and marked as an estimate.
 * - Anthropic: `POST /v1/messages/count_tokens` when the endpoint answers;
 *   otherwise an estimate (o200k_base × 1.2), marked as such.
 * - Open models: the Hugging Face chat template (`chatTemplate`, or
 *   `tokenizerConfigPath` → `tokenizer_config.json`'s `chat_template`) is
 *   rendered with @huggingface/jinja. A template error, a dropped system
 *   message or a broken role order fails the case. Tokens of the rendered
 *   text are an o200k_base estimate (the model's own vocabulary is not loaded).
 *
 * Every target: prompt tokens plus `max_tokens` must fit `contextWindow`.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { Template } from '@huggingface/jinja';
import cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import o200k from 'gpt-tokenizer/encoding/o200k_base';
import { modelToEncodingMap } from 'gpt-tokenizer/mapping';
import * as gptModels from 'gpt-tokenizer/models';
import { FindingCode, type Finding } from './finding.ts';

/** The provider settings rendering needs (read from the provider's config entry). */
export interface PromptTarget {
  /** Provider type: `openai`, `anthropic`, `fake`, … */
  readonly type: string;
  readonly model: string;
  /** Needed for Anthropic's token counting. */
  readonly baseUrl?: string | null;
  readonly apiKey?: string | null;
  /** Tokens; when absent, the model's known window (OpenAI models) or the template's `model_max_length`. */
  readonly contextWindow?: number | null;
  /** The provider's default output budget when the input names none. */
  readonly maxOutputTokens?: number | null;
  /** A Jinja chat template (the text). */
  readonly chatTemplate?: string | null;
  /** A `tokenizer_config.json` whose `chat_template` (and bos/eos tokens) are used. */
  readonly tokenizerConfigPath?: string | null;
}

/** How the tokens were counted. */
export type TokenCountMethod = 'gpt-tokenizer' | 'anthropic-count-tokens' | 'chat-template' | 'estimate';

/** The result of rendering one case's prompt for one provider. */
export interface PromptRender {
  /** No finding. */
  readonly ok: boolean;
  readonly method: TokenCountMethod;
  /** False when `promptTokens` is an estimate. */
  readonly exact: boolean;
  /** What was used, in words (`o200k_base`, `estimate: count_tokens answered 404`, …). */
  readonly detail: string;
  readonly promptTokens: number | null;
  /** The output budget counted against the window (the input's `max_tokens`, else the provider's default), or null. */
  readonly maxTokens: number | null;
  readonly contextWindow: number | null;
  /** The rendered template text (chat templates only). */
  readonly rendered?: string;
  readonly findings: readonly Finding[];
}

/** Options of {@link renderPrompt}. */
export interface RenderPromptOptions {
  /** Resolves a relative `tokenizerConfigPath`. Default `process.cwd()`. */
  readonly baseDir?: string;
  /** Deadline of the Anthropic token-counting call. Default 5000 ms. */
  readonly countTimeoutMs?: number;
}

/** A chat input as rendering reads it. */
export interface PromptInput {
  readonly messages: readonly { readonly role: string; readonly content?: unknown; readonly [k: string]: unknown }[];
  readonly max_tokens?: unknown;
  readonly max_completion_tokens?: unknown;
  readonly [k: string]: unknown;
}

const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;
const ANTHROPIC_ESTIMATE_FACTOR = 1.2;
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/**
 * Reads the rendering settings of a provider config entry (extra keys
 * `chatTemplate`, `tokenizerConfigPath`, `contextWindow`, `maxOutputTokens`).
 */
export function promptTargetFromConfig(config: Readonly<Record<string, unknown>>): PromptTarget {
  const str = (k: string) => (typeof config[k] === 'string' ? (config[k] as string) : null);
  const num = (k: string) => (typeof config[k] === 'number' ? (config[k] as number) : null);
  return {
    type: str('type') ?? 'openai',
    model: str('model') ?? '',
    baseUrl: str('baseUrl'),
    apiKey: str('apiKey'),
    contextWindow: num('contextWindow'),
    maxOutputTokens: num('maxOutputTokens'),
    chatTemplate: str('chatTemplate'),
    tokenizerConfigPath: str('tokenizerConfigPath'),
  };
}

/**
 * Renders and counts one case's prompt for one provider, and checks it fits.
 *
 * @example const r = await renderPrompt({ type: 'openai', model: 'gpt-4o-mini' }, { messages }); r.promptTokens
 */
export async function renderPrompt(target: PromptTarget, input: PromptInput, options: RenderPromptOptions = {}): Promise<PromptRender> {
  const maxTokens = firstNumber(input.max_completion_tokens, input.max_tokens, target.maxOutputTokens) ?? (target.type === 'anthropic' ? ANTHROPIC_DEFAULT_MAX_TOKENS : null);
  const findings: Finding[] = [];
  let counted: { method: TokenCountMethod; exact: boolean; detail: string; tokens: number | null; window: number | null; rendered?: string };

  if (target.chatTemplate || target.tokenizerConfigPath) {
    let loaded: LoadedChatTemplate;
    try {
      loaded = loadChatTemplate(target, options.baseDir ?? process.cwd());
    } catch (e) {
      findings.push({ code: FindingCode.TemplateError, message: (e as Error).message });
      return done({ method: 'chat-template', exact: false, detail: 'chat template not loaded', tokens: null, window: target.contextWindow ?? null });
    }
    const result = renderChatTemplate(loaded, input.messages);
    if (!result.ok) {
      findings.push(result.finding);
      return done({ method: 'chat-template', exact: false, detail: 'chat template failed', tokens: null, window: target.contextWindow ?? loaded.modelMaxLength });
    }
    findings.push(...checkRenderedOrder(input.messages, result.text));
    counted = {
      method: 'chat-template', exact: false, detail: 'chat template rendered; tokens estimated with o200k_base',
      tokens: o200k.countTokens(result.text, PLAIN_TEXT), window: target.contextWindow ?? loaded.modelMaxLength, rendered: result.text,
    };
  } else if (target.type === 'anthropic') {
    findings.push(...checkLeadingSystem(input.messages, 'Anthropic takes one top-level system prompt'));
    counted = await countAnthropic(target, input, options.countTimeoutMs ?? 5000);
  } else if (target.type === 'openai') {
    counted = countOpenAI(target.model, input.messages, target.contextWindow ?? null);
  } else {
    const tokens = Math.ceil(openAiChatTokens(o200k, input.messages) * ANTHROPIC_ESTIMATE_FACTOR);
    counted = { method: 'estimate', exact: false, detail: `estimate for provider type ${target.type} (o200k_base × ${ANTHROPIC_ESTIMATE_FACTOR})`, tokens, window: target.contextWindow ?? null };
  }
  return done(counted);

  function done(c: typeof counted): PromptRender {
    if (c.tokens !== null && c.window !== null && c.tokens + (maxTokens ?? 0) > c.window) {
      const est = c.exact ? '' : ' (estimated)';
      const budget = maxTokens === null ? `prompt ${c.tokens} tokens${est}` : `prompt ${c.tokens} tokens${est} + max_tokens ${maxTokens} = ${c.tokens + maxTokens}`;
      findings.push({ code: FindingCode.ContextOverflow, message: `${budget} exceeds the context window of ${c.window}` });
    }
    return {
      ok: findings.length === 0, method: c.method, exact: c.exact, detail: c.detail, promptTokens: c.tokens, maxTokens,
      contextWindow: c.window, ...(c.rendered === undefined ? {} : { rendered: c.rendered }), findings,
    };
  }
}

/** A chat template ready to render. */
export interface LoadedChatTemplate {
  readonly template: string;
  readonly bosToken: string;
  readonly eosToken: string;
  /** `model_max_length` from tokenizer_config.json when it is a real number (not the 1e30 sentinel), else null. */
  readonly modelMaxLength: number | null;
}

/**
 * Loads the chat template of a target: `chatTemplate` wins over
 * `tokenizerConfigPath`'s `chat_template` (a string, or the list form with a `default`).
 *
 * @throws Error saying what is missing or unreadable.
 */
export function loadChatTemplate(target: PromptTarget, baseDir: string): LoadedChatTemplate {
  let cfg: Record<string, unknown> = {};
  if (target.tokenizerConfigPath) {
    const path = isAbsolute(target.tokenizerConfigPath) ? target.tokenizerConfigPath : resolvePath(baseDir, target.tokenizerConfigPath);
    try {
      cfg = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new Error(`cannot read tokenizer config ${path}: ${(e as Error).message}`);
    }
  }
  let template = target.chatTemplate ?? null;
  if (template === null) {
    const t = cfg.chat_template;
    if (typeof t === 'string') template = t;
    else if (Array.isArray(t)) {
      const named = t as { name?: unknown; template?: unknown }[];
      const def = named.find((x) => x.name === 'default') ?? named[0];
      if (def && typeof def.template === 'string') template = def.template;
    }
  }
  if (template === null) throw new Error('the tokenizer config has no chat_template');
  const max = typeof cfg.model_max_length === 'number' && cfg.model_max_length < 10_000_000 ? cfg.model_max_length : null;
  return { template, bosToken: tokenText(cfg.bos_token), eosToken: tokenText(cfg.eos_token), modelMaxLength: max };
}

/**
 * Renders messages through a chat template with a generation prompt, as
 * `apply_chat_template(..., add_generation_prompt=True)` would.
 *
 * @example renderChatTemplate(loaded, [{ role: 'user', content: 'hi' }]) // { ok: true, text: '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' }
 */
export function renderChatTemplate(loaded: Pick<LoadedChatTemplate, 'template' | 'bosToken' | 'eosToken'>, messages: PromptInput['messages']): { ok: true; text: string } | { ok: false; finding: Finding } {
  let template: Template;
  try {
    template = new Template(loaded.template);
  } catch (e) {
    return { ok: false, finding: { code: FindingCode.TemplateError, message: `chat template does not parse: ${(e as Error).message}` } };
  }
  try {
    const text = template.render({
      messages: messages.map((m) => ({ ...m, role: m.role, content: contentText(m.content) })),
      bos_token: loaded.bosToken,
      eos_token: loaded.eosToken,
      add_generation_prompt: true,
    });
    return { ok: true, text };
  } catch (e) {
    // raise_exception() (built into @huggingface/jinja) throws a plain Error with the template's message.
    return { ok: false, finding: { code: FindingCode.TemplateError, message: `chat template raised: ${(e as Error).message}` } };
  }
}

/**
 * Checks that every message's text appears in the rendered prompt, in order:
 * a missing system text is `system_dropped`, any other loss or reordering `role_order`.
 */
export function checkRenderedOrder(messages: PromptInput['messages'], rendered: string): Finding[] {
  const findings: Finding[] = [];
  let from = 0;
  messages.forEach((m, i) => {
    const text = contentText(m.content).trim();
    if (text === '') return;
    const at = rendered.indexOf(text, from);
    if (at >= 0) {
      from = at + text.length;
      return;
    }
    const anywhere = rendered.includes(text);
    if (m.role === 'system' || m.role === 'developer') {
      findings.push(
        anywhere
          ? { code: FindingCode.RoleOrder, message: `the system message (message ${i + 1}) is moved out of its place by the chat template` }
          : { code: FindingCode.SystemDropped, message: `the chat template drops the system message (message ${i + 1})` },
      );
    } else {
      findings.push({
        code: FindingCode.RoleOrder,
        message: anywhere ? `message ${i + 1} (${m.role}) comes out of order in the rendered prompt` : `the chat template drops message ${i + 1} (${m.role})`,
      });
    }
  });
  return findings;
}

function checkLeadingSystem(messages: PromptInput['messages'], why: string): Finding[] {
  const firstOther = messages.findIndex((m) => m.role !== 'system' && m.role !== 'developer');
  if (firstOther < 0) return [];
  return messages.flatMap((m, i) =>
    i > firstOther && (m.role === 'system' || m.role === 'developer')
      ? [{ code: FindingCode.RoleOrder, message: `system message ${i + 1} comes after the conversation started; ${why}` }]
      : [],
  );
}

type Encoding = { countTokens(text: string, options?: typeof PLAIN_TEXT): number };

function countOpenAI(model: string, messages: PromptInput['messages'], configuredWindow: number | null) {
  const spec = (gptModels as unknown as Record<string, { context_window?: number } | undefined>)[model];
  const encodingName = (modelToEncodingMap as Record<string, string | undefined>)[model];
  const known = spec !== undefined || encodingName !== undefined;
  const enc: Encoding = encodingName === 'cl100k_base' ? cl100k : o200k;
  const name = encodingName === 'cl100k_base' ? 'cl100k_base' : 'o200k_base';
  return {
    method: 'gpt-tokenizer' as const,
    exact: known,
    detail: known ? `${name} (${model})` : `estimate: model ${model} unknown to gpt-tokenizer, counted with ${name}`,
    tokens: openAiChatTokens(enc, messages),
    window: configuredWindow ?? spec?.context_window ?? null,
  };
}

/** OpenAI's chat accounting: 3 tokens per message, 1 per name, 3 to prime the reply. */
function openAiChatTokens(enc: Encoding, messages: PromptInput['messages']): number {
  let n = 3;
  for (const m of messages) {
    n += 3 + enc.countTokens(m.role, PLAIN_TEXT) + enc.countTokens(contentText(m.content), PLAIN_TEXT);
    if (typeof m.name === 'string') n += 1 + enc.countTokens(m.name, PLAIN_TEXT);
  }
  return n;
}

async function countAnthropic(target: PromptTarget, input: PromptInput, timeoutMs: number) {
  const window = target.contextWindow ?? null;
  const system = input.messages.filter((m) => m.role === 'system' || m.role === 'developer').map((m) => contentText(m.content)).join('\n\n');
  const messages = input.messages.filter((m) => m.role !== 'system' && m.role !== 'developer').map((m) => ({ role: m.role, content: contentText(m.content) }));
  let why: string;
  if (!target.baseUrl) {
    why = 'no baseUrl';
  } else {
    const root = target.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
    try {
      const res = await fetch(`${root}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'anthropic-version': '2023-06-01',
          ...(target.apiKey ? { 'x-api-key': target.apiKey } : {}),
        },
        body: JSON.stringify({ model: target.model, messages, ...(system ? { system } : {}) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = (await res.json().catch(() => null)) as { input_tokens?: unknown } | null;
      if (res.ok && body && typeof body.input_tokens === 'number') {
        return { method: 'anthropic-count-tokens' as const, exact: true, detail: 'POST /v1/messages/count_tokens', tokens: body.input_tokens, window };
      }
      why = `count_tokens answered ${res.status}`;
    } catch (e) {
      why = `count_tokens unreachable (${(e as Error).name === 'TimeoutError' ? 'timeout' : (e as Error).message})`;
    }
  }
  const tokens = Math.ceil(openAiChatTokens(o200k, input.messages) * ANTHROPIC_ESTIMATE_FACTOR);
  return { method: 'estimate' as const, exact: false, detail: `estimate: ${why}; o200k_base × ${ANTHROPIC_ESTIMATE_FACTOR}`, tokens, window };
}

/** The text of a message's content: a string, or the text parts of a list joined. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join('');
  }
  return '';
}

function tokenText(token: unknown): string {
  if (typeof token === 'string') return token;
  if (typeof token === 'object' && token !== null && typeof (token as { content?: unknown }).content === 'string') return (token as { content: string }).content;
  return '';
}

function firstNumber(...xs: unknown[]): number | null {
  for (const x of xs) if (typeof x === 'number' && Number.isFinite(x)) return x;
  return null;
}
