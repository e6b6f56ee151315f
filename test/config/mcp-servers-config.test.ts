/**
 * `mcpServers` and `keyless` in the config file (CONTRACT §12, §14): valid
 * entries with their defaults and `env:` secrets, and every mistake reported
 * on one line naming its field.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { isOnejobError } from '../../src/core/errors.ts';

const dirs: string[] = [];
function file(config: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'onejob-mcp-config-'));
  dirs.push(dir);
  const path = join(dir, 'onejob.config.json');
  writeFileSync(path, JSON.stringify(config));
  return path;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function problemsOf(config: unknown): string {
  try {
    loadConfig({ argvConfigPath: file(config), env: {} });
  } catch (e) {
    if (isOnejobError(e, 'config_invalid')) return e.message;
    throw e;
  }
  throw new Error('expected config_invalid');
}

describe('mcpServers and keyless in the config', () => {
  it('reads an HTTP and a stdio server with their defaults and env: secrets', () => {
    const config = loadConfig({
      argvConfigPath: file({
        keyless: { mode: 'fingerprint' },
        mcpServers: {
          tools: { url: 'https://tools.example/mcp', headers: { authorization: 'env:TOOLS_AUTH' } },
          payments: { command: ['node', 'payments.js'], env: { KEY: 'env:PAY_KEY' }, timeoutMs: 5000 },
        },
      }),
      env: { TOOLS_AUTH: 'Bearer t0', PAY_KEY: 'k1' },
    });
    expect(config.keyless).toEqual({ mode: 'fingerprint', windowMs: 600_000 });
    expect(config.mcpServers.tools).toEqual({ url: 'https://tools.example/mcp', headers: { authorization: 'Bearer t0' }, timeoutMs: 20_000 });
    expect(config.mcpServers.payments).toMatchObject({ command: ['node', 'payments.js'], env: { KEY: 'k1' }, timeoutMs: 5000 });
    expect(loadConfig({ argvConfigPath: file({}), env: {} })).toMatchObject({ keyless: { mode: 'reject', windowMs: 600_000 }, mcpServers: {} });
  });

  it('reports each mistake on one line with its field', () => {
    const message = problemsOf({
      mcpServers: {
        a: { url: 'ftp://x' },
        b: { command: [] },
        c: { url: 'http://x/mcp', command: ['x'] },
        'd.e': { url: 'http://x/mcp' },
        f: { url: 'http://x/mcp', timeoutMs: -1, env: { A: 'b' } },
      },
    });
    expect(message).not.toContain('\n');
    expect(message).toContain('/mcpServers/a/url: must be an http(s) URL');
    expect(message).toContain('/mcpServers/b/command: must be a non-empty array of strings');
    expect(message).toContain('give exactly one of "url" (Streamable HTTP) or "command" (stdio)');
    expect(message).toContain('a server name is 1–64 letters');
    expect(message).toContain('/mcpServers/f/timeoutMs: must be a positive integer');
    expect(message).toContain('/mcpServers/f/env: only for a "command" server');
    expect(problemsOf({ keyless: { mode: 'maybe' } })).toContain('/keyless/mode');
  });
});
