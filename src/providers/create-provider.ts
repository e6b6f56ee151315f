/**
 * The provider factory: a validated {@link ProviderConfig} in, a ready
 * {@link Provider} out.
 */
import type { Dispatcher } from 'undici';
import { OnejobError } from '../core/errors.ts';
import { AnthropicProvider } from './anthropic/anthropic-provider.ts';
import { FakeProviderAdapter } from './fake/fake-provider-adapter.ts';
import { OpenAIProvider } from './openai/openai-provider.ts';
import { TaskProvider } from './task/task-provider.ts';
import { OpenAIResponsesProvider } from './openai-responses/openai-responses-provider.ts';
import type { Provider, ProviderConfig } from './provider.ts';
import { parseFakeScript } from './fake/fake-behaviour.ts';
import { isHttpUrl } from './http-url.ts';

/** Options of {@link createProvider}. */
export interface CreateProviderOptions {
  /**
   * The undici dispatcher to send through (shared by several providers, or
   * instrumented in tests). Default: a private agent per provider, closed by
   * `close()`.
   */
  readonly dispatcher?: Dispatcher | undefined;
}

/**
 * Builds the provider `name` from its configuration.
 *
 * @throws OnejobError `config_invalid` naming the field, e.g. `providers.primary.baseUrl: must be an http(s) URL`.
 * @example
 * const provider = createProvider('primary', { type: 'openai', baseUrl: 'https://api.openai.com/v1', apiKey: process.env.OPENAI_API_KEY, model: 'gpt-4o-mini' });
 */
export function createProvider(name: string, config: ProviderConfig, options: CreateProviderOptions = {}): Provider {
  const problems = providerConfigProblems(name, config);
  if (problems.length > 0) {
    throw new OnejobError('config_invalid', problems.join('; '), { details: { provider: name, problems } });
  }
  switch (config.type) {
    case 'openai':
      return new OpenAIProvider(name, config, options);
    case 'anthropic':
      return new AnthropicProvider(name, config, options);
    case 'fake':
      return new FakeProviderAdapter(name, config, options);
    case 'task':
      return new TaskProvider(name, config, options);
    case 'openai-responses':
      return new OpenAIResponsesProvider(name, config, options);
  }
}

/**
 * Everything wrong with a provider's configuration, one message per problem
 * (empty when it is valid). Checked again by {@link createProvider}.
 *
 * @example providerConfigProblems('p', { type: 'openai', baseUrl: 'x', model: '' })
 * // ['providers.p.baseUrl: must be an http(s) URL', 'providers.p.model: must be a non-empty string']
 */
export function providerConfigProblems(name: string, config: unknown): string[] {
  const at = (field: string) => `providers.${name}.${field}`;
  if (typeof config !== 'object' || config === null) return [`providers.${name}: must be an object`];
  const c = config as Record<string, unknown>;
  const problems: string[] = [];
  const type = c.type;
  if (type !== 'openai' && type !== 'anthropic' && type !== 'fake' && type !== 'task' && type !== 'openai-responses') {
    return [`${at('type')}: must be "openai", "anthropic", "fake", "task" or "openai-responses" (got ${JSON.stringify(type)})`];
  }
  const baseUrlRequired = type !== 'fake';
  if (c.baseUrl !== undefined || baseUrlRequired) {
    if (!isHttpUrl(c.baseUrl)) problems.push(`${at('baseUrl')}: must be an http(s) URL`);
  }
  if (c.model !== undefined || (type !== 'fake' && type !== 'task')) {
    if (typeof c.model !== 'string' || c.model === '') problems.push(`${at('model')}: must be a non-empty string`);
  }
  if (c.apiKey !== undefined && c.apiKey !== null && typeof c.apiKey !== 'string') problems.push(`${at('apiKey')}: must be a string or null`);
  for (const field of ['timeoutMs', 'idleTimeoutMs', 'maxDurationMs', 'contextWindow', 'maxOutputTokens', 'settleUnknownAfterMs', 'pollIntervalMs']) {
    const v = c[field];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)) {
      problems.push(`${at(field)}: must be a positive integer`);
    }
  }
  if (c.headers !== undefined) {
    if (typeof c.headers !== 'object' || c.headers === null || Array.isArray(c.headers)) problems.push(`${at('headers')}: must be an object of strings`);
    else {
      for (const [k, v] of Object.entries(c.headers)) if (typeof v !== 'string') problems.push(`${at(`headers.${k}`)}: must be a string`);
    }
  }
  if (c.lookup !== undefined && c.lookup !== null) {
    if (type !== 'openai') problems.push(`${at('lookup')}: only for type "openai"`);
    else if (c.lookup !== 'stored-completions') problems.push(`${at('lookup')}: must be "stored-completions" or null`);
  }
  if (c.follow !== undefined && c.follow !== null) {
    if (type !== 'openai-responses') problems.push(`${at('follow')}: only for type "openai-responses"`);
    else if (c.follow !== 'stream' && c.follow !== 'poll') problems.push(`${at('follow')}: must be "stream" or "poll" (got ${JSON.stringify(c.follow)})`);
  }
  if (c.settleUnknownAfterMs !== undefined && c.settleUnknownAfterMs !== null && (c.maxDurationMs === undefined || c.maxDurationMs === null)) {
    problems.push(`${at('settleUnknownAfterMs')}: needs maxDurationMs (the provider's promise that bounds every request)`);
  } else if (typeof c.settleUnknownAfterMs === 'number' && typeof c.maxDurationMs === 'number' && c.settleUnknownAfterMs < c.maxDurationMs) {
    problems.push(`${at('settleUnknownAfterMs')}: must be at least maxDurationMs (${c.maxDurationMs}): earlier, the request may still be running`);
  }
  if (c.callbackSecret !== undefined && c.callbackSecret !== null) {
    if (type !== 'task') problems.push(`${at('callbackSecret')}: only for type "task"`);
    else if (typeof c.callbackSecret !== 'string' || c.callbackSecret.length < 16) problems.push(`${at('callbackSecret')}: must be a string of at least 16 characters`);
  }
  if (type === 'fake') {
    if (c.protocol !== undefined && c.protocol !== 'openai' && c.protocol !== 'anthropic') problems.push(`${at('protocol')}: must be "openai" or "anthropic"`);
    if (c.script !== undefined) {
      if (c.baseUrl !== undefined) problems.push(`${at('script')}: only for an embedded fake (no baseUrl); script an external one with POST /script`);
      else {
        try {
          parseFakeScript(c.script, at('script'));
        } catch (err) {
          problems.push((err as Error).message);
        }
      }
    }
  }
  return problems;
}
