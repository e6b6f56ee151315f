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

  it('a JSON syntax error names the line and column, not a character offset', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onejob-config-json-'));
    dirs.push(dir);
    const path = join(dir, 'onejob.json');
    const message = (text: string): string => {
      writeFileSync(path, text);
      try {
        loadConfig({ argvConfigPath: path, env: {} });
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error('loaded');
    };
    // A trailing comma on line 3, the '}' after it at column 3 of line 4.
    const trailing = message('{\n  "providers": {\n    "f": { "type": "fake" },\n  }\n}\n');
    expect(trailing).toMatch(/^.*onejob\.json: line 4, column 3: not valid JSON \(/);
    expect(trailing).not.toMatch(/position/);
    // Cut short: the end of the file.
    expect(message('{\n  "port": 8080')).toMatch(/onejob\.json: line 2, column 15: not valid JSON/);
  });

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

  it('reads executor.answerHoldMs and maxHeldAnswers, defaults them to 10 minutes and 10 000, and refuses an unknown key', () => {
    expect(loadConfig({ argvConfigPath: file({ executor: { answerHoldMs: 60_000, maxHeldAnswers: 5 } }), env: {} }).executor).toEqual({ answerHoldMs: 60_000, maxHeldAnswers: 5 });
    expect(loadConfig({ argvConfigPath: file({}), env: {} }).executor).toEqual({ answerHoldMs: 600_000, maxHeldAnswers: 10_000 });
    let message = '';
    try {
      loadConfig({ argvConfigPath: file({ executor: { holdMs: 1 } }), env: {} });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('/executor');
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

  it('refuses a hedge that could never start: hedgeAfterMs not below a hedged provider\'s timeoutMs, naming both values', () => {
    const config = (hedgeAfterMs: number | null, timeoutMs = 20_000) => ({
      providers: {
        primary: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', timeoutMs },
        last: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', timeoutMs: 1_000 },
      },
      routes: { r: { providers: ['primary', 'last'], hedgeAfterMs } },
    });
    const message = (content: unknown): string => {
      try {
        loadConfig({ argvConfigPath: file(content), env: {} });
      } catch (e) {
        expect(isOnejobError(e, 'config_invalid')).toBe(true);
        return (e as Error).message;
      }
      return '';
    };
    for (const hedge of [20_000, 25_000]) {
      const m = message(config(hedge));
      expect(m).toContain(`/routes/r/hedgeAfterMs: ${hedge} is not below the timeoutMs of provider "primary" (20000)`);
      expect(m).toContain('set hedgeAfterMs below 20000');
    }
    // The default timeoutMs counts too.
    expect(message({ ...config(null), routes: { r: { providers: ['dflt', 'last'], hedgeAfterMs: 60_000 } }, providers: { ...config(null).providers, dflt: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } } }))
      .toMatch(/provider "dflt" \(\d+\)/);
    // Below every hedged provider's deadline, or no hedge: loads. The chain's last provider is never hedged.
    expect(loadConfig({ argvConfigPath: file(config(19_999)), env: {} }).routes.r!.hedgeAfterMs).toBe(19_999);
    expect(loadConfig({ argvConfigPath: file(config(null)), env: {} }).routes.r!.hedgeAfterMs).toBeNull();
  });

  it('reads a route\'s passThrough (content_filter only) and refuses anything else with its path', () => {
    const routeWith = (passThrough: unknown) => ({
      providers: { p: { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } },
      routes: { r: { providers: ['p'], passThrough } },
    });
    expect(loadConfig({ argvConfigPath: file(routeWith(['content_filter'])), env: {} }).routes.r!.passThrough).toEqual(['content_filter']);
    expect(loadConfig({ argvConfigPath: file({ ...routeWith([]), routes: { r: { providers: ['p'] } } }), env: {} }).routes.r!.passThrough).toBeUndefined();
    expect(() => loadConfig({ argvConfigPath: file(routeWith(['rate_limit'])), env: {} })).toThrow(/\/routes\/r\/passThrough\/0/);
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
