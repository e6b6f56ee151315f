/**
 * Runs only the provider tests, without the repository-wide global setup
 * (which starts databases these tests do not need):
 * `npx vitest run --config test/providers/vitest.providers.config.ts`.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/providers/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
  },
});
