/**
 * `node --import tsx bench/cpuprofile-top.ts <file.cpuprofile> [--top 30]`:
 * the busy time of a V8 CPU profile (`node --cpu-prof`), by function (self
 * time) and by where the code lives (a package under node_modules, a file
 * of src/, Node's own internals, GC), idle excluded. Used for the profile
 * of the chat path in docs/performance.md.
 */
import { readFileSync } from 'node:fs';
import { argMap } from './lib/child.ts';

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[] }

const file = process.argv[2]!;
const opts = argMap(process.argv.slice(3));
const TOP = Number(opts.top ?? 30);
/** Only the samples from this many ms after the profile's start (skips the start-up: module loading, compilation). */
const FROM_MS = Number(opts['from-ms'] ?? 0);
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map<number, number>();
let clock = 0;
p.samples.forEach((id, i) => {
  clock += p.timeDeltas[i] ?? 0;
  if (clock / 1000 < FROM_MS) return;
  self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
});

const where = (url: string, fn: string): string => {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return `pkg ${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith('node:')) return `node ${url.slice(5).split('/')[0]}`;
  const src = url.indexOf('/src/');
  if (src >= 0) return url.slice(src + 1).replace(/^file:\/\//, '');
  return url.replace(/^file:\/\//, '');
};

let total = 0;
let idle = 0;
const fnTime = new Map<string, number>();
const areaTime = new Map<string, number>();
for (const [id, us] of self) {
  const n = byId.get(id)!;
  const { functionName, url, lineNumber } = n.callFrame;
  if (functionName === '(idle)') {
    idle += us;
    continue;
  }
  total += us;
  const area = where(url, functionName);
  const key = `${functionName || '(anonymous)'} ${area}${url ? `:${lineNumber + 1}` : ''}`;
  fnTime.set(key, (fnTime.get(key) ?? 0) + us);
  areaTime.set(area, (areaTime.get(area) ?? 0) + us);
}
// Inclusive time: each function counted once per sample it is on the stack of.
const incl = new Map<string, number>();
for (const [id, us] of self) {
  if (byId.get(id)!.callFrame.functionName === '(idle)') continue;
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const { functionName, url, lineNumber } = byId.get(cur)!.callFrame;
    const key = `${functionName || '(anonymous)'} ${where(url, functionName)}${url ? `:${lineNumber + 1}` : ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    incl.set(key, (incl.get(key) ?? 0) + us);
  }
}
const pct = (x: number): string => `${((x / total) * 100).toFixed(1)} %`;
console.log(`${file}: busy ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
console.log('\nby area (self time):');
for (const [k, v] of [...areaTime].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${pct(v).padStart(7)}  ${k}`);
console.log('\nby function (self time):');
for (const [k, v] of [...fnTime].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${pct(v).padStart(7)}  ${k}`);
console.log('\nby function (inclusive time, src/ and packages):');
for (const [k, v] of [...incl].filter(([k]) => / (src\/|pkg )/.test(k)).sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${pct(v).padStart(7)}  ${k}`);
