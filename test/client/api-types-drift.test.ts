/**
 * The client's committed OpenAPI document and generated types are what the
 * server serves now (regenerate with `npm run client:types`); and the
 * client and the hook import nothing of the server, so they run in a
 * browser and on Node 20 on their own.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { API_TYPES_FILE, OPENAPI_FILE, generateClientFiles, servedOpenApiDocument } from '../../scripts/client-types.ts';

const ROOT = resolve(import.meta.dirname, '../..');

describe('onejob/client types', () => {
  it('src/client/openapi.json and api-types.ts match the document GET /openapi.json serves (else: npm run client:types)', async () => {
    const served = await servedOpenApiDocument();
    const { openapi, types } = await generateClientFiles(served);
    expect(readFileSync(OPENAPI_FILE, 'utf8'), 'src/client/openapi.json is stale: run npm run client:types').toBe(openapi);
    expect(readFileSync(API_TYPES_FILE, 'utf8'), 'src/client/api-types.ts is stale: run npm run client:types').toBe(types);
  });

  it('the generated types change when the served document changes (the check can fail)', async () => {
    const served = await servedOpenApiDocument();
    const changed = structuredClone(served) as { components: { schemas: Record<string, { required: string[]; properties: Record<string, unknown> }> } };
    changed.components.schemas.Job!.properties.cost_usd = { type: ['number', 'null'] };
    changed.components.schemas.Job!.required.push('cost_usd');
    const { types } = await generateClientFiles(changed as never);
    expect(types).not.toBe(readFileSync(API_TYPES_FILE, 'utf8'));
    expect(types).toContain('cost_usd: number | null');
  });

  it('src/client and src/react import only each other, react, and nothing from Node or the server', () => {
    const offenders: string[] = [];
    for (const dir of ['src/client', 'src/react']) {
      for (const file of readdirSync(join(ROOT, dir))) {
        if (!file.endsWith('.ts')) continue;
        const text = readFileSync(join(ROOT, dir, file), 'utf8');
        for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
          const spec = m[1] ?? m[2]!;
          const ok = spec === 'react' || (spec.startsWith('./') && !spec.includes('..')) || spec.startsWith('../client/') || spec.startsWith('../react/');
          if (!ok) offenders.push(`${dir}/${file}: ${spec}`);
        }
        // Code only: a doc comment may say "process." in prose (the generated types quote the API's descriptions).
        const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
        if (/\b(process\.|Buffer\b|require\()/.test(code)) offenders.push(`${dir}/${file}: uses a Node global`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
