import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CHAT_MAX_WAIT_MS, loadConfig } from '../../src/config/config.ts';
import { isOnejobError } from '../../src/core/errors.ts';

describe('loadConfig', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
  const file = (content: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-config-'));
    dirs.push(dir);
    const path = join(dir, 'onejob.config.json');
    writeFileSync(path, JSON.stringify(content));
    return path;
  };

  it('reads chatMaxWaitMs, defaults it to 5 minutes, and refuses a bad one with its path', () => {
    expect(loadConfig({ argvConfigPath: file({ chatMaxWaitMs: 1500 }), env: {} }).chatMaxWaitMs).toBe(1500);
    expect(loadConfig({ argvConfigPath: file({}), env: {} }).chatMaxWaitMs).toBe(DEFAULT_CHAT_MAX_WAIT_MS);
    const err = (() => {
      try {
        loadConfig({ argvConfigPath: file({ chatMaxWaitMs: 0 }), env: {} });
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(isOnejobError(err, 'config_invalid')).toBe(true);
    expect((err as Error).message).toContain('/chatMaxWaitMs');
  });

  it('reads metricsToken (env: reference, ONEJOB_METRICS_TOKEN wins), eventFeeds and gatewayBodyLimitBytes, with their defaults', () => {
    const defaults = loadConfig({ argvConfigPath: file({}), env: {} });
    expect(defaults).toMatchObject({ metricsToken: null, eventFeeds: { maxPerOwner: 20, pollMs: 2000 }, gatewayBodyLimitBytes: 32 * 1024 * 1024, bodyLimitBytes: 1024 * 1024 });
    const path = file({ metricsToken: 'env:SCRAPE_TOKEN', eventFeeds: { maxPerOwner: 3 }, gatewayBodyLimitBytes: 4096 });
    expect(loadConfig({ argvConfigPath: path, env: { SCRAPE_TOKEN: 'tok_scrape' } })).toMatchObject({ metricsToken: 'tok_scrape', eventFeeds: { maxPerOwner: 3, pollMs: 2000 }, gatewayBodyLimitBytes: 4096 });
    expect(loadConfig({ argvConfigPath: path, env: { SCRAPE_TOKEN: 'tok_scrape', ONEJOB_METRICS_TOKEN: 'tok_env' } }).metricsToken).toBe('tok_env');
    for (const bad of [{ eventFeeds: { maxPerOwner: 0 } }, { gatewayBodyLimitBytes: 0 }, { metricsToken: 'has space' }, { eventFeeds: { cap: 1 } }]) {
      expect(() => loadConfig({ argvConfigPath: file(bad), env: {} }), JSON.stringify(bad)).toThrow(/config|must/);
    }
  });

  it('reads read-only API tokens ({ owner, readOnly })', () => {
    const c = loadConfig({ argvConfigPath: file({ apiKeys: { tok_a: 'alice', tok_v: { owner: 'alice', readOnly: true } } }), env: {} });
    expect(c.apiKeys).toEqual({ tok_a: 'alice', tok_v: { owner: 'alice', readOnly: true } });
  });

  it('accepts fake providers without baseUrl, and reports a bad provider with its path', () => {
    const ok = loadConfig({ argvConfigPath: file({ providers: { f: { type: 'fake' } }, routes: { r: { providers: ['f'] } } }), env: {} });
    expect(ok.providers.f).toMatchObject({ type: 'fake', model: 'fake-model', timeoutMs: 20000 });
    let message = '';
    try {
      loadConfig({ argvConfigPath: file({ providers: { o: { type: 'openai', baseUrl: 'not a url', model: 'm' } } }), env: {} });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('/providers/o/baseUrl');
  });
});
