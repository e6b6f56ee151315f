/**
 * One truth per rule (STYLE §15): the state lists in the store's SQL and in
 * the committed schemas agree with src/core/states.ts.
 *
 * - The statements interpolate src/store/sql-rules.ts; no file under
 *   src/store spells one of its lists again by hand.
 * - Every state named in an `IN (…)` list of a statement is a state
 *   states.ts declares (a misspelt state would silently match nothing).
 * - The migrations cannot be generated: their CHECK constraints and the
 *   keyless index, as committed in migrations/schema/*.sql (which
 *   schema-drift.test.ts keeps equal to what the migrations produce), name
 *   exactly the sets of states.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ACTIVE_ATTEMPT_STATES, ATTEMPT_STATES, JOB_STATES, TERMINAL_ATTEMPT_STATES, TERMINAL_JOB_STATES } from '../../src/core/states.ts';
import { SCHEMA_FILES } from '../../scripts/schema-dump.ts';
import * as rules from '../../src/store/sql-rules.ts';

const STORE_DIR = join(import.meta.dirname, '..', '..', 'src', 'store');

/** Every .ts file under src/store, relative name → text. */
function storeSources(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string, rel: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name), `${rel}${e.name}/`);
      else if (e.name.endsWith('.ts')) out.set(`${rel}${e.name}`, readFileSync(join(dir, e.name), 'utf8'));
    }
  };
  walk(STORE_DIR, '');
  return out;
}

/** Every string reachable from a query module's exports (statement texts, `{ name, text }` objects). */
function strings(v: unknown, depth = 0): string[] {
  if (typeof v === 'string') return [v];
  if (v && typeof v === 'object' && depth < 4) return Object.values(v).flatMap((x) => strings(x, depth + 1));
  return [];
}

async function statementTexts(): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const dialect of ['postgres', 'sqlite']) {
    for (const f of readdirSync(join(STORE_DIR, dialect)).filter((n) => n.endsWith('-queries.ts') || n.endsWith('-batcher.ts'))) {
      out.set(`${dialect}/${f}`, strings(await import(join(STORE_DIR, dialect, f))));
    }
  }
  return out;
}

/** The quoted words of a list such as `('a', 'b')` or `ARRAY['a'::text, 'b'::text]`, as a sorted array. */
function words(list: string): string[] {
  return [...list.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]!).sort();
}
const sorted = (s: Iterable<string>): string[] => [...s].sort();

describe('SQL rule texts against src/core/states.ts', () => {
  it('the generated lists are the sets of states.ts', () => {
    expect(words(rules.TERMINAL_JOB_STATES_SQL)).toEqual(sorted(TERMINAL_JOB_STATES));
    expect(words(rules.ACTIVE_ATTEMPT_STATES_SQL)).toEqual(sorted(ATTEMPT_STATES.filter((s) => !TERMINAL_ATTEMPT_STATES.has(s))));
    expect(ACTIVE_ATTEMPT_STATES).toEqual(['starting', 'running', 'unknown']);
    expect(words(rules.ENDED_WITHOUT_WINNING_ATTEMPT_STATES_SQL)).toEqual(sorted([...TERMINAL_ATTEMPT_STATES].filter((s) => s !== 'succeeded')));
    expect(rules.STREAM_OWNER_ENDED).toContain(`a.state IN ${rules.ENDED_WITHOUT_WINNING_ATTEMPT_STATES_SQL}`);
  });

  it('no file under src/store spells a generated list again', () => {
    const lists = [rules.TERMINAL_JOB_STATES_SQL, rules.ACTIVE_ATTEMPT_STATES_SQL, rules.ENDED_WITHOUT_WINNING_ATTEMPT_STATES_SQL]
      // The inside of each list, so `IN ('succeeded', 'failed', 'cancelled')` is found with or without its parentheses.
      .map((l) => l.slice(1, -1));
    const found: string[] = [];
    for (const [name, text] of storeSources()) {
      if (name === 'sql-rules.ts') continue;
      for (const l of lists) if (text.includes(l)) found.push(`${name}: ${l}`);
    }
    expect(found).toEqual([]);
  });

  it('the statements use the generated texts and name only declared states', async () => {
    const declared = new Set<string>([...JOB_STATES, ...ATTEMPT_STATES]);
    const texts = await statementTexts();
    const all = [...texts.values()].flat();
    expect(all.filter((t) => t.includes(`NOT IN ${rules.TERMINAL_JOB_STATES_SQL}`)).length).toBeGreaterThan(10);
    expect(all.filter((t) => t.includes(rules.STREAM_OWNER_ENDED)).length).toBe(4); // the outcome and stream CAS, on each engine
    const undeclared: string[] = [];
    for (const [file, list] of texts) {
      for (const text of list) {
        for (const m of text.matchAll(/state\s+(?:NOT\s+)?IN\s*(\([^()]*\))/gi)) {
          for (const w of words(m[1]!)) if (!declared.has(w)) undeclared.push(`${file}: ${w}`);
        }
      }
    }
    expect(undeclared).toEqual([]);
  });

  for (const dialect of ['postgres', 'sqlite'] as const) {
    it(`${dialect}: the schema's state constraints and the keyless index name the sets of states.ts`, () => {
      const schema = readFileSync(SCHEMA_FILES[dialect], 'utf8');
      /** The quoted words of the line holding `marker` (each constraint and index stands on one line in both dumps). */
      const on = (marker: string, nth = 0): string[] => {
        const lines = schema.split('\n').filter((l) => l.includes(marker));
        expect(lines.length, marker).toBeGreaterThan(nth);
        return words(lines[nth]!.slice(lines[nth]!.indexOf(marker)));
      };
      expect(on('jobs_finished_iff_terminal')).toEqual(sorted(TERMINAL_JOB_STATES));
      expect(on('attempts_finished_iff_terminal')).toEqual(sorted(TERMINAL_ATTEMPT_STATES));
      expect(words(schema.split('\n').find((l) => l.includes('keyless_fingerprint IS NOT NULL'))!)).toEqual(sorted(TERMINAL_JOB_STATES));
      if (dialect === 'postgres') {
        expect(on('jobs_state_check')).toEqual(sorted(JOB_STATES));
        expect(on('attempts_state_check')).toEqual(sorted(ATTEMPT_STATES));
      } else {
        // SQLite's column CHECKs are unnamed: the `state TEXT … CHECK` line of each table, attempts first.
        const checks = schema.split('\n').filter((l) => /^\s*state\s+TEXT\s+NOT NULL CHECK/.test(l)).map(words);
        expect(checks).toEqual([sorted(ATTEMPT_STATES), sorted(JOB_STATES)]);
      }
    });
  }
});
