/**
 * A provider's timeouts and retry policy in the config file (CONTRACT §4,
 * §11): integers in ms with their defaults, and precise messages for bad values.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { retryPolicyOf } from '../../src/config/retry-policy.ts';

describe('timeouts and retry in the config file', () => {
  const load = (providers: unknown) => {
    const path = join(mkdtempSync(join(tmpdir(), 'onejob-timeouts-')), 'onejob.config.json');
    writeFileSync(path, JSON.stringify({ providers, routes: { r: { providers: Object.keys(providers as object) } } }));
    return () => loadConfig({ argvConfigPath: path, env: {} });
  };

  it('defaults: timeoutMs 20000, idleTimeoutMs 30000, maxDurationMs null, no retry', () => {
    const config = load({ p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' } })();
    expect(config.providers.p).toMatchObject({ timeoutMs: 20_000, idleTimeoutMs: 30_000, maxDurationMs: null });
    expect(config.providers.p!.retry).toBeUndefined();
  });

  it('accepts the settings as integers in ms and a retry policy', () => {
    const config = load({ p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', timeoutMs: 5000, idleTimeoutMs: 1000, maxDurationMs: 600000, retry: { attempts: 3, maxWaitMs: 2000 } } })();
    expect(config.providers.p).toMatchObject({ timeoutMs: 5000, idleTimeoutMs: 1000, maxDurationMs: 600000, retry: { attempts: 3, maxWaitMs: 2000 } });
    expect(retryPolicyOf(config)('p')).toEqual({ attempts: 3, maxWaitMs: 2000 });
    expect(retryPolicyOf(config)('other')).toBeNull();
  });

  it('a retry without maxWaitMs waits at most 10 s', () => {
    const config = load({ p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', retry: { attempts: 2 } } })();
    expect(retryPolicyOf(config)('p')).toEqual({ attempts: 2, maxWaitMs: 10_000 });
  });

  it.each([
    [{ idleTimeoutMs: 0 }, '/providers/p/idleTimeoutMs'],
    [{ idleTimeoutMs: 1.5 }, '/providers/p/idleTimeoutMs'],
    [{ maxDurationMs: 'long' }, '/providers/p/maxDurationMs'],
    [{ retry: { attempts: 0 } }, '/providers/p/retry/attempts'],
    [{ retry: { maxWaitMs: 100 } }, '/providers/p/retry'],
    [{ retry: { attempts: 2, backoff: 'yes' } }, '/providers/p/retry'],
  ])('rejects %j naming %s', (bad, path) => {
    const loadBad = load({ p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', ...bad } });
    expect(loadBad).toThrow(expect.objectContaining({ code: 'config_invalid', message: expect.stringContaining(path) }));
  });

  it('openai-responses: follow "stream" or "poll", one line naming the field otherwise; only for that type', () => {
    const responses = { type: 'openai-responses', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' };
    expect(load({ p: { ...responses, follow: 'poll', pollIntervalMs: 200 } })().providers.p).toMatchObject({ follow: 'poll', pollIntervalMs: 200 });
    expect(load({ p: responses })().providers.p!.follow).toBeUndefined(); // the adapter's default: stream
    expect(load({ p: { ...responses, follow: 'push' } })).toThrow(expect.objectContaining({ code: 'config_invalid', message: expect.stringContaining('/providers/p/follow: must be "stream" or "poll" (got "push")') }));
    expect(load({ p: { type: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', follow: 'stream' } })).toThrow(expect.objectContaining({ message: expect.stringContaining('/providers/p/follow: only for type "openai-responses"') }));
  });
});
