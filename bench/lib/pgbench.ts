/**
 * pgbench running the very statement the PostgreSQL driver prepares for
 * `jobInsert` (`JOB_SQL.insert` imported from the driver, not retyped): the
 * `$n` placeholders become pgbench variables, sent as parameters of a
 * prepared statement (`-M prepared`), one row per transaction, autocommit.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { JOB_SQL } from '../../src/store/postgres/job-queries.ts';
import { BENCH_DIR, runCommand } from './child.ts';
import { summarize, type RunSummary } from './stats.ts';

/** What each `$n` of `JOB_SQL.insert` becomes in the pgbench script. */
const PARAM_VARS: Record<string, string> = {
  $1: ':owner', // owner_id
  $2: ':id', // id (unique per transaction)
  $3: ':id', // idempotency_key (fresh per transaction)
  $4: ':fp', // fingerprint
  $5: ':route',
  $6: ':input', // json
  $7: 'NULL', // metadata
  $8: ':providers', // json
  $9: ':ts', // created_at = updated_at
  $10: 'NULL', // trace_context
};

/** The pgbench script: a fresh random key per transaction, then the driver's statement. */
export function pgbenchScript(): string {
  const sql = JOB_SQL.insert.text.replace(/\$(\d+)/g, (m) => {
    const v = PARAM_VARS[m];
    if (!v) throw new Error(`no pgbench variable for ${m}`);
    return v;
  });
  return `\\set id random(1, 9000000000000000000)\n${sql.replace(/\s+/g, ' ').trim()};\n`;
}

export interface PgbenchResult extends RunSummary {
  readonly tps: number;
  readonly script: string;
}

/** Runs pgbench with `clients` connections for `seconds` against `dbName`. */
export async function runPgbench(o: { dbName: string; clients: number; seconds: number; host?: string; user?: string }): Promise<PgbenchResult> {
  const dir = join(BENCH_DIR, '.scratch', `pgbench-${process.pid}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const script = pgbenchScript();
  writeFileSync(join(dir, 'insert.sql'), script);
  const input = JSON.stringify({ messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] });
  const out = await runCommand(
    'pgbench',
    [
      '-n', '-M', 'prepared', '-h', o.host ?? '127.0.0.1', '-U', o.user ?? 'postgres',
      '-c', String(o.clients), '-j', String(Math.min(2, o.clients)), '-T', String(o.seconds),
      '-D', 'owner=bench', '-D', 'fp=sha256:0', '-D', 'route=summarize', '-D', `input=${input}`,
      '-D', 'providers=["primary"]', '-D', `ts=${new Date().toISOString()}`,
      '-f', join(dir, 'insert.sql'), '-l', '--log-prefix', join(dir, 'log'),
      o.dbName,
    ],
    { env: { PGAPPNAME: 'onejob-bench-pgbench' } },
  );
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1] ?? NaN);
  const lat: number[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.startsWith('log')) continue;
    for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
      const cols = line.split(' ');
      if (cols.length >= 3) lat.push(Number(cols[2]) / 1000);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const s = summarize(lat, o.seconds);
  return { ...s, rps: Math.round(tps * 10) / 10, tps, script };
}
