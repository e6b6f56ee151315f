/**
 * The example's Vite config. JSX is compiled by Vite's own transform (no
 * React plugin needed); `onejob/client` and `onejob/react` resolve to the
 * sources of this checkout. The `/v1` proxy to onejob (with the API token)
 * is added by start-example.ts, which knows the server's URL.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const src = (path: string): string => fileURLToPath(new URL(`../../src/${path}`, import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  resolve: {
    alias: {
      'onejob/client': src('client/index.ts'),
      'onejob/react': src('react/index.ts'),
    },
  },
  build: { emptyOutDir: true, reportCompressedSize: false },
});
