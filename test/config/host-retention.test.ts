/**
 * The listen address and retention settings of the config module: `host`
 * in the file, `HOST` in the environment (which wins), whether either was
 * given (the demo listens on 127.0.0.1 unless one was), and
 * `retention.finishedJobsDays` (default 30, > 0).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';

describe('host and retention settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-cfg-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (content: unknown): string => {
    const path = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(path, JSON.stringify(content));
    return path;
  };

  it('host: default 0.0.0.0 and not configured; the file, then HOST, configure it', () => {
    expect(loadConfig({ env: {}, cwd: dir })).toMatchObject({ host: '0.0.0.0', hostConfigured: false });
    expect(loadConfig({ env: {}, argvConfigPath: file({ host: '10.0.0.5' }) })).toMatchObject({ host: '10.0.0.5', hostConfigured: true });
    expect(loadConfig({ env: { HOST: '::' }, argvConfigPath: file({ host: '10.0.0.5' }) })).toMatchObject({ host: '::', hostConfigured: true });
    expect(loadConfig({ env: { HOST: '' }, cwd: dir })).toMatchObject({ host: '0.0.0.0', hostConfigured: false });
    expect(() => loadConfig({ env: { HOST: 'a b' }, cwd: dir })).toThrow(/HOST: must be an address/);
  });

  it('retention.finishedJobsDays: default 30, fractions allowed, must be > 0, no unknown members', () => {
    expect(loadConfig({ env: {}, cwd: dir }).retention).toEqual({ finishedJobsDays: 30 });
    expect(loadConfig({ env: {}, argvConfigPath: file({ retention: { finishedJobsDays: 0.5 } }) }).retention).toEqual({ finishedJobsDays: 0.5 });
    expect(() => loadConfig({ env: {}, argvConfigPath: file({ retention: { finishedJobsDays: 0 } }) })).toThrow(/\/retention\/finishedJobsDays/);
    expect(() => loadConfig({ env: {}, argvConfigPath: file({ retention: { finishedJobsDays: '30' } }) })).toThrow(/\/retention\/finishedJobsDays/);
    expect(() => loadConfig({ env: {}, argvConfigPath: file({ retention: { days: 3 } }) })).toThrow(/\/retention\/days/);
  });
});
