/**
 * `runFakeProviderCli`: prints the URL, serves until stopped, refuses bad arguments.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { runFakeProviderCli } from '../../src/testing/fake-provider-cli.ts';

describe('runFakeProviderCli', () => {
  it('serves the script until stopped, the URL alone on the first stdout line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'onejob-fake-'));
    const script = join(dir, 'script.json');
    await writeFile(script, JSON.stringify([{ status: 503 }]));
    const controller = new AbortController();
    const lines: string[] = [];
    let announce: (url: string) => void = () => {};
    const announced = new Promise<string>((resolve) => (announce = resolve));
    const running = runFakeProviderCli(['--port', '0', '--script', script], {
      stdout: (line) => {
        lines.push(line);
        announce(line);
      },
      stderr: () => {},
      signal: controller.signal,
    });
    const url = await announced;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }) });
    await res.body.dump();
    expect(res.statusCode).toBe(503);
    controller.abort();
    expect(await running).toBe(0);
    expect(lines).toEqual([url]);
  });

  it('exits 2 with a one-line reason on bad arguments', async () => {
    const errors: string[] = [];
    const io = { stdout: () => {}, stderr: (l: string) => errors.push(l) };
    expect(await runFakeProviderCli(['--port', 'many'], io)).toBe(2);
    expect(await runFakeProviderCli(['--bogus'], io)).toBe(2);
    expect(await runFakeProviderCli(['--script', '/nonexistent/script.json'], io)).toBe(2);
    expect(errors).toHaveLength(3);
    expect(errors.every((e) => e.startsWith('onejob fake-provider: ') && !e.includes('\n'))).toBe(true);
  });
});
