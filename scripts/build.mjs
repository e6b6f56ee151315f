#!/usr/bin/env node
/**
 * `npm run build`: compiles `src/` to JavaScript and `.d.ts` in `dist/`
 * (tsconfig.build.json; `.ts` import specifiers are rewritten to `.js` by
 * `rewriteRelativeImportExtensions`), copies the files tsc does not emit
 * (every non-TypeScript file under `src/`, such as the SQLite worker
 * `store/sqlite/sqlite-worker.mjs`) to the same place under `dist/`, and
 * writes `dist/.build-stamp`, whose time `bin/onejob` compares with the
 * sources'. Plain JavaScript so that it runs with no TypeScript loader.
 * The migrations stay at the package root (`migrations/`): `dist/` mirrors
 * the depth of `src/`, so `src/store/migration-files.ts` finds them from both.
 * Every entry point of package.json "exports" is a folder of `src/` with an
 * `index.ts` (`client`, `react`, `testing`, and the durable-engine helpers
 * `dbos`, `restate`, `temporal`, `ai-sdk`, whose engines are optional peer
 * dependencies); the check after the build fails when one was not emitted.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const dist = join(root, 'dist');

rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const run = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (run.status !== 0) {
  // A failed build leaves no dist/ behind, so bin/onejob never runs half of one.
  rmSync(dist, { recursive: true, force: true });
  process.exit(run.status ?? 1);
}

/** Copies the files under `dir` that tsc does not emit. */
function copyAssets(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const from = join(dir, entry.name);
    if (entry.isDirectory()) copyAssets(from);
    else if (!/\.[cm]?ts$/.test(entry.name)) {
      const to = join(dist, relative(src, from));
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(from, to);
    }
  }
}
copyAssets(src);

// Each export of package.json must exist in dist/ (an entry point added to "exports" but not to src/, or renamed, fails here, not in a user's import).
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const missing = Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))
  .filter((file) => file.startsWith('./dist/') && !existsSync(join(root, file)));
if (missing.length > 0) {
  console.error(`build: package.json "exports" names files the build did not emit: ${missing.join(', ')}`);
  rmSync(dist, { recursive: true, force: true });
  process.exit(1);
}
writeFileSync(join(dist, '.build-stamp'), `${new Date().toISOString()}\n`);
