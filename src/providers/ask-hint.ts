/**
 * What would make an attempt in doubt askable (CONTRACT §11): for the
 * dashboard's In doubt page (`GET /v1/doubt`'s `ask_hint`), the provider
 * type and the setting that give its provider a lookup, for every attempt
 * whose provider has none. Pure: the provider's configuration in, one
 * sentence out.
 */
import type { ProviderConfig } from '../config/config.ts';

/**
 * The sentence for an attempt on provider `name` (configured as `config`,
 * or no longer configured: undefined) that cannot be asked; `settleUnknown`
 * mentions the other way out, a settle policy, when none is set.
 *
 * @example askHint('gpt', { type: 'openai', baseUrl: 'https://api.openai.com/v1', model: 'gpt-4o-mini' })
 * // 'set "lookup": "stored-completions" on provider gpt (type openai): …'
 */
export function askHint(name: string, config: ProviderConfig | undefined): string {
  if (config === undefined) {
    return `provider ${name} is no longer configured, so nothing can ask it: resolve the attempt by hand`;
  }
  const policy = config.settleUnknownAfterMs === undefined || config.settleUnknownAfterMs === null
    ? `; or set "settleUnknownAfterMs" on it to resolve its doubt as failed after that long`
    : '';
  switch (config.type) {
    case 'openai':
      if (config.lookup === 'stored-completions') break;
      return `set "lookup": "stored-completions" on provider ${name} (type openai): its requests are then stored with the attempt's id and onejob finds them, ` +
        `or make it type "openai-responses" (background mode, always askable)${policy}`;
    case 'anthropic':
      return `provider ${name} is type anthropic: the Messages API keeps nothing to ask; a provider of type "openai-responses" (background mode) or "task" can be asked, ` +
        `or an "openai" one with "lookup": "stored-completions"${policy}`;
    case 'fake':
      return `provider ${name} is type fake, which has no lookup: point a provider of type "openai-responses", or "openai" with "lookup": "stored-completions", ` +
        `at the fake server (it serves both APIs) to see doubt resolve itself${policy}`;
  }
  // openai-responses, task and openai with stored completions have a lookup: only a process that does not know the provider cannot ask.
  return `provider ${name} (type ${config.type}) can be asked, but no reconciler of this process knows it (is it in a route, and does this process run an executor?)`;
}
