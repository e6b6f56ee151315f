/**
 * Import boundaries (issue 15 item 2, STYLE 19 and 20), read from the source:
 * product code never imports the test helpers or a test framework, the
 * providers layer has no import circle, and the SDKs that type the wire are
 * imported for their types only (never loaded at run time).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const src = join(root, 'src');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

interface ImportLine {
  readonly spec: string;
  readonly typeOnly: boolean;
}

/** Static imports and re-exports of a file, and dynamic `import('…')`s. */
function importsOf(file: string): ImportLine[] {
  const text = readFileSync(file, 'utf8');
  const out: ImportLine[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'/gms)) out.push({ spec: m[3] ?? '', typeOnly: m[2] !== undefined });
  for (const m of text.matchAll(/import\('([^']+)'\)/g)) out.push({ spec: m[1] ?? '', typeOnly: false });
  return out;
}

const productFiles = tsFiles(src).filter((f) => !f.startsWith(join(src, 'testing')));

describe('import boundaries', () => {
  it('product code imports neither src/testing nor a test framework', () => {
    const offenders: string[] = [];
    for (const file of productFiles) {
      for (const { spec } of importsOf(file)) {
        const target = spec.startsWith('.') ? resolve(dirname(file), spec) : spec;
        if (target.startsWith(join(src, 'testing')) || spec === 'vitest' || spec.startsWith('vitest/')) offenders.push(`${relative(root, file)} → ${spec}`);
      }
    }
    // The store conformance suite is another helper's part of issue 15; it is the only known exception.
    expect(offenders.filter((o) => !o.startsWith('src/store/conformance/'))).toEqual([]);
  });

  it('src/providers and src/protocols have no import circle', () => {
    const files = tsFiles(join(src, 'providers')).concat(tsFiles(join(src, 'protocols')));
    const graph = new Map<string, string[]>();
    for (const f of files) {
      graph.set(f, importsOf(f).filter((i) => i.spec.startsWith('.')).map((i) => resolve(dirname(f), i.spec)).filter((t) => files.includes(t)));
    }
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(src, p)).join(' → '));
        return;
      }
      state.set(f, 'open');
      for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of files) visit(f, []);
    expect(cycles).toEqual([]);
  });

  it('imports openai and @anthropic-ai/sdk for their types only', () => {
    const offenders = productFiles.flatMap((file) =>
      importsOf(file)
        .filter((i) => (i.spec === 'openai' || i.spec.startsWith('openai/') || i.spec.startsWith('@anthropic-ai/sdk')) && !i.typeOnly)
        .map((i) => `${relative(root, file)} → ${i.spec}`),
    );
    expect(offenders).toEqual([]);
    expect(productFiles.some((f) => importsOf(f).some((i) => i.spec.startsWith('@anthropic-ai/sdk')))).toBe(true);
  });
});
