/**
 * Builds the dashboard (`web/`) into `web/dist/`, served by `onejob serve` at
 * `/ui/`. Everything is bundled (Preact, uPlot, Pico CSS): nothing is loaded
 * from a CDN, so it works offline. Run by `npm run build:web` (and by
 * `npm install` / `npm ci` through `prepare`).
 */
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 300,
  },
  server: { proxy: { '/v1': 'http://127.0.0.1:8080' } },
});
