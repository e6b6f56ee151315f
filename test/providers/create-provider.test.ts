/**
 * The factory: config validation, and the `fake` provider type end to end.
 */
import { describe, expect, it } from 'vitest';
import { isOnejobError } from '../../src/core/errors.ts';
import { createProvider, providerConfigProblems } from '../../src/providers/create-provider.ts';
import { FakeProviderAdapter } from '../../src/providers/fake/fake-provider-adapter.ts';
import { startFakeProvider } from '../../src/testing/fake-provider-server.ts';
import { attemptRequest } from './provider-test-support.ts';

describe('createProvider validation', () => {
  it('names every bad field', () => {
    expect(providerConfigProblems('p', { type: 'openai', baseUrl: 'ftp://x', model: '', timeoutMs: -1, headers: { a: 1 } })).toEqual([
      'providers.p.baseUrl: must be an http(s) URL',
      'providers.p.model: must be a non-empty string',
      'providers.p.timeoutMs: must be a positive integer',
      'providers.p.headers.a: must be a string',
    ]);
    // CONTRACT §11: the lookup, the settle policy, the callback key.
    expect(providerConfigProblems('p', { type: 'anthropic', baseUrl: 'http://x', model: 'm', lookup: 'stored-completions' })).toEqual(['providers.p.lookup: only for type "openai"']);
    expect(providerConfigProblems('p', { type: 'openai', baseUrl: 'http://x', model: 'm', lookup: 'responses' })).toEqual(['providers.p.lookup: must be "stored-completions" or null']);
    expect(providerConfigProblems('p', { type: 'openai', baseUrl: 'http://x', model: 'm', settleUnknownAfterMs: 1000 })).toEqual([
      "providers.p.settleUnknownAfterMs: needs maxDurationMs (the provider's promise that bounds every request)",
    ]);
    expect(providerConfigProblems('p', { type: 'openai', baseUrl: 'http://x', model: 'm', maxDurationMs: 2000, settleUnknownAfterMs: 1000 })).toEqual([
      'providers.p.settleUnknownAfterMs: must be at least maxDurationMs (2000): earlier, the request may still be running',
    ]);
    expect(providerConfigProblems('p', { type: 'task', baseUrl: 'http://x/tasks', callbackSecret: 'short' })).toEqual(['providers.p.callbackSecret: must be a string of at least 16 characters']);
    expect(providerConfigProblems('p', { type: 'task', baseUrl: 'http://x/tasks', maxDurationMs: 60000, callbackSecret: 'whsec_0123456789abcdef' })).toEqual([]);
    expect(providerConfigProblems('p', { type: 'gemini' })).toEqual(['providers.p.type: must be "openai", "anthropic", "fake", "task" or "openai-responses" (got "gemini")']);
    expect(providerConfigProblems('p', { type: 'fake', baseUrl: 'http://x', script: [] })[0]).toContain('only for an embedded fake');
    expect(providerConfigProblems('p', { type: 'fake', script: [{ delayMs: 'soon' }] })).toEqual(['providers.p.script[0].delayMs: must be a number between 0 and 9007199254740991']);
  });

  it('throws config_invalid', () => {
    let caught: unknown;
    try {
      createProvider('p', { type: 'anthropic', baseUrl: 'not a url', model: 'm' });
    } catch (err) {
      caught = err;
    }
    expect(isOnejobError(caught, 'config_invalid')).toBe(true);
  });

  it('accepts what the config layer produces (apiKey null, extra fields)', () => {
    const p = createProvider('p', { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', apiKey: null, model: 'm', timeoutMs: 5000 });
    expect([p.name, p.type, p.model, p.timeoutMs, p.contextWindow]).toEqual(['p', 'openai', 'm', 5000, null]);
    void p.close();
  });
});

describe('the fake provider type', () => {
  it('embedded: starts its own server at the first call, echoes, and is scriptable', async () => {
    const p = createProvider('demo', { type: 'fake', script: [{ status: 503 }] });
    try {
      expect(p.timeoutMs).toBe(20_000);
      expect(await p.call(attemptRequest())).toMatchObject({ kind: 'failure', error: { code: 'provider_overloaded' } });
      const echoed = await p.call(attemptRequest());
      expect(echoed).toMatchObject({ kind: 'success', completion: { content: 'Say hello', model: 'fake-model', provider: 'demo' } });
      const server = await (p as unknown as FakeProviderAdapter).server();
      server?.setDefault({ reply: { summary: 'ok' } });
      expect(await p.call(attemptRequest())).toMatchObject({ completion: { content: '{"summary":"ok"}' } });
      expect(server?.calls.map((c) => c.protocol)).toEqual(['openai', 'openai', 'openai']);
    } finally {
      await p.close();
    }
  });

  it('embedded with the anthropic protocol', async () => {
    const p = createProvider('demo', { type: 'fake', protocol: 'anthropic', model: 'claude-fake', script: { default: { reply: 'hi', finishReason: 'length' } } });
    try {
      expect(await p.call(attemptRequest())).toMatchObject({ kind: 'success', completion: { content: 'hi', finish_reason: 'length', model: 'claude-fake' } });
      expect((await (p as unknown as FakeProviderAdapter).server())?.calls[0]?.path).toBe('/v1/messages');
    } finally {
      await p.close();
    }
  });

  it('external: speaks to a fake server at baseUrl; config headers pick the behaviour', async () => {
    const fake = await startFakeProvider();
    const slow = createProvider('slow', { type: 'fake', baseUrl: `${fake.url}/v1`, headers: { 'onejob-fake-behaviour': '{"status":429}' } });
    const fine = createProvider('fine', { type: 'fake', baseUrl: `${fake.url}/v1` });
    try {
      expect(await (slow as unknown as FakeProviderAdapter).server()).toBeNull();
      expect(await slow.call(attemptRequest())).toMatchObject({ kind: 'failure', error: { code: 'provider_rate_limited' } });
      expect(await fine.call(attemptRequest())).toMatchObject({ kind: 'success' });
      expect(fake.calls.map((c) => c.source)).toEqual(['header', 'default']);
    } finally {
      await slow.close();
      await fine.close();
      await fake.close();
    }
  });
});
